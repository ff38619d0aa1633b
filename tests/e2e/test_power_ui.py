"""The admin's progress page answers "how many more reviews?": per target, with and without the
predictor, recalculated for another margin and predictor. In Chromium."""

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from scoring.reports import compute, services
from scoring.reports.prediction import study_power
from tests import factories
from tests.e2e.test_accessibility import assert_no_axe_violations
from tests.scoring.ppi_data import make_study

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _sign_in(page, live_server, user) -> None:
    page.context.clear_cookies()
    page.context.add_cookies([factories.session_cookie(user, live_server.url)])


def test_the_admin_sees_how_many_more_reviews_each_target_needs(live_server, page):
    d = make_study()
    _sign_in(page, live_server, d.admin)
    page.goto(live_server.url + reverse("progress_dataset", args=[d.dataset.pk]))
    calculator = page.get_by_test_id("power-calculator")
    expect(calculator).to_be_visible()
    # The default: the automatic predictor (COMET here) and a margin of 5 points.
    expected = {r["target"]: r for r in study_power(dataset=d.dataset)["rows"]}
    margin = calculator.get_by_test_id("power-margin")
    expect(margin).to_contain_text("within ±5 points")
    expect(margin).to_contain_text(expected["margin"]["classical_text"])
    expect(margin).to_contain_text(expected["margin"]["ppi_text"])
    expect(calculator.get_by_test_id("power-top_two")).to_contain_text(
        expected["top_two"]["classical_text"]
    )
    expect(calculator).to_contain_text("Predictor: COMET")
    assert_no_axe_violations(page, "progress dataset with the power calculator")

    # Another margin and predictor: the page recalculates.
    calculator.get_by_label("Predictor").select_option("bleu")
    calculator.get_by_label("Margin (points)").fill("10")
    calculator.get_by_role("button", name="Recalculate").click()
    expect(page).to_have_url(re.compile(r"predictor=bleu.*margin=10"))
    wider = {
        r["target"]: r
        for r in study_power(dataset=d.dataset, predictor="bleu", margin=0.10)["rows"]
    }
    margin = page.get_by_test_id("power-calculator").get_by_test_id("power-margin")
    expect(margin).to_contain_text("within ±10 points")
    expect(margin).to_contain_text(wider["margin"]["classical_text"])
    expect(margin).to_contain_text(wider["margin"]["ppi_text"])
    expect(page.get_by_test_id("power-calculator")).to_contain_text("Predictor: BLEU")
    # Half the margin's width needs about a quarter of the reviews, clinicians only.
    assert wider["margin"]["classical_units"] < expected["margin"]["classical_units"]


def test_the_report_shows_prediction_powered_estimates(live_server, page):
    d = make_study()
    report = services.report_create(
        dataset=d.dataset, actor=d.researcher, n_resamples=200, seed=1, enqueue=False
    )
    compute.report_compute(report_id=report.pk)
    _sign_in(page, live_server, d.researcher)
    page.goto(live_server.url + reverse("scoring_report_detail", args=[report.pk]))
    section = page.get_by_test_id("ppi-section")
    expect(section).to_contain_text("COMET")
    expect(section.get_by_test_id("ppi-table")).to_contain_text("Bradley-Terry strength")
    expect(section.get_by_test_id("ppi-effective")).to_contain_text("clinician reviews")
    expect(section.get_by_test_id("power-margin")).to_contain_text("within ±5 points")
    assert_no_axe_violations(page, "report with prediction-powered estimates")
