"""A researcher reads a correlation report in a real browser: plots, no CSP violations, CSV.

Uses the browser fixtures of tests/e2e/conftest.py (Debian's Chromium; skipped without it).
"""

import csv
import io
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from review.demo.reviews import demo_simulated_reviews
from review.models import Dataset, Instruction, ModelResponse, ReferenceResponse, Role
from scoring.models import MetricConfig, MetricScore
from scoring.reports import compute, services
from tests import factories

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _report():
    factories.active_dua()  # transactional tests flush the migration-seeded DUA
    dataset = Dataset.objects.create(name="e2e-report", is_synthetic=True)
    config = MetricConfig.objects.create(
        backend="bleu", identity={"backend": "bleu"}, identity_hash="e2e", label="BLEU"
    )
    for i in range(4):
        instruction = Instruction.objects.create(
            dataset=dataset, instruction_id=f"E{i}", question="Synthetic?", category="triage"
        )
        ReferenceResponse.objects.create(instruction=instruction, annotator="A1", text="Ref.")
        for k, model in enumerate(("north", "south", "east")):
            response = ModelResponse.objects.create(
                instruction=instruction, model_name=model, text=f"Answer {k}."
            )
            MetricScore.objects.create(response=response, config=config, value=10.0 * (3 - k) + i)
    factories.put_in_study(*dataset.instructions.all())
    demo_simulated_reviews(dataset_name=dataset.name, n_clinicians=2)
    report = services.report_create(
        dataset=dataset, actor=None, n_resamples=200, seed=1, enqueue=False
    )
    return compute.report_compute(report_id=report.pk)


def _sign_in(page, live_server, user) -> None:
    page.context.add_cookies([factories.session_cookie(user, live_server.url)])


def test_researcher_reads_the_report_and_downloads_the_csv(live_server, page):
    researcher = factories.make_user("r@example.edu", roles=[Role.RESEARCHER])
    report = _report()
    assert report.status == "done", report.error
    _sign_in(page, live_server, researcher)
    console = []
    page.on("console", lambda message: console.append(message.text))

    page.goto(live_server.url + reverse("scoring_report_detail", args=[report.pk]))
    expect(page.get_by_role("heading", name=f"Report #{report.pk}")).to_be_visible()
    expect(page.get_by_test_id("simulated-banner")).to_be_visible()
    # Each chart is drawn once (the phone layout, grown to a column on a wide screen).
    expect(page.get_by_test_id("correlation-chart").locator(".chart-one svg")).to_be_visible()
    assert page.get_by_test_id("correlation-chart").locator("svg").count() == 1
    expect(page.get_by_test_id("win-chart").locator(".chart-one svg")).to_be_visible()
    expect(page.get_by_test_id("leaderboard-chart").locator(".chart-one svg")).to_be_visible()
    assert page.locator("figure.chart svg").count() >= 6
    assert (
        page.locator("[data-testid=correlation-chart] .chart-one circle.mark").count() == 2
    )  # BLEU + ceiling
    # Not wider than a column of text, nor its text tiny: 12 units drawn at 12-17 px.
    box = page.get_by_test_id("correlation-chart").locator("svg").bounding_box()
    assert box is not None and box["width"] <= 30 * 16 + 1
    expect(page.get_by_role("link", name="Method").first).to_be_visible()

    with page.expect_download() as info:
        page.get_by_test_id("export-responses-csv").click()
    download = info.value
    assert download.suggested_filename == f"report-{report.pk}-responses.csv"
    rows = list(csv.DictReader(io.StringIO(Path(download.path()).read_text(encoding="utf-8"))))
    assert len(rows) == 4 * 3 * 2  # instructions x responses x simulated clinicians
    assert {"clinician", "rank", "correct", "shown_position", "score_bleu"} <= set(rows[0])
    assert not any("@" in r["clinician"] for r in rows)

    assert not [m for m in console if "Content Security Policy" in m], console
