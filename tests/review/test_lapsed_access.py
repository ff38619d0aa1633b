"""A clinician whose access lapses while a review page is open is told which requirement failed
(approval, training certificate, DUA or second factor), in the JSON the page reads; the save
endpoint refuses rather than storing anything, and nothing is cut."""

import json
from datetime import timedelta

import pytest
from allauth.mfa.models import Authenticator
from django.urls import reverse
from django.utils import timezone

from review.access import clear_all_cached_access, clear_cached_access
from review.models import AccessApplication, DUAVersion, Review, Role
from review.selectors.drafts import review_values
from review.services.reviews import MAX_COMMENT_CHARS, review_get_or_start
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(client):
    factories.active_dua()
    dataset = review_data.make_dataset()
    patient = review_data.make_record(dataset, "P-LAPSE", n_events=40)
    instruction = review_data.make_instruction(dataset, patient, "I-LAPSE")
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    assignment = review_data.assign(instruction, clinician)
    review = review_get_or_start(assignment=assignment)
    client.force_login(clinician)
    return clinician, review


def _save(client, review: Review, edits: list[dict]) -> tuple[int, dict]:
    response = client.post(
        reverse("review_save", args=[review.pk]),
        json.dumps({"edits": edits, "tab": "t", "seq": 1}),
        content_type="application/json",
        HTTP_ACCEPT="application/json",
    )
    return response.status_code, response.json()


def _rank(review: Review) -> list[dict]:
    return [{"handle": review.handles[0], "field": "rank", "value": 1, "at": 1}]


def _lapse(clinician, **fields) -> None:
    AccessApplication.objects.filter(user=clinician).update(**fields)
    clear_cached_access(clinician)


def test_a_revoked_clinician_is_told_the_approval_was_revoked(client, world):
    clinician, review = world
    _lapse(clinician, status=AccessApplication.Status.REVOKED)
    status, body = _save(client, review, _rank(review))
    assert status == 403
    assert body["requirement"] == "approval" and "revoked" in body["message"]
    assert body["access_url"] == reverse("application_status")


def test_an_expired_approval_names_its_date(client, world):
    clinician, review = world
    yesterday = timezone.localdate() - timedelta(days=1)
    _lapse(clinician, expires_on=yesterday)
    status, body = _save(client, review, _rank(review))
    assert (status, body["requirement"]) == (403, "approval")
    assert f"expired on {yesterday:%-d %b %Y}" in body["message"]


def test_an_expired_training_certificate_is_named(client, world):
    clinician, review = world
    _lapse(clinician, certificate_expires_on=timezone.localdate() - timedelta(days=1))
    status, body = _save(client, review, _rank(review))
    assert (status, body["requirement"]) == (403, "training certificate")
    assert "training certificate expired" in body["message"]


def test_an_unsigned_new_dua_is_named(client, world):
    _, review = world
    DUAVersion.objects.update(is_active=False)
    DUAVersion.objects.create(version="2.0", text="New terms.", is_active=True)
    clear_all_cached_access()
    status, body = _save(client, review, _rank(review))
    assert (status, body["requirement"]) == (403, "DUA")
    assert "data use agreement" in body["message"]


def test_a_removed_second_factor_is_named(client, world):
    clinician, review = world
    Authenticator.objects.filter(user=clinician).delete()
    clear_cached_access(clinician)
    status, body = _save(client, review, _rank(review))
    assert (status, body["requirement"]) == (403, "second factor")
    assert "authenticator" in body["message"]


def test_the_server_refuses_an_over_long_comment_and_cuts_nothing(client, world):
    _, review = world
    handle = review.handles[0]
    ok = [{"handle": handle, "field": "comment", "value": "kept", "at": 1}]
    assert _save(client, review, ok)[0] == 200
    long = "x" * (MAX_COMMENT_CHARS + 1)
    status, body = _save(client, review, [{**ok[0], "value": long, "at": 2}])
    assert status == 400 and f"longer than {MAX_COMMENT_CHARS} characters" in body["message"]
    review.refresh_from_db()
    assert review_values(review)[0][handle].comment == "kept"
