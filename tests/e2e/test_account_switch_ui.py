"""A tab whose browser is now signed in as another account says so, stops, and keeps its edits.

An outside test: clinician1 has a review open in tab 1; in tab 2 the browser signs out and signs
in as clinician2. In tab 1, a changed rank and "I have signed in: save now" showed "Not saved
yet… Not found. Trying again in 4 s" for ever, and the header still named clinician1. The edit
was kept and never saved to clinician2's account (the server scopes reviews to their clinician);
only the page misreported. Now it says which account the review belongs to, keeps the edit in
the tab, stops retrying, and saves once that account is signed in again.
"""

import json

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from review.models import Review, Role
from tests import factories
from tests.e2e.test_review_ui import _cards, _open, _values, _wait_saved
from tests.e2e.test_review_ui import review_world as review_world  # the fixture
from tests.review import review_data
from tests.scoring.rubric_data import assigned_grading

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SHOTS = "/tmp/small2-shots"


def _stored_edits(page) -> list[dict]:
    raw = page.evaluate(
        "() => Object.keys(sessionStorage).filter(k => k.startsWith('medalign-review:'))"
        ".map(k => sessionStorage.getItem(k))"
    )
    return [e for item in raw for e in json.loads(item)["edits"]]


def test_a_tab_says_another_account_is_signed_in_and_keeps_the_edit(
    live_server, browser, review_world
):
    instruction, _, clinician1 = review_world
    clinician2 = factories.make_user("other@example.edu", roles=[Role.CLINICIAN])
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(10_000)
    context.add_cookies([factories.session_cookie(clinician1, live_server.url)])
    tab1 = context.new_page()
    _open(tab1, live_server, instruction)
    saves: list[str] = []
    tab1.on("request", lambda r: saves.append(r.url) if r.url.endswith("/draft/") else None)

    # Tab 2 signs out; tab 1's next save finds the session gone. Then tab 2 signs in as
    # clinician2, and in tab 1 the clinician changes a rank and says they have signed in.
    tab2 = context.new_page()
    context.clear_cookies(name="sessionid")
    _cards(tab1).nth(1).get_by_label("Rank of Response B").select_option("1")
    expect(tab1.get_by_test_id("signin-dialog")).to_be_visible()
    context.add_cookies([factories.session_cookie(clinician2, live_server.url)])
    tab2.goto(live_server.url + reverse("clinician_queue"))
    tab1.get_by_role("button", name="I have signed in: save now").click()

    status = tab1.locator("#save-status")
    expect(status).to_have_attribute("data-state", "other-account")
    expect(status).to_contain_text("signed in as a different account")
    bar = tab1.locator("#notice-bar")
    expect(bar).to_contain_text("This browser is now signed in as a different account")
    expect(bar).to_contain_text("clin@example.edu")  # the account that opened the review
    expect(bar).to_contain_text("kept in this tab")
    # The header no longer names clinician1 as the signed-in account.
    expect(tab1.locator("[data-testid=nav-account] .who")).to_have_text("Another account")
    tab1.screenshot(path=f"{SHOTS}/account-switch.png")
    # It stopped: no retry loop, no "Trying again".
    tried = len(saves)
    tab1.wait_for_timeout(6_000)
    assert len(saves) == tried
    assert "Trying again" not in status.inner_text()
    # The edit is kept in the tab and was saved to no account.
    assert [e["field"] for e in _stored_edits(tab1)] == ["rank"]
    assert _values(instruction)["B"].rank is None
    assert not Review.objects.filter(assignment__clinician=clinician2).exists()

    # clinician1 signs in again: the kept edit is saved to their review.
    context.clear_cookies(name="sessionid")
    context.add_cookies([factories.session_cookie(clinician1, live_server.url)])
    tab2.goto(live_server.url + reverse("session_resumed"))
    _wait_saved(tab1)
    assert _values(instruction)["B"].rank == 1
    expect(tab1.locator("[data-testid=nav-account] .who")).to_have_text("clin@example.edu")
    context.close()


def test_the_grading_page_says_another_account_is_signed_in(live_server, browser):
    # The grading page's save client (grading.js) followed the same pattern and is fixed alike.
    factories.active_dua()
    dataset = review_data.make_dataset("e2e-grading-switch")
    patient = review_data.make_record(dataset, "P-GSW", n_events=20)
    instruction = review_data.make_instruction(dataset, patient, "I-GSW", n_responses=2)
    grader, grading = assigned_grading(instruction, "grader-sw@example.edu")
    other = factories.make_user("grader-other@example.edu", roles=[Role.CLINICIAN])
    context = browser.new_context()
    context.set_default_timeout(10_000)
    context.add_cookies([factories.session_cookie(grader, live_server.url)])
    tab1 = context.new_page()
    tab1.goto(live_server.url + reverse("grading_page", args=[grading.pk]))
    expect(tab1.locator("#grading-form")).to_have_attribute("data-ready", "true")
    context.clear_cookies(name="sessionid")
    context.add_cookies([factories.session_cookie(other, live_server.url)])
    tab1.get_by_test_id("criterion").nth(0).get_by_role("button", name="Met", exact=True).click()
    status = tab1.get_by_test_id("save-status")
    expect(status).to_have_attribute("data-state", "other-account")
    expect(tab1.locator("#notice-bar")).to_contain_text(
        "This grading belongs to grader-sw@example.edu"
    )
    tab1.wait_for_timeout(3_000)
    expect(status).to_have_attribute("data-state", "other-account")  # no retry loop
    context.clear_cookies(name="sessionid")
    context.add_cookies([factories.session_cookie(grader, live_server.url)])
    context.new_page().goto(live_server.url + reverse("session_resumed"))
    expect(status).to_contain_text("All changes saved")
    grading.refresh_from_db()
    assert [pair[0] for pair in grading.draft["fields"].values()] == [True]
    context.close()
