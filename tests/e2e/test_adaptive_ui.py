"""An admin turns a round adaptive on the studies page, sees the next wave's assignments with
their probabilities, assigns it, and, once its reviews are in, reads the stopping rule's
verdict: the ranking settled and the reviews saved against uniform. In Chromium."""

import numpy as np
import pytest
from django.urls import reverse
from playwright.sync_api import expect

from review.models import Assignment, SamplingDraw
from tests import factories
from tests.e2e.test_accessibility import assert_no_axe_violations
from tests.review.adaptive_data import make_adaptive_world, submit_all

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _sign_in(page, live_server, user) -> None:
    page.context.clear_cookies()
    page.context.add_cookies([factories.session_cookie(user, live_server.url)])


def _balanced_seed() -> int:
    """A seed whose first wave (30 of the 60 instructions, in the seed's order) holds 15 of
    the even ones, on which the middle model is right: its share is then 0.5 and both gaps
    between neighbours are 0.5, settled after one wave whatever else varies (30 reviewed
    instructions: the fewest the stopping rule stops on)."""
    for seed in range(1000):
        first = np.random.default_rng(seed).permutation(60)[:30]
        if (first % 2 == 0).sum() == 15:
            return seed
    raise AssertionError("no balanced seed")


def test_the_admin_assigns_a_wave_and_reads_the_stopping_rule(live_server, page, tmp_path):
    dataset, study, _, _, admin = make_adaptive_world(n_instructions=60)
    _sign_in(page, live_server, admin)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(live_server.url + reverse("admin_studies", args=[dataset.pk]))

    form = page.get_by_test_id("adaptive-form-1")
    form.get_by_text("Assign round 1 adaptively").click()
    form.get_by_label("Predictor").select_option(label="Test jury")
    form.get_by_label("Expected share reviewed per wave").fill("1")
    form.get_by_label("Waves").fill("2")
    form.get_by_label("Seed").fill(str(_balanced_seed()))
    form.get_by_role("button", name="Assign adaptively").click()
    expect(page.get_by_text("Round 1 is now assigned adaptively.")).to_be_visible()

    section = page.get_by_test_id("adaptive-1")
    expect(section.get_by_role("heading", name="Next assignments: wave 1 of 2")).to_be_visible()
    expect(section.get_by_test_id("adaptive-next").locator("tbody tr")).to_have_count(30)
    expect(section.get_by_test_id("stopping-message")).to_contain_text("No estimate yet")
    assert_no_axe_violations(page, "studies page, adaptive round")

    section.get_by_role("button", name="Assign wave 1").click()
    expect(page.get_by_text("Wave 1: 30 of 30 instructions drawn")).to_be_visible()
    assert SamplingDraw.objects.filter(study=study, wave=1, drawn=True).count() == 30
    assert Assignment.objects.filter(study=study).count() == 60  # overlap 2

    submit_all(study)
    page.reload()
    section = page.get_by_test_id("adaptive-1")
    expect(section.get_by_test_id("stopping-message")).to_contain_text(
        "The ranking is settled at 95%; 60 reviews saved against uniform"
    )
    expect(section.get_by_test_id("adaptive-gaps").locator("tbody tr")).to_have_count(2)
    expect(section.get_by_role("heading", name="Next assignments: wave 2 of 2")).to_be_visible()
    expect(section.get_by_role("button", name="Assign wave 2")).to_have_count(0)
    assert_no_axe_violations(page, "studies page, settled ranking")
    page.screenshot(path=str(tmp_path / "adaptive.png"), full_page=True)
