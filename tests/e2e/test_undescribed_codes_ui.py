"""A MIMIC-shaped MEDS record of raw codes in a real browser, at desktop (1440×900) and phone
(390×844) sizes: the review page says the record is mostly undescribed codes, where the record
starts, with axe at 0 violations; once descriptions are attached the notice is gone and the
excerpt lists the creatinine the instruction asks about.

Uses the browser fixtures of tests/e2e/conftest.py (Debian's Chromium; skipped without it).
Screenshots go to $A11Y_SCREENSHOTS when it is set.
"""

import os
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from review.importers import import_release
from review.models import Patient, Role
from review.services.code_descriptions import code_descriptions_import
from tests import factories
from tests.e2e.test_accessibility import assert_no_axe_violations
from tests.e2e.test_review_ui import _seed_tags, _sign_in
from tests.review import review_data
from tests.review.test_code_descriptions import write_dictionary, write_mimic

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SIZES = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
SCREENSHOTS = os.environ.get("A11Y_SCREENSHOTS", "")


@pytest.fixture(params=list(SIZES))
def size(request):
    return request.param


@pytest.fixture
def world(db, tmp_path):
    _seed_tags()
    factories.active_dua()
    import_release(write_mimic(tmp_path / "mimic"), dataset_name="mimic-e2e")
    patient = Patient.objects.get()
    instruction = review_data.make_instruction(
        patient.dataset, patient, "I-MIMIC", question="What is the most recent creatinine?"
    )
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    return instruction, clinician, tmp_path


def _open(page, live_server, world, size: str) -> None:
    instruction, clinician, _ = world
    page.set_viewport_size(SIZES[size])
    _sign_in(page.context, live_server, clinician)
    page.goto(live_server.url + reverse("clinician_review", args=[instruction.pk]))
    page.wait_for_selector("body[data-review-ready]")


def _shot(page, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"))


def test_a_record_of_raw_codes_says_so_on_the_review_page(live_server, page, world, size):
    _open(page, live_server, world, size)
    notice = page.get_by_test_id("undescribed-codes")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("Most of this record is raw codes:")
    expect(notice).to_contain_text("17 of its 19 coded events have no description")
    # Inside the record panel, above the excerpt, and within the screen's width.
    box, panel = notice.bounding_box(), page.locator(".record-panel").bounding_box()
    assert box is not None and panel is not None
    assert panel["x"] <= box["x"] and box["x"] + box["width"] <= panel["x"] + panel["width"]
    assert box["x"] + box["width"] <= SIZES[size]["width"]
    excerpt = page.get_by_test_id("excerpt")
    expect(excerpt).to_contain_text("The record runs from 6 May 2180")
    notice.scroll_into_view_if_needed()
    _shot(page, f"undescribed-{size}")
    assert_no_axe_violations(page, "review page, a record of raw codes")


def test_with_descriptions_attached_the_excerpt_finds_the_creatinine(live_server, page, world):
    code_descriptions_import(
        dataset_name="mimic-e2e", path=write_dictionary(world[2] / "labels.csv")
    )
    _open(page, live_server, world, "desktop")
    expect(page.get_by_test_id("undescribed-codes")).to_have_count(0)
    values = page.get_by_test_id("latest-values")
    expect(values).to_contain_text("Creatinine (mg/dL)")
    expect(values).to_contain_text("1.4")
    _shot(page, "described-desktop")
    assert_no_axe_violations(page, "review page, codes described")
