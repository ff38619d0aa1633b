"""Rubrics in Chromium: a clinician writes a rubric beside the record and the reference, a
second clinician accepts it, and two clinicians grade two responses against it, one by keys
(with a reload in the middle: nothing is lost), one by clicks."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from review.models import CriterionGrade, CriterionGrading, Role, Rubric
from review.services import grading as grading_services
from review.services import rubrics as rubric_services
from tests import factories

# The accessibility scan's browser context (it watches for CSP violations) and its tab.
from tests.e2e.test_accessibility import context, tab  # noqa: F401
from tests.review import review_data

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _sign_in(page, live_server, user) -> None:
    page.context.clear_cookies()
    page.context.add_cookies([factories.session_cookie(user, live_server.url)])


def test_a_rubric_is_written_accepted_and_graded(live_server, page):
    factories.active_dua()
    dataset = review_data.make_dataset("e2e-rubrics")
    patient = review_data.make_record(dataset, "P-E2E", n_events=40)
    instruction = review_data.make_instruction(dataset, patient, "I-E2E", n_responses=2)
    study = factories.put_in_study(instruction)
    author = factories.make_user("author@example.edu", roles=[Role.CLINICIAN])
    reviewer = factories.make_user("reviewer@example.edu", roles=[Role.CLINICIAN])
    graders = [
        factories.make_user(f"grader{i}@example.edu", roles=[Role.CLINICIAN]) for i in (1, 2)
    ]
    rubric = rubric_services.rubric_assign(
        instruction=instruction, author=author, reviewer=reviewer, actor=None
    )
    page.set_viewport_size({"width": 1440, "height": 900})

    # The author writes two criteria, the record excerpt and the reference answer at hand.
    _sign_in(page, live_server, author)
    page.goto(live_server.url + reverse("rubric_work"))
    page.get_by_test_id("to-write").get_by_role("link").click()
    expect(page.get_by_test_id("references")).to_contain_text("REFERENCE: creatinine")
    expect(page.get_by_test_id("record-excerpt")).to_be_visible()
    # The whole record is a search away, as on the review page.
    page.get_by_label("Search the record").fill("pericardial effusion")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.get_by_test_id("record-list")).to_contain_text("pericardial effusion")
    page.get_by_label("New criterion", exact=True).nth(0).fill(
        "States the latest creatinine with its date."
    )
    page.get_by_label("Points of the new criterion", exact=True).nth(0).fill("7")
    page.get_by_label("Tags of the new criterion", exact=True).nth(0).fill("axis:accuracy")
    page.get_by_label("New criterion", exact=True).nth(1).fill("Invents a creatinine value.")
    page.get_by_label("Points of the new criterion", exact=True).nth(1).fill("-8")
    page.get_by_label("Tags of the new criterion", exact=True).nth(1).fill("axis:accuracy")
    page.get_by_test_id("send-for-review").click()
    expect(page.get_by_text("Sent for review by a second clinician.")).to_be_visible()

    # A second clinician reads it and accepts it.
    _sign_in(page, live_server, reviewer)
    page.goto(live_server.url + reverse("rubric_work"))
    page.get_by_test_id("to-review").get_by_role("link").click()
    expect(page.get_by_label("Criterion 2", exact=True)).to_have_value(
        "Invents a creatinine value."
    )
    page.get_by_test_id("accept").click()
    expect(page.get_by_text("Accepted: clinicians can now grade with it.")).to_be_visible()
    rubric.refresh_from_db()
    assert rubric.status == Rubric.Status.ACCEPTED

    grading_services.gradings_assign(rubric=rubric, study=study, clinicians=graders, actor=None)

    # The first grader uses the keys: y / n on a criterion, the focus moving on by itself.
    _sign_in(page, live_server, graders[0])
    page.goto(live_server.url + reverse("rubric_work"))
    page.get_by_test_id("to-grade").get_by_role("link").click()
    criteria = page.get_by_test_id("criterion")
    expect(criteria).to_have_count(4)  # two responses, two criteria
    # The keys work once grading.js has bound them (under CI's load the page can be painted
    # before its deferred script ran: the presses went nowhere).
    expect(page.locator("#grading-form")).to_have_attribute("data-ready", "true")
    criteria.nth(0).focus()
    page.keyboard.press("y")
    page.keyboard.press("n")
    page.keyboard.press("n")
    expect(page.get_by_test_id("save-status")).to_contain_text("All changes saved")
    page.reload()  # nothing is lost: the server has the three verdicts
    expect(criteria.nth(0)).to_have_attribute("data-met", "true")
    expect(criteria.nth(2)).to_have_attribute("data-met", "false")
    page.get_by_test_id("submit-grading").click()
    expect(page.locator("#submit-errors")).to_contain_text("1 not marked yet")
    # The session ends: the verdict is kept and said to be unsaved; signing in again (the
    # sign-in window tells every page of this browser) sends it.
    page.context.clear_cookies(name="sessionid")
    criteria.nth(3).focus()
    page.keyboard.press("n")
    expect(page.get_by_test_id("save-status")).to_contain_text("Signed out")
    expect(page.locator("#signin-open")).to_be_visible()
    page.context.add_cookies([factories.session_cookie(graders[0], live_server.url)])
    page.evaluate("new BroadcastChannel('medalign-session').postMessage('signed-in')")
    expect(page.get_by_test_id("save-status")).to_contain_text("All changes saved")
    page.get_by_test_id("submit-grading").click()
    expect(page.get_by_test_id("save-status")).to_contain_text("Submitted")

    # The second grader clicks.
    _sign_in(page, live_server, graders[1])
    grading = CriterionGrading.objects.get(clinician=graders[1])
    page.goto(live_server.url + reverse("grading_page", args=[grading.pk]))
    expect(page.locator("#grading-form")).to_have_attribute("data-ready", "true")
    # The server cannot be reached for the first verdict: the page never says "saved" before
    # the server acknowledged it, keeps it, and sends it once the server answers again.
    page.route("**/draft/", lambda route: route.abort())
    criteria.nth(0).get_by_role("button", name="Met", exact=True).click()
    expect(page.get_by_test_id("save-status")).to_contain_text("Not saved yet")
    page.unroute("**/draft/")
    expect(page.get_by_test_id("save-status")).to_contain_text("All changes saved", timeout=15_000)
    for i, verdict in enumerate(["Not met", "Met", "Met"], start=1):
        criteria.nth(i).get_by_role("button", name=verdict, exact=True).click()
    page.get_by_test_id("submit-grading").click()
    expect(page.get_by_test_id("save-status")).to_contain_text("Submitted")

    grades = CriterionGrade.objects.filter(rubric=rubric)
    assert grades.count() == 2 * 2 * 2
    by_grader = {
        g.pk: sorted(grades.filter(clinician=g).values_list("met", flat=True)) for g in graders
    }
    assert by_grader[graders[0].pk] == [False, False, False, True]
    assert by_grader[graders[1].pk] == [False, True, True, True]


def test_rubric_pages_have_no_axe_violations(live_server, tab):  # noqa: F811
    from tests.e2e.test_accessibility import visit

    base, page = live_server.url, tab
    factories.active_dua()
    dataset = review_data.make_dataset("e2e-rubrics-axe")
    patient = review_data.make_record(dataset, "P-AXE", n_events=40)
    first = review_data.make_instruction(dataset, patient, "I-AXE-1", n_responses=2)
    second = review_data.make_instruction(dataset, patient, "I-AXE-2", n_responses=2)
    study = factories.put_in_study(first, second)
    author = factories.make_user("author@example.edu", roles=[Role.CLINICIAN])
    reviewer = factories.make_user("reviewer@example.edu", roles=[Role.CLINICIAN])
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    criteria = [
        rubric_services.CriterionInput("Names the value.", 5, ("axis:accuracy",)),
        rubric_services.CriterionInput("Invents one.", -5, ()),
    ]
    accepted = rubric_services.rubric_assign(
        instruction=first, author=author, reviewer=reviewer, actor=None
    )
    rubric_services.rubric_save_criteria(rubric=accepted, actor=author, criteria=criteria)
    rubric_services.rubric_submit(rubric=accepted, actor=author)
    accepted = rubric_services.rubric_accept(rubric=accepted, actor=reviewer)
    (grading,) = grading_services.gradings_assign(
        rubric=accepted, study=study, clinicians=[reviewer], actor=None
    )
    in_review = rubric_services.rubric_assign(
        instruction=second, author=author, reviewer=reviewer, actor=None
    )
    rubric_services.rubric_save_criteria(rubric=in_review, actor=author, criteria=criteria)

    _sign_in(page, live_server, author)
    visit(page, base, reverse("rubric_work"), "rubric work")
    visit(page, base, reverse("rubric_write", args=[in_review.pk]), "rubric writing")
    rubric_services.rubric_submit(rubric=in_review, actor=author)
    _sign_in(page, live_server, reviewer)
    visit(page, base, reverse("rubric_review", args=[in_review.pk]), "rubric review")
    visit(page, base, reverse("grading_page", args=[grading.pk]), "grading")
    # On a phone nothing widens the page (the final walk-through found the criteria table's
    # hidden labels escaping its scroll box: pages 491 px wide on a 390 px screen).
    page.set_viewport_size({"width": 390, "height": 844})
    for url in (
        reverse("rubric_review", args=[in_review.pk]),
        reverse("grading_page", args=[grading.pk]),
    ):
        page.goto(base + url)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, url
    page.set_viewport_size({"width": 1440, "height": 900})
    _sign_in(page, live_server, admin)
    visit(page, base, reverse("admin_rubrics", args=[dataset.pk]), "admin rubrics")
