"""Rubric scores in the correlation report: clinicians' and the grader's side by side, each a
metric column, and the grader's macro-F1 beside the clinicians' against each other."""

import re
from datetime import timedelta

import numpy as np
import pytest
from django.urls import reverse
from django.utils import timezone

from review.models import Role, Study
from scoring.models import GraderVerdict, MetricConfig
from scoring.reports import selectors
from scoring.reports.rubric_scores import rubric_verdicts
from scoring.reports.statistics.intervals import INTERVAL_METHOD
from scoring.reports.statistics.rubrics import response_scores
from tests import factories
from tests.scoring.rubric_data import (
    accepted_rubric,
    people,
    responses_of,
    rubric_dataset,
    submit_grades,
)
from tests.scoring.test_reports import _done_report, data  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def grader_config() -> MetricConfig:
    return MetricConfig.objects.create(
        backend="rubric-grader",
        identity={"backend": "rubric-grader", "prompt": "medalign-rubric@abc"},
        provenance={
            "metric": "rubric-grader",
            "model": "grader-70b",
            "prompt": "medalign-rubric@abc",
        },
        identity_hash="hash-grader",
        label="Rubric grader (grader-70b)",
    )


@pytest.fixture
def graded(data):  # noqa: F811
    """Both instructions' rubrics accepted; c1 and c2 grade every response; the grader agrees
    with c1 everywhere except one item, and one of its verdicts is missing."""
    author, reviewer = people()
    rubrics = [accepted_rubric(i, author, reviewer) for i in data.instructions]
    config = grader_config()
    for rubric, responses in zip(rubrics, data.responses, strict=True):
        criteria = list(rubric.criteria.order_by("order"))
        # model-a meets the positives, model-b the first only, the third invents a value
        truth = {
            (r.pk, c.pk): [[True, True, False], [True, False, False], [False, False, True]][k][j]
            for k, r in enumerate(responses)
            for j, c in enumerate(criteria)
        }
        submit_grades(rubric, data.c1, truth)
        c2 = dict(truth)
        c2[(responses[1].pk, criteria[1].pk)] = True  # c2 dissents once
        submit_grades(rubric, data.c2, c2)
        for (response_id, criterion_id), met in truth.items():
            GraderVerdict.objects.create(
                config=config,
                response_id=response_id,
                rubric=rubric,
                criterion_id=criterion_id,
                criteria_met=None
                if criterion_id == criteria[0].pk and response_id == responses[2].pk
                else met,
                prompt_sha256="0" * 64,
            )
    return data, rubrics, config


def test_rubric_scores_are_metric_columns_of_the_report(graded) -> None:
    d, _, config = graded
    inputs = selectors.report_inputs(dataset=d.dataset)
    keys = [m["key"] for m in inputs.metrics]
    assert keys[-2:] == ["rubric-clinicians", f"rubric-grader-{config.pk}"]
    rows = inputs.table.response == d.responses[0][0].pk
    # model-a: (8 + 4) / 12 = 1 for both clinicians and the grader
    assert (inputs.scores["rubric-clinicians"][rows] == 1.0).all()
    third = inputs.table.response == d.responses[0][2].pk
    # the third model invents a value: -6 / 12 -> 0 for the clinicians; the grader's verdict
    # on the 8-point criterion is missing, so it gives that response no score (leaving the
    # criterion out would have scored (0 - 6) / 4, and a met one would have counted fully)
    assert (inputs.scores["rubric-clinicians"][third] == 0.0).all()
    assert np.isnan(inputs.scores[f"rubric-grader-{config.pk}"][third]).all()
    second = inputs.table.response == d.responses[0][1].pk
    # model-b: c1 8/12, c2 12/12: mean 5/6
    assert inputs.scores["rubric-clinicians"][second] == pytest.approx(5 / 6)
    report = _done_report(d)
    correlated = {r["metric"] for r in report.results["correlation"]}
    assert {"rubric-clinicians", f"rubric-grader-{config.pk}"} <= correlated


def test_the_report_sets_scores_side_by_side_and_the_grader_beside_the_clinicians(
    graded, client
) -> None:
    d, _, config = graded
    report = _done_report(d)
    section = report.results["rubrics"]
    assert section["n_clinicians"] == 2
    [grader] = section["graders"]
    overall = grader["scores"]["overall"]
    by_model = {r["model"]: r["mean"] for r in overall["clinicians"]}
    assert by_model["model-a"] == 1.0 and by_model["model-b"] == pytest.approx(5 / 6)
    assert {r["model"]: r["mean"] for r in overall["grader"]}["model-b"] == pytest.approx(2 / 3)
    assert set(grader["scores"]["per_tag"]) == {"axis:accuracy", "axis:completeness"}
    agreement = grader["agreement"]["overall"]
    assert agreement["missing_grader_verdicts"] == 2
    assert [r["rater"] for r in agreement["per_clinician"]] == sorted(
        [d.c1.pseudonym, d.c2.pseudonym]
    )
    assert set(grader["agreement"]["per_version"]) == {"v1"}
    assert agreement["leave_one_out"]["grader_f1"] is not None
    # the page: the section, the grader's F1 beside the clinicians', no names
    client.force_login(d.researcher)
    html = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert "Rubric scores, and the grader against the clinicians" in html
    assert 'data-testid="rubric-scores"' in html and 'data-testid="rubric-f1"' in html
    assert "Rubric grader (grader-70b)" in html
    assert d.c1.pseudonym in html and "c1@example.edu" not in html
    assert "Invents a value" not in html  # no criterion text in a report
    assert section["interval_method"] == INTERVAL_METHOD
    unit = report.results["clustering"]["unit"]
    assert f"with a {INTERVAL_METHOD} interval over {unit}s" in html


def test_a_report_without_rubric_grades_says_so(data, client) -> None:  # noqa: F811
    report = _done_report(data)
    assert report.results["rubrics"] is None
    client.force_login(data.researcher)
    html = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert 'data-testid="rubrics-none"' in html


def test_the_rubric_tables_are_exported(graded) -> None:
    from scoring.reports import exports

    d, _, config = graded
    report = _done_report(d)
    scores = exports.rows(report, "rubric_scores")
    overall = [r for r in scores if r["part"] == "overall" and r["model"] == "model-b"]
    assert {(r["rater"], round(r["mean"], 4)) for r in overall} == {
        ("clinicians", round(5 / 6, 4)),
        ("grader", round(2 / 3, 4)),
    }
    agreement = exports.rows(report, "rubric_agreement")
    pooled = [r for r in agreement if r["row"] == "pooled"]
    assert {r["group"] for r in pooled} == {
        "overall",
        "tag:axis:accuracy",
        "tag:axis:completeness",
        "version:v1",
    }
    assert all(r["grader"] == config.pk for r in agreement)
    assert d.c1.pseudonym in {r["row"] for r in agreement}
    csv_text = exports.to_csv(report, "rubric_agreement")
    assert csv_text.splitlines()[0].startswith("grader,grader_label,group,row,macro_f1")


def test_the_page_shows_missing_verdicts_healthbench_aggregate_and_pairwise(graded, client):
    d, _, config = graded
    report = _done_report(d)
    [grader] = report.results["rubrics"]["graders"]
    rows = {r["model"]: r for r in grader["scores"]["overall"]["grader"]}
    third = rows[d.responses[0][2].model_name]
    # The third model's two responses each miss one verdict of three: no score for either,
    # 2 of 6 verdicts missing, and the bounds of what they could be.
    assert third["n_responses"] == 0 and third["n_missing"] == 2 and third["n_verdicts"] == 6
    assert third["bound_low"] == 0.0 and third["bound_high"] == pytest.approx(2 / 12)
    clinicians = {r["model"]: r for r in grader["scores"]["overall"]["clinicians"]}
    assert clinicians[d.responses[0][2].model_name]["n_responses"] == 0  # compared on none
    assert "healthbench_mean" in clinicians["model-b"]
    agreement = grader["agreement"]["overall"]
    assert "pairwise" in agreement and "majority" in agreement["leave_one_out"]["comparison"]
    client.force_login(d.researcher)
    html = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert 'data-testid="rubric-healthbench"' in html
    assert "HealthBench’s aggregate" in html
    assert 'data-testid="rubric-missing"' in html and "33% of 6 verdicts missing" in html
    assert 'data-testid="rubric-pairwise"' in html
    assert "HealthBench’s pairwise comparison" in html
    # One fact, three places: the responses both scored, in each score's "(n=...)" and in
    # the column that counts them.
    table = html.split('data-testid="rubric-scores"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(
        r"<tr><th scope=\"row\">(.*?)</th><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td>", table
    )
    assert len(rows) == 3
    for _model, clinicians_cell, grader_cell, both in rows:
        n = both.split(" of ")[0]
        assert f"(n={n})" in clinicians_cell and f"(n={n})" in grader_cell, (both, grader_cell)
    from scoring.reports import exports

    scores = exports.rows(report, "rubric_scores")
    assert {"healthbench_mean", "missing_share", "bound_low", "bound_high"} <= set(
        exports.columns(report, "rubric_scores")
    )
    assert any(r.get("n_missing") == 2 for r in scores)
    agreement_rows = exports.rows(report, "rubric_agreement")
    pooled = [r for r in agreement_rows if r["row"] == "pooled" and r["group"] == "overall"]
    assert pooled[0]["pairwise_grader_f1"] == agreement["pairwise"]["grader_f1"]
    assert pooled[0]["no_verdict"] == agreement["no_verdict"]


def test_the_page_says_why_it_gives_no_verdict(data, client) -> None:  # noqa: F811
    """Both clinicians mark every criterion of every response met; the grader differs once."""
    author, reviewer = people()
    config = grader_config()
    for i, (instruction, responses) in enumerate(
        zip(data.instructions, data.responses, strict=True)
    ):
        rubric = accepted_rubric(instruction, author, reviewer)
        items = {(r.pk, c.pk): True for r in responses for c in rubric.criteria.all()}
        submit_grades(rubric, data.c1, items)
        submit_grades(rubric, data.c2, items)
        for k, (response_id, criterion_id) in enumerate(items):
            GraderVerdict.objects.create(
                config=config,
                response_id=response_id,
                rubric=rubric,
                criterion_id=criterion_id,
                criteria_met=not (i == k == 0),
                prompt_sha256="0" * 64,
            )
    report = _done_report(data)
    agreement = report.results["rubrics"]["graders"][0]["agreement"]["overall"]
    assert agreement["verdict"] == ""
    assert agreement["leave_one_out"]["grader_f1"] is None  # undefined, not 0.49
    client.force_login(data.researcher)
    html = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert 'data-testid="rubric-no-verdict"' in html
    assert "never marked “not met”" in html
    assert "falls below" not in html


@pytest.mark.parametrize("later_first", [True, False])
def test_a_response_graded_twice_by_one_clinician_counts_the_latest_submitted(later_first):
    dataset, [rubric] = rubric_dataset(n_instructions=1, n_responses=2, draft_too=False)
    clinician = factories.make_user("twice@example.edu", roles=[Role.CLINICIAN])
    first = Study.objects.create(dataset=dataset, round=1, name="round 1")
    second = Study.objects.create(dataset=dataset, round=2, name="round 2")
    criteria = list(rubric.criteria.order_by("order"))
    responses = responses_of(rubric)
    all_met = {(r.pk, c.pk): c.points > 0 for r in responses for c in criteria}
    none_met = {key: False for key in all_met}
    now = timezone.now()
    # Round 1 was submitted after round 2 (an earlier study graded late): it counts.
    plan = [(first, all_met, now), (second, none_met, now - timedelta(days=1))]
    for study, met, when in plan[::-1] if later_first else plan:
        grading = submit_grades(rubric, clinician, met, study=study)
        grading.submitted_at = when
        grading.save(update_fields=["submitted_at"])
    verdicts, _, _ = rubric_verdicts(response_ids=[r.pk for r in responses])
    assert len(verdicts) == len(all_met)  # one verdict per (clinician, response, criterion)
    scores = response_scores(verdicts)[clinician.pseudonym]
    assert scores == {r.pk: 1.0 for r in responses}  # round 1's, not the mean of both (0.5)


def test_gradings_submitted_together_count_the_later_study():
    dataset, [rubric] = rubric_dataset(n_instructions=1, n_responses=1, draft_too=False)
    clinician = factories.make_user("twice@example.edu", roles=[Role.CLINICIAN])
    criteria = list(rubric.criteria.order_by("order"))
    [response] = responses_of(rubric)
    second = Study.objects.create(dataset=dataset, round=2, name="round 2")
    first = Study.objects.create(dataset=dataset, round=1, name="round 1")
    when = timezone.now()
    for study, met in ((second, True), (first, False)):
        grading = submit_grades(
            rubric, clinician, {(response.pk, c.pk): met for c in criteria}, study=study
        )
        grading.submitted_at = when
        grading.save(update_fields=["submitted_at"])
    verdicts, _, _ = rubric_verdicts(response_ids=[response.pk])
    assert list(verdicts.met) == [1.0] * len(criteria)  # round 2's
