"""The status endpoints the run and report pages poll (``progress.json``, ``status.json``):
opened in a browser they lead to the page showing the same status; the pages' scripts, and
clients that ask for nothing in particular, still get JSON."""

from typing import Any

import pytest
from django.urls import reverse

from review.models import Dataset, Role
from scoring.models import CorrelationReport, GenerationRun, GradingRun, MetricConfig, ScoringRun
from tests import factories

pytestmark = pytest.mark.django_db

# What Chromium sends when the address bar opens a URL, and what runs.js / report_status.js send.
ADDRESS_BAR = {
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "Sec-Fetch-Mode": "navigate",
    "Sec-Fetch-Dest": "document",
}
PAGE_SCRIPT = {"Accept": "application/json", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}
# A browser that sends no fetch metadata is taken at its Accept header.
OLD_BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


def _endpoints() -> list[tuple[str, str]]:
    """(status URL, page URL) for a report and a run of each kind."""
    dataset = Dataset.objects.create(name="status-json", is_synthetic=True)
    report = CorrelationReport.objects.create(dataset=dataset, title="t", status="pending")
    scoring = ScoringRun.objects.create(dataset=dataset, total=0)
    generation = GenerationRun.objects.create(
        dataset=dataset, total=0, label="m", template_text="x"
    )
    config = MetricConfig.objects.create(
        identity_hash="status-grader", backend="rubric-grader", identity={}, label="grader"
    )
    grading = GradingRun.objects.create(dataset=dataset, config=config, total=0)
    pairs = [("scoring_report_status", "scoring_report_detail", {"report_id": report.pk})]
    for kind, run in (("scoring", scoring), ("generation", generation), ("grading", grading)):
        pairs.append((f"{kind}_run_progress", f"{kind}_run_detail", {"run_id": run.pk}))
    return [(reverse(a, kwargs=kw), reverse(b, kwargs=kw)) for a, b, kw in pairs]


@pytest.fixture
def researcher_client(client: Any) -> Any:
    client.force_login(factories.make_user("r@example.edu", roles=[Role.RESEARCHER]))
    return client


@pytest.mark.parametrize("headers", [ADDRESS_BAR, OLD_BROWSER], ids=["fetch-metadata", "accept"])
def test_it_sends_a_browser_opening_a_status_url_to_its_page(researcher_client, headers):
    for status_url, page_url in _endpoints():
        response = researcher_client.get(status_url, headers=headers)
        assert response.status_code == 302, status_url
        assert response.url == page_url
        assert researcher_client.get(response.url).status_code == 200, page_url


@pytest.mark.parametrize("headers", [PAGE_SCRIPT, {}], ids=["page-script", "no-accept"])
def test_it_still_answers_the_pages_scripts_in_json(researcher_client, headers):
    for status_url, _page_url in _endpoints():
        response = researcher_client.get(status_url, headers=headers)
        assert response.status_code == 200, status_url
        assert response["Content-Type"] == "application/json"
        assert "status" in response.json()


def test_a_navigation_by_someone_without_access_reaches_only_the_pages_own_check(client):
    client.force_login(factories.make_user("c@example.edu", roles=[Role.CLINICIAN]))
    for status_url, page_url in _endpoints():
        response = client.get(status_url, headers=ADDRESS_BAR)
        assert response.status_code == 302 and response.url == page_url
        assert client.get(page_url).status_code == 403
