"""A page a role may not open says so; a JSON endpoint opened in the browser gets a page.

Two rules meet here. Pages a role may not open (a researcher on the clinician queue, a clinician
on reports) answer 403 "not available to your role", naming the roles the page is for: the
address says what the page is, so this tells nothing new. Objects stay Zulip's rule (DESIGN.md):
an object a user may not see is a 404 exactly like a missing one, and a role refused before any
lookup answers the same for an id that exists and one that does not.

A JSON endpoint (autosave, submit, the record's pages) opened as a page, from the address bar or
a link, gets a page saying what the address is for, before the view runs: nothing is read, so
nothing is audited.
"""

import pytest
from django.urls import reverse

from review.models import AuditEvent, Review
from review.services.reviews import review_get_or_start
from tests import factories

pytestmark = pytest.mark.django_db

ROLE_TEXT = "not available to your role"
# What a browser sends when the address bar or a link opens a URL.
NAVIGATION = {
    "HTTP_SEC_FETCH_MODE": "navigate",
    "HTTP_SEC_FETCH_DEST": "document",
    "HTTP_ACCEPT": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
}


def _text(response) -> str:
    return response.content.decode()


def _main(response) -> str:
    """The page's own content, without the header (whose sign-out form has a fresh token)."""
    return _text(response).split("<main", 1)[1].split("</main>", 1)[0]


def test_a_researcher_opening_the_clinician_queue_is_told_it_is_not_for_their_role(world, client):
    factories.sign_in(client, world.researcher)
    response = client.get(reverse("clinician_queue"))
    assert response.status_code == 403
    text = _text(response)
    assert ROLE_TEXT in text
    assert "for clinicians" in text
    assert "researcher" in text  # the role they hold
    assert "There is nothing here" not in text


def test_a_clinician_opening_reports_is_told_it_is_not_for_their_role(world, client):
    factories.sign_in(client, world.clinician)
    for name in ("scoring_reports", "scoring_runs", "generation_runs"):
        response = client.get(reverse(name))
        assert response.status_code == 403, name
        assert ROLE_TEXT in _text(response)
        assert "for researchers and admins" in _text(response)
    response = client.get(reverse("progress_index"))
    assert response.status_code == 403
    assert "for admins" in _text(response)


def test_a_refused_role_learns_nothing_about_whether_an_object_exists(world, client):
    factories.sign_in(client, world.researcher)
    there = client.get(reverse("clinician_review", args=[world.instruction.pk]))
    missing = client.get(reverse("clinician_review", args=[world.instruction.pk + 999]))
    assert there.status_code == missing.status_code == 403
    assert _main(there) == _main(missing)
    assert ROLE_TEXT in _main(there)
    assert world.instruction.question not in _text(there)


def test_an_object_a_clinician_may_not_see_still_reads_as_missing(world, client):
    factories.sign_in(client, world.clinician_other)
    there = client.get(reverse("clinician_review", args=[world.instruction.pk]))
    missing = client.get(reverse("clinician_review", args=[world.instruction.pk + 999]))
    assert there.status_code == missing.status_code == 404
    assert ROLE_TEXT not in _text(there)


def test_a_refused_role_on_a_json_endpoint_gets_json(world, client):
    review = review_get_or_start(assignment=world.assignment)
    factories.sign_in(client, world.researcher)
    for review_id in (review.pk, review.pk + 999):
        response = client.post(
            reverse("review_save", args=[review_id]),
            data="{}",
            content_type="application/json",
            HTTP_ACCEPT="application/json",
        )
        assert response.status_code == 403
        body = response.json()
        assert body["error"] == "role"
        assert ROLE_TEXT in body["message"]


def test_a_json_endpoint_opened_as_a_page_explains_itself_and_reads_nothing(world, client):
    review = review_get_or_start(assignment=world.assignment)
    factories.sign_in(client, world.clinician)
    before = AuditEvent.objects.count()
    for url in (
        reverse("review_save", args=[review.pk]),
        reverse("review_submit", args=[review.pk]),
        reverse("record_events", args=[world.instruction.pk]),
        reverse("record_excerpt", args=[world.instruction.pk]),
    ):
        response = client.get(url, **NAVIGATION)
        assert response["Content-Type"].startswith("text/html"), url
        assert response.status_code in (405, 406), url
        text = _text(response)
        assert "not a page" in text, url
        assert reverse("clinician_queue") in text, url
        assert "{" not in _main(response), url
    assert AuditEvent.objects.count() == before  # no record was read
    assert Review.objects.get(pk=review.pk).version == review.version


def test_a_json_endpoint_opened_as_a_page_says_the_same_whoever_asks(world, client):
    review = review_get_or_start(assignment=world.assignment)
    pages = []
    for user, review_id in (
        (world.clinician, review.pk),
        (world.clinician_other, review.pk),
        (world.clinician_other, review.pk + 999),
    ):
        factories.sign_in(client, user)
        response = client.get(reverse("review_save", args=[review_id]), **NAVIGATION)
        pages.append((response.status_code, _main(response)))
        client.logout()
    assert pages[0] == pages[1] == pages[2]


def test_scripts_still_get_json_from_json_endpoints(world, client):
    factories.sign_in(client, world.clinician)
    response = client.get(
        reverse("record_events", args=[world.instruction.pk]), HTTP_ACCEPT="application/json"
    )
    assert response.status_code == 200
    assert "html" in response.json()
    review = review_get_or_start(assignment=world.assignment)
    response = client.get(reverse("review_save", args=[review.pk]))
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"
