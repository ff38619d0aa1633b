"""The review page keeps every edit whatever a 400 says (review.js's save client).

A proxy in front of the app answers some requests with its own HTML 400; the page took any 400
that named no edit as a refusal of all of them and dropped every pending edit. And text the
database cannot store (a NUL, a lone surrogate: a paste from another program) made the server
answer 500 and the page retry for ever. Now a 400 that names no edit keeps everything and tries
again; the server refuses only the edit with that text, saves the rest, and the page holds the
refused edit, saying which, until the clinician changes it.
"""

import json

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from tests import factories
from tests.e2e.test_review_ui import _cards, _comment, _open, _sign_in, _values, _wait_saved
from tests.e2e.test_review_ui import review_world as review_world  # the fixture
from tests.review import review_data
from tests.scoring.rubric_data import assigned_grading

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PROXY_400 = (
    "<html><head><title>400 Bad Request</title></head><body><center><h1>400 Bad Request</h1>"
    "</center><hr><center>nginx</center></body></html>"
)


def _stored_edits(page) -> list[dict]:
    """The edits the review page keeps in this tab's sessionStorage (not yet acknowledged)."""
    raw = page.evaluate(
        "() => Object.keys(sessionStorage).filter(k => k.startsWith('medalign-review:'))"
        ".map(k => sessionStorage.getItem(k))"
    )
    return [e for item in raw for e in json.loads(item)["edits"]]


def test_a_proxys_html_400_drops_no_edit(live_server, page, review_world):
    instruction, _, clinician = review_world
    _sign_in(page.context, live_server, clinician)
    _open(page, live_server, instruction)
    refusals = []

    def proxy(route):
        refusals.append(route.request.url)
        route.fulfill(status=400, content_type="text/html", body=PROXY_400)

    page.route("**/draft/", proxy)
    cards = _cards(page)
    cards.nth(1).get_by_role("button", name="Incorrect").click()
    _comment(cards.nth(0), "The dose is wrong.")
    page.wait_for_selector("#save-status[data-state=offline]")
    page.wait_for_function(
        "() => document.querySelector('#save-status').textContent.includes('2 changes')"
    )
    assert refusals
    assert len(_stored_edits(page)) == 2  # kept in the tab, across a reload too
    page.reload()
    page.wait_for_selector("body[data-review-ready]")
    assert len(_stored_edits(page)) == 2
    page.unroute("**/draft/")
    _wait_saved(page, timeout=30_000)
    values = _values(instruction)
    assert values["B"].is_correct is False
    assert values["A"].comment == "The dose is wrong."


def test_text_the_database_cannot_store_is_held_and_the_rest_is_saved(
    live_server, page, review_world
):
    instruction, _, clinician = review_world
    _sign_in(page.context, live_server, clinician)
    _open(page, live_server, instruction)
    cards = _cards(page)
    _comment(cards.nth(0), "placeholder")
    # A NUL pasted into the comment: typed through the DOM, as a paste from a PDF would arrive.
    cards.nth(0).locator("textarea").evaluate(
        "el => { el.value = 'Check the K' + String.fromCharCode(0) + '+ value';"
        " el.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    cards.nth(1).get_by_role("button", name="Incorrect").click()
    page.wait_for_function(
        "() => document.querySelector('#save-status').textContent.includes('cannot be saved')"
    )
    status = page.locator("#save-status").inner_text()
    assert "the comment on Response A holds a character that cannot be saved" in status
    page.wait_for_timeout(1500)  # time to save what it can
    values = _values(instruction)
    assert values["B"].is_correct is False  # the other edit of the batch is saved
    assert values["A"].comment == ""
    held = [e for e in _stored_edits(page) if e.get("refused")]
    assert [e["field"] for e in held] == ["comment"]  # kept in the tab, not dropped
    _comment(cards.nth(0), "Check the K+ value")
    _wait_saved(page)
    assert _values(instruction)["A"].comment == "Check the K+ value"


def test_the_grading_page_keeps_its_edits_across_a_proxys_html_400(live_server, page):
    # The grading page's save client (grading.js) followed the same rule and is fixed alike.
    factories.active_dua()
    dataset = review_data.make_dataset("e2e-grading-400")
    patient = review_data.make_record(dataset, "P-G400", n_events=20)
    instruction = review_data.make_instruction(dataset, patient, "I-G400", n_responses=2)
    grader, grading = assigned_grading(instruction, "grader-400@example.edu")
    page.context.add_cookies([factories.session_cookie(grader, live_server.url)])
    page.goto(live_server.url + reverse("grading_page", args=[grading.pk]))
    expect(page.locator("#grading-form")).to_have_attribute("data-ready", "true")
    page.route(
        "**/draft/",
        lambda route: route.fulfill(status=400, content_type="text/html", body=PROXY_400),
    )
    criteria = page.get_by_test_id("criterion")
    criteria.nth(0).get_by_role("button", name="Met", exact=True).click()
    criteria.nth(1).get_by_role("button", name="Not met", exact=True).click()
    expect(page.get_by_test_id("save-status")).to_contain_text("Not saved yet: 2 changes")
    page.unroute("**/draft/")
    expect(page.get_by_test_id("save-status")).to_contain_text("All changes saved", timeout=30_000)
    grading.refresh_from_db()
    assert sorted(pair[0] for pair in grading.draft["fields"].values()) == [False, True]
