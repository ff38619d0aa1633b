"""The grader in Chromium: a researcher starts a grading run with a local model, follows it to
the end, and reads the report's rubric section: the clinicians' and the grader's scores side by
side, and the grader's macro-F1 beside the clinicians'."""

import json

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from review.demo.reviews import demo_simulated_reviews
from review.models import CriterionGrade, Role
from scoring.models import GraderVerdict
from scoring.reports import compute, services
from tests import factories

# The accessibility scan's browser context (it watches for CSP violations) and its tab.
from tests.e2e.test_accessibility import assert_no_axe_violations, context, tab  # noqa: F401
from tests.review import review_data
from tests.scoring.rubric_data import accepted_rubric, people, responses_of, submit_grades
from tests.scoring.tiny_grader import build_fixed_answer_lm

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _sign_in(page, live_server, user) -> None:
    page.context.add_cookies([factories.session_cookie(user, live_server.url)])


def test_a_researcher_runs_the_grader_and_reads_it_beside_the_clinicians(
    live_server,
    tab,  # noqa: F811
    settings,
    tmp_path,
):
    page = tab
    factories.active_dua()
    # A local grader that answers "met" to everything: the clinicians do not, so the report
    # must say that it falls below them.
    answer = json.dumps({"explanation": "It does.", "criteria_met": True})
    build_fixed_answer_lm(tmp_path / "always-met", answer)
    settings.GENERATION_MODEL_DIR = tmp_path
    dataset = review_data.make_dataset("e2e-grading")
    instructions = [
        review_data.make_instruction(
            dataset,
            review_data.make_record(dataset, f"P-{i}", n_events=20),
            f"I-{i}",
            n_responses=2,
        )
        for i in range(3)
    ]
    factories.put_in_study(*instructions)
    demo_simulated_reviews(dataset_name=dataset.name, n_clinicians=2)  # the rankings
    author, reviewer = people()
    graders = [factories.make_user(f"g{i}@example.edu", roles=[Role.CLINICIAN]) for i in (1, 2)]
    for instruction in instructions:
        rubric = accepted_rubric(instruction, author, reviewer)
        criteria = list(rubric.criteria.order_by("order"))
        for k, grader in enumerate(graders):
            submit_grades(
                rubric,
                grader,
                {
                    # the two clinicians agree but on one item of each rubric
                    (r.pk, c.pk): ((j + n) % 2 == 0) != (k == 1 and n == j == 0)
                    for n, r in enumerate(responses_of(rubric))
                    for j, c in enumerate(criteria)
                },
            )
    researcher = factories.make_user("researcher@example.edu", roles=[Role.RESEARCHER])
    page.set_viewport_size({"width": 1440, "height": 900})
    _sign_in(page, live_server, researcher)

    page.goto(live_server.url + reverse("grading_runs"))
    assert_no_axe_violations(page, "grading runs list and form")
    page.get_by_label("Dataset").select_option(label="e2e-grading")
    page.get_by_label("Model").select_option("local:always-met")
    page.get_by_role("button", name="Start grading").click()
    expect(page.get_by_role("heading", name="Grading run")).to_be_visible()
    expect(page.get_by_test_id("verdict-counts")).to_contain_text("met 18 · not met 0 · missing")
    assert_no_axe_violations(page, "grading run")
    assert GraderVerdict.objects.count() == 3 * 2 * 3
    assert CriterionGrade.objects.count() == 2 * 3 * 2 * 3

    report = services.report_create(
        dataset=dataset, actor=researcher, n_resamples=200, seed=1, enqueue=False
    )
    report = compute.report_compute(report_id=report.pk)
    assert report.status == "done", report.error
    page.goto(live_server.url + reverse("scoring_report_detail", args=[report.pk]))
    section = page.locator("section", has=page.locator("#rubrics"))
    expect(section).to_contain_text("Rubric grader (always-met)")
    scores = section.get_by_test_id("rubric-scores").first
    expect(scores).to_contain_text("Clinicians’ rubric score")
    expect(scores).to_contain_text("Grader’s rubric score")
    expect(section.get_by_test_id("rubric-f1")).to_contain_text("grader")
    expect(section.get_by_test_id("rubric-f1")).to_contain_text("clinicians")
    expect(section.get_by_test_id("rubric-verdict")).to_contain_text(
        "The grader falls below the clinicians"
    )
    expect(section.get_by_test_id("rubric-agreement")).to_contain_text(graders[0].pseudonym)
    assert_no_axe_violations(page, "report with its rubric section")
