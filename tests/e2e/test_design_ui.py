"""The assign page's study-design block: an admin previews an assignment and reads which design
spends the fewest clinician reviews and what each gives up. In Chromium."""

import os

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from review.models import Role
from tests import factories
from tests.e2e.test_accessibility import assert_no_axe_violations
from tests.scoring.ppi_data import make_study

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_admin_reads_the_recommended_design_beside_the_preview(live_server, page):
    d = make_study(n_instructions=60, n_reviewed=30)
    for k in range(3):
        factories.make_user(f"new{k}@example.edu", roles=[Role.CLINICIAN])
    page.context.add_cookies([factories.session_cookie(d.admin, live_server.url)])
    page.goto(live_server.url + reverse("admin_assign"))
    page.get_by_label("Overlap").fill("1")
    for k in range(3):
        page.get_by_label(f"new{k}@example.edu").check()
    page.get_by_role("button", name="Preview").click()
    block = page.get_by_test_id("design-calculator")
    expect(block).to_be_visible()
    expect(block).to_contain_text("The mixed design puts one clinician on each instruction")
    expect(block.get_by_test_id("design-overlap1-classical")).to_contain_text("human ceiling")
    # Every share within 5 points is beyond 60 instructions; the top two are not.
    expect(block.get_by_test_id("design-recommended")).to_contain_text("add instructions")
    expect(block).to_contain_text("(the top two, now")
    if os.environ.get("SCREENSHOTS"):
        page.screenshot(path=os.path.join(os.environ["SCREENSHOTS"], "assign-design.png"),
                        full_page=True)  # fmt: skip
    assert_no_axe_violations(page, "assign page with the study design")
