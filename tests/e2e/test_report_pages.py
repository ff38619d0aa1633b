"""The report and paper pages in a browser at 1440x900 and 390x844: axe, the page's weight, no
sideways scrolling on a phone, each chart drawn once. ``A11Y_SCREENSHOTS=/some/folder`` keeps
the screenshots to look at."""

import pytest
from django.urls import reverse

from review.models import ModelResponse, Role
from scoring.models import CorrelationReport
from scoring.reports import compute, services
from tests import factories
from tests.e2e.test_accessibility import (
    DESKTOP,
    PHONE,
    _watch_csp,
    assert_no_axe_violations,
    sign_in_with_totp,
)
from tests.scoring.test_report_statements import _study

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MAX_PAGE_BYTES = 300 * 1024


@pytest.fixture
def tab(browser):
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(15_000)
    _watch_csp(context)
    yield context.new_page()
    context.close()


def test_the_report_reads_on_a_desktop_and_a_phone(live_server, tab):
    factories.active_dua()  # transactional tests flush the migration-seeded DUA
    dataset = _study()
    report = services.report_create(
        dataset=dataset, actor=None, n_resamples=500, seed=2, enqueue=False
    )
    report = compute.report_compute(report_id=report.pk)
    assert report.status == CorrelationReport.Status.DONE, report.error
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN, Role.RESEARCHER])
    sign_in_with_totp(tab, live_server.url, admin.email)

    response = tab.goto(live_server.url + reverse("scoring_report_detail", args=[report.pk]))
    assert response is not None and response.status == 200
    assert len(response.body()) < MAX_PAGE_BYTES, len(response.body())
    # One drawing per chart: no hidden second copy for phones.
    assert tab.locator("figure.chart svg").count() == tab.locator("figure.chart").count()
    assert_no_axe_violations(tab, "report statements")
    tab.set_viewport_size(PHONE)
    width = tab.evaluate("() => document.scrollingElement.scrollWidth")
    assert width <= PHONE["width"], width

    # The paper page with a model the paper does not know: said, and an admin can map it.
    for k, r in enumerate(ModelResponse.objects.filter(instruction__dataset=dataset)):
        r.release_rank, r.release_binary_correct = 1 + k % 4, k % 3 == 0
        r.save(update_fields=["release_rank", "release_binary_correct"])
    tab.goto(live_server.url + reverse("scoring_paper_tables", args=[dataset.pk]))
    assert tab.get_by_test_id("paper-unmatched").is_visible()
    assert_no_axe_violations(tab, "paper tables with unmatched names")
    tab.select_option("select[name='map:north']", "GPT-4 (32k)")
    tab.get_by_role("button", name="Save the mapping").click()
    tab.wait_for_load_state()
    assert "north is the paper’s GPT-4 (32k)" in tab.get_by_test_id("paper-matching").inner_text()
