"""Reviewing quality in a real browser: a calibration review and its feedback; an adjudication
from the queue to the resolved judgement, through a reload and a second tab; the admin's
quality page at desktop (1440×900) and phone (390×844), with axe at 0 violations.

``A11Y_SCREENSHOTS=DIR`` keeps a screenshot of every page state axe scans.
"""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from review.models import AdjudicatedJudgement, Adjudication, Assignment, Role
from review.selectors.adjudications import adjudication_values
from review.services import adjudications as adjudication_services
from review.services import quality as quality_services
from tests import factories
from tests.e2e.test_accessibility import DESKTOP, PHONE, _watch_csp, assert_no_axe_violations
from tests.e2e.test_review_ui import _seed_tags
from tests.review.quality_data import RELEASE, make_world, submit

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
NAMES = list(RELEASE)


def _sign_in(context, live_server, user) -> None:
    context.add_cookies([factories.session_cookie(user, live_server.url)])


@pytest.fixture
def w(db):
    _seed_tags()
    w = make_world(n_instructions=8, n_clinicians=3, prefix="U")
    # Two calibration items with a senior clinician's reason.
    for k, instruction in enumerate(w.instructions[6:]):
        ids = dict(instruction.responses.values_list("model_name", "id"))
        quality_services.gold_item_set(
            study=w.study,
            instruction=instruction,
            use="calibration",
            source="senior",
            judgements={ids[name]: value for name, value in RELEASE.items()},
            reason=f"Calibration reason {k}: the March creatinine is the latest.",
            senior=w.clinicians[1],
            actor=w.admin,
        )
    # Two clinicians disagree on the first two instructions; the third reviews them all.
    split = {**RELEASE, NAMES[2]: (3, True)}
    for k, instruction in enumerate(w.instructions[:6]):
        submit(factories.assign(instruction, w.clinicians[0]), RELEASE)
        submit(factories.assign(instruction, w.clinicians[1]), split if k < 2 else RELEASE)
    return w


def _cards(page):
    return page.locator("[data-testid=response]")


def _ready(page):
    page.wait_for_selector("body[data-review-ready]")


def _wait_saved(page, timeout=15_000) -> None:
    page.wait_for_selector("#save-status[data-state=saved]", timeout=timeout)


def test_a_calibration_review_shows_the_reference_and_its_reason(live_server, page, w):
    newcomer = factories.make_user("u-new@example.edu", roles=[Role.CLINICIAN])
    quality_services.calibration_assign(study=w.study, clinician=newcomer, actor=w.admin)
    _watch_csp(page.context)
    _sign_in(page.context, live_server, newcomer)
    page.goto(live_server.url + reverse("clinician_queue"))
    expect(page.locator("[data-testid=queue-calibration]")).to_have_count(2)
    page.locator("[data-testid=queue] a").first.click()
    _ready(page)
    expect(page.locator("[data-testid=calibration]")).to_contain_text("once you submit")
    expect(page.locator("[data-testid=calibration-feedback]")).to_have_count(0)
    # Rank with the keys and mark every response, as on any review.
    for k in range(4):
        _cards(page).nth(k).focus()
        page.keyboard.press(str(k + 1))
        page.keyboard.press("c" if k < 2 else "x")
    _wait_saved(page)
    page.get_by_role("button", name="Submit review").click()
    # Submitted, the page shows the clinician's judgement beside the reference, and why.
    feedback = page.locator("[data-testid=calibration-feedback]")
    expect(feedback).to_be_visible()
    expect(page.locator("[data-testid=calibration-reason]")).to_contain_text(
        "the March creatinine is the latest"
    )
    expect(page.locator("[data-testid=feedback-row]")).to_have_count(4)
    assert_no_axe_violations(page, "calibration feedback")


def _adjudication(w):
    plan = adjudication_services.adjudications_create(
        study=w.study,
        instruction_ids=[w.instructions[0].pk],
        adjudicator=w.adjudicator,
        actor=w.admin,
    )
    return plan.created[0]


def test_an_adjudication_from_the_queue_to_the_resolved_judgement(live_server, browser, w):
    adjudication = _adjudication(w)
    context = browser.new_context(viewport=DESKTOP)
    _watch_csp(context)
    _sign_in(context, live_server, w.adjudicator)
    tab = context.new_page()
    tab.goto(live_server.url + reverse("adjudication_queue"))
    tab.get_by_role("link", name=w.instructions[0].question[:40]).click()
    _ready(tab)
    expect(tab.locator("[data-testid=disagreement]")).to_contain_text("they split on whether")
    expect(tab.locator("[data-testid=reviewer-judgements]")).to_have_count(4)
    expect(tab.locator("[data-testid=reviewer-judgements]").first).to_contain_text("Reviewer 2")
    assert_no_axe_violations(tab, "adjudication page")
    # Rank two by keyboard, reload: the server has them.
    _cards(tab).nth(0).focus()
    tab.keyboard.press("1")
    tab.keyboard.press("c")
    _cards(tab).nth(1).focus()
    tab.keyboard.press("2")
    _wait_saved(tab)
    tab.reload()
    _ready(tab)
    expect(_cards(tab).nth(0).get_by_label("Rank of Response A")).to_have_value("1")
    expect(_cards(tab).nth(1).get_by_label("Rank of Response B")).to_have_value("2")
    # A second tab of the same adjudication: edits from both are kept.
    other = context.new_page()
    other.goto(tab.url)
    _ready(other)
    _cards(other).nth(2).get_by_label("Rank of Response C").select_option("3")
    _cards(other).nth(2).get_by_role("button", name="Incorrect").click()
    _wait_saved(other)
    tab.bring_to_front()
    tab.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    expect(_cards(tab).nth(2).get_by_label("Rank of Response C")).to_have_value("3")
    _cards(tab).nth(3).get_by_label("Rank of Response D").select_option("4")
    for k in (1, 3):
        _cards(tab).nth(k).get_by_role("button", name="Incorrect").click()
    # Submit without a reason: the page says what is missing and keeps everything.
    tab.get_by_role("button", name="Submit adjudication").click()
    expect(tab.locator("#submit-errors")).to_contain_text("Say why you resolve")
    tab.locator("#adjudication-reason").fill("The record's latest creatinine settles it.")
    _wait_saved(tab)
    tab.get_by_role("button", name="Submit adjudication").click()
    expect(tab.locator("[data-testid=submitted]")).to_contain_text("adjudication is now read-only")
    adjudication.refresh_from_db()
    assert adjudication.status == Adjudication.Status.SUBMITTED
    assert adjudication.reason == "The record's latest creatinine settles it."
    ranks = sorted(AdjudicatedJudgement.objects.values_list("rank", flat=True))
    assert ranks == [1, 2, 3, 4]
    # The other tab hears of the submission at once (as the review page's tabs do): it stops
    # taking edits and says that everything it changed is in the submitted adjudication.
    other.bring_to_front()
    expect(other.locator("#save-status")).to_have_attribute("data-state", "conflict")
    expect(other.locator("[data-testid=notice]")).to_contain_text(
        "Everything you changed here is in the submitted adjudication"
    )
    expect(_cards(other).nth(0).get_by_role("button", name="Incorrect")).to_be_disabled()
    values, _reason = adjudication_values(Adjudication.objects.get(pk=adjudication.pk))
    assert sorted(v.rank for v in values.values()) == [1, 2, 3, 4]
    context.close()


def test_the_admins_quality_page_at_desktop_and_phone(live_server, browser, w):
    quality_services.clinician_exclude(
        study=w.study, clinician=w.clinicians[1], reason="Splits verdicts often.", actor=w.admin
    )
    for width in (DESKTOP, PHONE):
        context = browser.new_context(viewport=width)
        _watch_csp(context)
        _sign_in(context, live_server, w.admin)
        page = context.new_page()
        page.goto(live_server.url + reverse("admin_quality", args=[w.dataset.pk]))
        expect(page.locator("[data-testid=quality-row]")).to_have_count(2)
        expect(page.locator("[data-testid=disagreement]")).to_have_count(2)
        expect(page.locator("[data-testid=excluded]")).to_contain_text("Splits verdicts often.")
        # Nothing runs off a phone's screen sideways.
        overflow = page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, f"{width}: {overflow}px sideways"
        assert_no_axe_violations(page, f"quality page {width['width']}")
        context.close()
    # Sending the disagreements to adjudication from the page.
    context = browser.new_context(viewport=DESKTOP)
    _sign_in(context, live_server, w.admin)
    page = context.new_page()
    page.goto(live_server.url + reverse("admin_quality", args=[w.dataset.pk]))
    for box in page.locator("[data-testid=disagreement] input[type=checkbox]").all():
        box.check()
    page.get_by_role("button", name="Send to adjudication").click()
    expect(page.locator(".messages")).to_contain_text("2 sent to adjudication")
    assert Adjudication.objects.count() == 2
    assert not Assignment.objects.filter(clinician=w.adjudicator).exists()
    context.close()
