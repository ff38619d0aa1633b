"""axe-core (WCAG 2.1 A and AA) on the review page in each state that matters: as opened
(reopened by an admin, so its notice shows), ranked with a tie and marked, errors shown on
submit, a comment over the limit, the full record, one type of it and a search, the keyboard
help, the compare dialog, access lapsed, signed out, and submitted (read-only, "Submitted"
beside the button). Each state is scanned at desktop and phone width."""

import pytest
from django.urls import reverse

from review.models import Review
from review.services.reviews import review_get_or_start, review_reopen
from tests.e2e.test_accessibility import (  # noqa: F401 - context and tab are fixtures
    _clinician_world,
    assert_no_axe_violations,
    context,
    sign_in_with_totp,
    tab,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_review_page_states_have_no_axe_violations(live_server, tab):  # noqa: F811
    base, page = live_server.url, tab
    dataset, instructions, clinician, admin, assignments = _clinician_world()
    reopened = review_get_or_start(assignment=assignments[1])
    Review.objects.filter(pk=reopened.pk).update(status=Review.Status.SUBMITTED)
    review_reopen(review=reopened, actor=admin, reason="Please rank D again.")
    sign_in_with_totp(page, base, clinician.email)

    page.goto(base + reverse("clinician_review", args=[instructions[1].pk]))
    page.wait_for_selector("body[data-review-ready]")
    assert "Please rank D again." in page.inner_text("main")
    assert_no_axe_violations(page, "review page, reopened")

    page.goto(base + reverse("clinician_review", args=[instructions[0].pk]))
    page.wait_for_selector("body[data-review-ready]")
    assert_no_axe_violations(page, "review page, as opened")
    page.locator("#submit-review").click()
    page.wait_for_selector("#submit-errors:not([hidden])")
    assert_no_axe_violations(page, "review page, errors shown")

    cards = page.locator("[data-testid=response]")
    for i, key in enumerate(("1", "=", "3", "4")):
        cards.nth(i).focus()
        page.keyboard.press(key)
        page.keyboard.press("c" if i != 2 else "x")
    cards.nth(2).locator(".tags-box summary").click()
    cards.nth(2).locator(".comment-box summary").click()
    page.wait_for_selector("#save-status[data-state=saved]")
    assert_no_axe_violations(page, "review page, ranked with a tie and marked")
    comment = cards.nth(2).locator("textarea")
    comment.fill("x" * 5_001)
    page.wait_for_selector("#save-status[data-state=error]")
    assert_no_axe_violations(page, "review page, a comment over the limit")
    comment.fill("Within the limit.")
    page.wait_for_selector("#save-status[data-state=saved]")

    page.get_by_role("tab", name="Full record").click()
    page.wait_for_selector("#record-list .tl-event")
    assert_no_axe_violations(page, "review page, full record")
    page.fill("#record-q", "creatinine")
    page.press("#record-q", "Enter")
    page.wait_for_selector("#record-list mark")
    assert_no_axe_violations(page, "review page, record search")
    page.select_option("#record-type", "note")
    page.wait_for_selector("#record-summary:has-text('of type note')")
    assert_no_axe_violations(page, "review page, timeline of one type")

    cards.nth(0).focus()
    page.keyboard.press("?")
    page.wait_for_selector("#help-dialog[open]")
    assert_no_axe_violations(page, "review page, keyboard help")
    page.keyboard.press("Escape")
    cards.nth(0).get_by_role("button", name="Compare…").click()
    page.wait_for_selector("#compare-dialog[open]")
    assert_no_axe_violations(page, "review page, compare")
    page.keyboard.press("Escape")

    page.locator("#submit-review").click()
    page.wait_for_selector("#save-status[data-state=submitted]")
    assert_no_axe_violations(page, "review page, just submitted")
    page.reload()
    page.wait_for_selector("body[data-review-ready]")
    assert_no_axe_violations(page, "review page, submitted (read-only)")

    # Access lapsed (here: the approval revoked): the notice names it and stops.
    page.goto(base + reverse("clinician_review", args=[instructions[2].pk]))
    page.wait_for_selector("body[data-review-ready]")
    page.route(
        "**/draft/",
        lambda route: route.fulfill(
            status=403,
            content_type="application/json",
            body='{"error": "forbidden", "requirement": "approval", "access_url": "/access/", '
            '"message": "An admin revoked your access to the records."}',
        ),
    )
    page.locator("[data-testid=response]").nth(1).get_by_role(
        "button", name="Correct", exact=True
    ).click()
    page.wait_for_selector("#save-status[data-state=blocked]")
    assert_no_axe_violations(page, "review page, access lapsed")
    page.unroute("**/draft/")

    # Signed out in another tab: the sign-in dialog and the notice.
    page.goto(base + reverse("clinician_review", args=[instructions[2].pk]))
    page.wait_for_selector("body[data-review-ready]")
    other = page.context.new_page()
    other.goto(base + reverse("clinician_queue"))
    other.get_by_role("button", name="Sign out").click()
    other.wait_for_load_state()
    page.locator("[data-testid=response]").nth(0).get_by_role(
        "button", name="Correct", exact=True
    ).click()
    page.wait_for_selector("#signin-dialog[open]")
    assert_no_axe_violations(page, "review page, signed out")
