"""Correlation reports: the table built from the database, report computation and provenance,
exports (page, API, command line) without personal data or text, the token API, auditing.

The data is built by hand so every rank, tie and skip is known; statistics themselves are
tested against independent computations in test_statistics.py.
"""

import csv
import io
import json
import math
import re
from datetime import timedelta
from types import SimpleNamespace

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from scipy import stats as sps

from review.access import clear_cached_access
from review.models import (
    AccessApplication,
    AuditEvent,
    Dataset,
    ErrorTag,
    Instruction,
    ModelResponse,
    ReferenceResponse,
    ResponseJudgement,
    Review,
    Role,
)
from review.services.accounts import application_revoke
from scoring.models import ApiToken, CorrelationReport, MetricConfig, MetricScore, ModelVariant
from scoring.reports import compute, exports, selectors, services
from scoring.reports.errors import ReportError
from tests import factories

pytestmark = pytest.mark.django_db

QUESTION = "SECRET-QUESTION: what was the last potassium of the synthetic patient?"
RESPONSE_TEXT = "SECRET-RESPONSE-{i}-{m}: potassium 4.1 mmol/L"
REFERENCE_TEXT = "SECRET-REFERENCE: potassium 4.1 mmol/L"
MODELS = ["model-a", "model-b", '=HYPERLINK("http://evil")']  # the last one tests the CSV guard
N_RESAMPLES = 200


@pytest.fixture(autouse=True)
def _settings(settings, tmp_path):
    settings.PRIVATE_STORAGE_ROOT = tmp_path / "private"
    settings.MEDIA_ROOT = tmp_path / "private"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _config(backend: str) -> MetricConfig:
    return MetricConfig.objects.create(
        backend=backend,
        identity={"backend": backend, "versions": {"lib": "1.0"}},
        identity_hash=f"hash-{backend}",
        label=f"{backend.upper()} (first reference)",
    )


def _review(assignment, responses, ranks, correct, *, status=Review.Status.SUBMITTED, **kw):
    order = [r.pk for r in responses][::-1]  # shown in reverse: position != response order
    review = Review.objects.create(assignment=assignment, status=status, shown_order=order, **kw)
    by_id = {r.pk: (rank, ok) for r, rank, ok in zip(responses, ranks, correct, strict=True)}
    return review, ResponseJudgement.objects.bulk_create(
        [
            ResponseJudgement(
                review=review,
                response_id=rid,
                position=pos,
                rank=by_id[rid][0],
                is_correct=by_id[rid][1],
            )
            for pos, rid in enumerate(order)
        ]
    )


@pytest.fixture
def data():
    """Two instructions x three responses; two clinicians; ties, a skip and exclusions.

    - I1: clinician 1 ranks (1, 1, 3) [a tie]; clinician 2 ranks (1, 2, 3).
    - I2: clinician 1 ranks (2, 2, 2) [one distinct rank: skipped]; clinician 2 (3, 1, 2).
    - I2: a third clinician's draft and a fourth's "cannot assess": both excluded.
    Scores: bleu for every response; rouge for all but one (nan in the table).
    """
    d = SimpleNamespace()
    d.researcher = factories.make_user(
        "researcher@example.edu", roles=[Role.RESEARCHER], full_name="Rita Researcher"
    )
    d.c1 = factories.make_user("c1@example.edu", roles=[Role.CLINICIAN], full_name="Carla One")
    d.c2 = factories.make_user("c2@example.edu", roles=[Role.CLINICIAN], full_name="Colin Two")
    d.c3 = factories.make_user("c3@example.edu", roles=[Role.CLINICIAN], full_name="Cora Three")
    d.c4 = factories.make_user("c4@example.edu", roles=[Role.CLINICIAN], full_name="Cy Four")
    d.dataset = Dataset.objects.create(name="reports", is_synthetic=True)
    d.instructions, d.responses = [], []
    for i, (category, specialty) in enumerate([("+diagnosis", "cardiology"), ("triage", "@onc")]):
        instruction = Instruction.objects.create(
            dataset=d.dataset,
            instruction_id=f"INS-{i}",
            question=QUESTION,
            category=category,
            specialty=specialty,
        )
        ReferenceResponse.objects.create(
            instruction=instruction, annotator="Annotator_1", text=REFERENCE_TEXT
        )
        d.instructions.append(instruction)
        d.responses.append(
            [
                ModelResponse.objects.create(
                    instruction=instruction, model_name=m, text=RESPONSE_TEXT.format(i=i, m=m)
                )
                for m in MODELS
            ]
        )
    a = {(c, i): factories.assign(d.instructions[i], c) for c in (d.c1, d.c2) for i in (0, 1)}
    d.r11, d.j11 = _review(a[d.c1, 0], d.responses[0], [1, 1, 3], [True, True, False])
    d.r21, _ = _review(a[d.c2, 0], d.responses[0], [1, 2, 3], [True, False, False])
    d.r12, _ = _review(a[d.c1, 1], d.responses[1], [2, 2, 2], [True, True, True])
    d.r22, _ = _review(a[d.c2, 1], d.responses[1], [3, 1, 2], [False, True, None])
    draft = factories.assign(d.instructions[1], d.c3)
    _review(draft, d.responses[1], [1, 2, 3], [True] * 3, status=Review.Status.DRAFT)
    cannot = factories.assign(d.instructions[1], d.c4)
    _review(cannot, d.responses[1], [None] * 3, [None] * 3, cannot_assess="other")
    tag = ErrorTag.objects.get(slug="omission")
    d.j11[0].error_tags.add(tag)  # position 0 of review r11 = the last model's response

    d.bleu, d.rouge = _config("bleu"), _config("rougeL")
    values = {0: [30.0, 20.0, -5.0], 1: [10.0, 40.0, 25.0]}
    for i in (0, 1):
        for k, response in enumerate(d.responses[i]):
            MetricScore.objects.create(response=response, config=d.bleu, value=values[i][k])
            if not (i == 1 and k == 2):
                MetricScore.objects.create(
                    response=response, config=d.rouge, value=values[i][k] / 100
                )
    return d


def _done_report(d, **kw) -> CorrelationReport:
    report = services.report_create(
        dataset=d.dataset, actor=d.researcher, n_resamples=N_RESAMPLES, seed=7, enqueue=False, **kw
    )
    return compute.report_compute(report_id=report.pk)


# --- selector ----------------------------------------------------------------------------------
def test_selector_builds_the_table_from_submitted_reviews(data, django_assert_max_num_queries):
    # 8, and 3 for the study: the dataset's latest, the clinicians an admin left out of its
    # reports, and the reviews its report leaves out.
    with django_assert_max_num_queries(11):
        inputs = selectors.report_inputs(dataset=data.dataset)
    t = inputs.table
    assert len(t) == 12  # 4 submitted reviews x 3; the draft and "cannot assess" are left out
    assert inputs.review_ids == sorted([data.r11.pk, data.r21.pk, data.r12.pk, data.r22.pk])
    assert inputs.n_cannot_assess == 1
    rows = t.review == data.r11.pk
    by_response = dict(zip(t.response[rows], t.rank[rows], strict=True))
    assert by_response == {data.responses[0][0].pk: 1, data.responses[0][1].pk: 1,
                           data.responses[0][2].pk: 3}  # fmt: skip
    assert list(t.position[rows]) == [0, 1, 2]
    assert list(t.model[rows]) == MODELS[::-1]  # shown in reverse order
    assert set(t.category) == {"+diagnosis", "triage"} and set(t.specialty) == {
        "cardiology",
        "@onc",
    }
    assert set(t.clinician) == {data.c1.pk, data.c2.pk}
    assert np.isnan(t.correct[(t.review == data.r22.pk) & (t.model == MODELS[2])]).all()
    assert [m["key"] for m in inputs.metrics] == ["bleu", "rougeL"]
    missing = t.response == data.responses[1][2].pk
    assert np.isnan(inputs.scores["rougeL"][missing]).all()
    assert not np.isnan(inputs.scores["bleu"]).any()
    assert set(inputs.clinician_pseudonym) == {data.c1.pseudonym, data.c2.pseudonym}
    tagged = [tags for tags in inputs.error_tags if tags]
    assert tagged == [["omission"]]


def test_model_variants_come_from_the_import_and_declarations_win(data):
    a, b, _ = data.responses[0]
    ModelResponse.objects.filter(pk=a.pk).update(
        context_length=32768, generation_metadata={"base_model": "Base"}
    )
    ModelResponse.objects.filter(pk=b.pk).update(
        context_length=2048, generation_metadata={"base_model": "Base"}
    )
    assert selectors.model_variants(dataset=data.dataset) == {
        "model-a": ("Base", 32768),
        "model-b": ("Base", 2048),
    }
    services.model_variant_set(
        dataset=data.dataset, model_name="model-b", base_model="Other", context_length=None
    )
    assert selectors.model_variants(dataset=data.dataset)["model-b"] == ("Other", 2048)


def test_report_has_a_context_length_section_for_declared_variants(data, client):
    for name, length in (("model-a", 32768), ("model-b", 2048)):
        services.model_variant_set(
            dataset=data.dataset, model_name=name, base_model="M", context_length=length
        )
    report = _done_report(data)
    section = report.results["context_length"]
    assert [(c["base_model"], c["context_length"]) for c in section["cells"]] == [
        ("M", 2048),
        ("M", 32768),
    ]
    (cmp,) = section["comparisons"]
    # r11: a (1, correct) vs b (1, correct); r21: a (1, correct) vs b (2, incorrect);
    # r12: a (2, correct) vs b (2, correct); r22: a (3, incorrect) vs b (1, correct).
    assert cmp["n_reviews"] == 4 and cmp["n_instructions"] == 2
    assert (cmp["only_long_correct"], cmp["only_short_correct"]) == (1, 1)
    assert cmp["correct_difference"] == pytest.approx(0.0)
    assert cmp["rank_difference"] == pytest.approx((0 + 1 + 0 - 2) / 4)
    # Two clinicians judged each instruction: McNemar would count their pairs as independent.
    assert cmp["mcnemar_p_value"] is None and "not independent" in cmp["mcnemar_note"]
    assert report.results["context_length"]["test"].startswith("studentized cluster bootstrap")
    assert report.provenance["model_variants"]["model-a"] == {
        "base_model": "M",
        "context_length": 32768,
    }
    client.force_login(data.researcher)
    page = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert 'data-testid="context-comparisons"' in page and "32768 vs 2048" in page


# --- computing ---------------------------------------------------------------------------------
def test_report_create_queues_the_computation_and_audits(data, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        report = services.report_create(
            dataset=data.dataset, actor=data.researcher, n_resamples=N_RESAMPLES
        )
    report.refresh_from_db()  # Celery runs eagerly in tests
    assert report.status == CorrelationReport.Status.DONE, report.error
    assert isinstance(report.parameters["seed"], int)  # random, but recorded
    assert report.parameters["seed_given"] is False
    event = AuditEvent.objects.get(action=AuditEvent.Action.REPORT_CREATED)
    assert event.actor == data.researcher and event.details["n_resamples"] == N_RESAMPLES


def test_report_compute_stores_results_and_provenance(data):
    report = _done_report(data)
    assert report.status == CorrelationReport.Status.DONE, report.error
    results, provenance = report.results, report.provenance
    bleu = next(r for r in results["correlation"] if r["metric"] == "bleu")
    # r12 has one distinct rank: skipped, not zero. The others against scipy, one by one.
    assert bleu["n_skipped"] == 1 and bleu["n_reviews"] == 3
    expected = [
        sps.kendalltau([-1, -1, -3], [30, 20, -5]).statistic,
        sps.kendalltau([-1, -2, -3], [30, 20, -5]).statistic,
        sps.kendalltau([-3, -1, -2], [10, 40, 25]).statistic,
    ]
    assert math.isclose(bleu["mean_tau"], float(np.mean(expected)))
    # Two instructions: far too few clusters for an interval, and the table says why.
    assert bleu["ci_low"] is None and bleu["interval_note"].startswith("no interval: 2")
    assert results["clustering"] == {
        "unit": "instruction",
        "interval_method": "studentized cluster bootstrap",
        "n_clusters": 2,
        "min_clusters": 10,
    }
    for key in ("paired_tests", "human_ceiling", "leaderboard", "win_rate", "position_bias"):
        assert results[key], key
    assert set(results["breakdowns"]) == {"category", "specialty"}
    assert set(results["breakdowns"]["category"]) == {"+diagnosis", "triage"}
    assert len(results["responses"]) == 12
    json.dumps(results, allow_nan=False)  # no NaN: PostgreSQL's jsonb would refuse it

    assert provenance["dataset"]["name"] == "reports"
    assert provenance["dataset"]["version"] == data.dataset.updated_at.isoformat()
    assert [m["backend"] for m in provenance["metric_configs"]] == ["bleu", "rougeL"]
    assert provenance["metric_configs"][0]["identity"]["versions"] == {"lib": "1.0"}
    assert provenance["review_ids"] == sorted([data.r11.pk, data.r21.pk, data.r12.pk, data.r22.pk])
    assert provenance["counts"]["reviews_simulated"] == 0
    assert provenance["counts"]["reviews_cannot_assess_excluded"] == 1
    assert set(provenance["library_versions"]) >= {"numpy", "scipy"}
    assert report.parameters["seed"] == 7


def test_same_seed_gives_the_same_intervals(data):
    a, b = _done_report(data), _done_report(data)
    assert a.results["correlation"] == b.results["correlation"]


def test_a_report_without_reviews_fails_with_the_reason(data):
    empty = Dataset.objects.create(name="empty")
    report = services.report_create(dataset=empty, actor=data.researcher, enqueue=False)
    report = compute.report_compute(report_id=report.pk)
    assert report.status == CorrelationReport.Status.FAILED
    assert "no submitted reviews" in report.error


def test_it_rejects_bad_parameters(data):
    with pytest.raises(ReportError):
        services.report_create(dataset=data.dataset, actor=None, n_resamples=0, enqueue=False)
    with pytest.raises(ReportError):
        services.report_create(dataset=data.dataset, actor=None, confidence=1.0, enqueue=False)


# --- exports -----------------------------------------------------------------------------------
def _all_exports(client, report, token_key, tmp_path) -> dict[str, str]:
    bodies = {}
    for table in exports.TABLES:
        for fmt in exports.FORMATS:
            url = reverse("scoring_report_export", args=[report.pk, table, fmt])
            response = client.get(url)
            assert response.status_code == 200
            assert "attachment" in response["Content-Disposition"]
            bodies[f"page {table}.{fmt}"] = response.content.decode()
        response = client.get(
            reverse("scoring_api_report_table", args=[report.pk, table]),
            HTTP_AUTHORIZATION=f"Bearer {token_key}",
        )
        assert response.status_code == 200
        bodies[f"api {table}"] = response.content.decode()
        out = tmp_path / f"{table}.csv"
        call_command("export_report", report.pk, "--table", table, "--output", str(out))
        bodies[f"cli {table}"] = out.read_text()
    response = client.get(
        reverse("scoring_api_report", args=[report.pk]), HTTP_AUTHORIZATION=f"Bearer {token_key}"
    )
    bodies["api report"] = response.content.decode()
    return bodies


def test_exports_carry_no_names_emails_or_text_and_are_all_audited(data, client, tmp_path):
    report = _done_report(data)
    _, key = services.api_token_create(user=data.researcher, name="notebook")
    client.force_login(data.researcher)
    before = AuditEvent.objects.filter(action=AuditEvent.Action.EXPORT).count()
    bodies = _all_exports(client, report, key, tmp_path)
    forbidden = ["SECRET-", "@example.edu", "Carla", "Colin", "Rita", "potassium"]
    for name, body in bodies.items():
        for text in forbidden:
            assert text not in body, f"{text!r} leaked into {name}"
    # The pseudonyms are there instead.
    assert data.c1.pseudonym in bodies["page responses.csv"]
    # Every table: 2 page downloads + 1 API table + 1 CLI = 4 exports each, each audited.
    events = AuditEvent.objects.filter(action=AuditEvent.Action.EXPORT).order_by("id")[before:]
    assert len(events) == 4 * len(exports.TABLES)
    channels = sorted(
        (e.details["channel"], e.details["table"], e.details["format"]) for e in events
    )
    assert channels.count(("cli", "correlation", "csv")) == 1
    assert ("api", "responses", "json") in channels and ("page", "leaderboard", "json") in channels
    assert all(e.details["report"] == report.pk for e in events)


def test_per_response_csv_has_the_documented_columns_and_parses(data, client):
    report = _done_report(data)
    client.force_login(data.researcher)
    body = client.get(reverse("scoring_report_export", args=[report.pk, "responses", "csv"]))
    rows = list(csv.DictReader(io.StringIO(body.content.decode())))
    assert len(rows) == 12
    assert (
        list(rows[0])
        == exports.RESPONSE_COLUMNS
        + exports.GENERATION_COLUMNS
        + [
            "score_bleu",
            "score_rougeL",
        ]
        + [
            "truncated_bleu",
            "truncated_rougeL",
        ]
        + exports.CONTEXT_COLUMNS
    )
    tagged = [r for r in rows if r["error_tags"]]
    assert [r["error_tags"] for r in tagged] == ["omission"]
    assert {r["clinician"] for r in rows} == {data.c1.pseudonym, data.c2.pseudonym}


def test_every_csv_carries_the_seed_and_marks_simulated_reviews(data, client):
    data.c2.is_simulated = True  # c2's reviews become simulated
    data.c2.save(update_fields=["is_simulated"])
    report = _done_report(data)
    for table in exports.TABLES:
        rows = list(csv.DictReader(io.StringIO(exports.to_csv(report, table))))
        # Every section of the report is a table; a section can be empty (no model variants
        # declared here, no rubric grades), never missing.
        empty_here = (
            "variants",
            "context_length",
            "rubric_scores",
            "rubric_agreement",
            # Nothing was adjudicated, and no gold item set, in this data.
            "adjudications",
            "gold",
        )
        assert rows or table in empty_here, table
        assert {r["seed"] for r in rows} <= {"7"}
        assert {r["report"] for r in rows} <= {str(report.pk)}
        assert {r["simulated_reviews"] for r in rows} <= {"2"}
    rows = list(csv.DictReader(io.StringIO(exports.to_csv(report, "responses"))))
    by_clinician = {(r["clinician"], r["simulated"]) for r in rows}
    assert by_clinician == {(data.c1.pseudonym, "false"), (data.c2.pseudonym, "true")}


def test_an_address_alone_does_not_make_reviews_simulated(data, client):
    """Who is simulated is a field of the account: a real clinician whose address happens to
    look like the demo's keeps real reviews."""
    data.c2.email = "simulated-02@demo.medalign.local"
    data.c2.save(update_fields=["email"])
    report = _done_report(data)
    rows = list(csv.DictReader(io.StringIO(exports.to_csv(report, "responses"))))
    assert {r["simulated"] for r in rows} == {"false"}


def test_csv_cells_that_look_like_formulas_are_quoted(data, client):
    report = _done_report(data)
    client.force_login(data.researcher)
    for table in ("leaderboard", "responses"):
        body = client.get(reverse("scoring_report_export", args=[report.pk, table, "csv"]))
        text = body.content.decode()
        assert "\n=HYPERLINK" not in text and ",=HYPERLINK" not in text
        assert "'=HYPERLINK" in text
    rows = list(csv.DictReader(io.StringIO(exports.to_csv(report, "responses"))))
    assert {r["category"] for r in rows} == {"'+diagnosis", "triage"}
    assert {r["specialty"] for r in rows} == {"cardiology", "'@onc"}
    # Numbers stay numbers: a negative score is not a formula and is not quoted.
    assert "-5.0" in {r["score_bleu"] for r in rows}


def test_export_report_command(data, tmp_path, capsys):
    report = _done_report(data)
    call_command("export_report", report.pk, "--table", "leaderboard", "--format", "json")
    document = json.loads(capsys.readouterr().out)
    assert document["table"] == "leaderboard" and len(document["rows"]) == 3
    event = AuditEvent.objects.filter(action=AuditEvent.Action.EXPORT).latest("id")
    assert event.details["channel"] == "cli" and event.details["table"] == "leaderboard"
    with pytest.raises(CommandError):
        call_command("export_report", 999_999)


def test_page_export_of_an_unfinished_report_is_404(data, client):
    report = services.report_create(dataset=data.dataset, actor=None, enqueue=False)
    client.force_login(data.researcher)
    url = reverse("scoring_report_export", args=[report.pk, "correlation", "csv"])
    assert client.get(url).status_code == 404
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.EXPORT).exists()


# --- API ---------------------------------------------------------------------------------------
def _api(client, name, key=None, **kwargs):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    return client.get(reverse(name, kwargs=kwargs or None), **headers)


def test_api_requires_a_valid_token(data, client):
    report = _done_report(data)
    token, key = services.api_token_create(user=data.researcher, name="script")
    assert token.key_hash != key and key not in token.key_hash and token.prefix == key[:12]
    assert ApiToken.objects.filter(key_hash__contains=key).count() == 0
    client.force_login(data.researcher)  # a session alone is not enough
    assert _api(client, "scoring_api_reports").status_code == 401
    assert _api(client, "scoring_api_reports", "mar_wrong").status_code == 401
    response = _api(client, "scoring_api_reports", key)
    assert response.status_code == 200
    assert [r["id"] for r in response.json()["reports"]] == [report.pk]
    detail = _api(client, "scoring_api_report", key, report_id=report.pk).json()
    assert detail["status"] == "done" and "correlation" in detail["tables"]
    assert _api(client, "scoring_api_report", key, report_id=999).status_code == 404
    table = _api(client, "scoring_api_report_table", key, report_id=report.pk, table="nope")
    assert table.status_code == 404
    token.refresh_from_db()
    assert token.last_used_at is not None
    services.api_token_revoke(token=token)
    assert _api(client, "scoring_api_reports", key).status_code == 401


def test_api_needs_the_owners_current_researcher_access(data, client):
    _done_report(data)
    _, key = services.api_token_create(user=data.researcher, name="script")
    assert _api(client, "scoring_api_reports", key).status_code == 200
    # An approval that lapses (no event ends the token): refused while access is not current.
    application = AccessApplication.objects.get(user=data.researcher, status="approved")
    AccessApplication.objects.filter(pk=application.pk).update(
        expires_on=timezone.localdate() - timedelta(days=1)
    )
    clear_cached_access(data.researcher)
    response = _api(client, "scoring_api_reports", key)
    assert response.status_code == 403 and response.json()["error"] == "no_access"
    # A revocation ends the token itself: it never comes back with a new approval.
    AccessApplication.objects.filter(pk=application.pk).update(expires_on=application.expires_on)
    clear_cached_access(data.researcher)
    application_revoke(application=application, reviewer=data.researcher, reason="Left.")
    response = _api(client, "scoring_api_reports", key)
    assert response.status_code == 401 and response.json()["error"] == "invalid_token"
    # A clinician's token (a role that cannot read reports) is refused the same way.
    _, clinician_key = services.api_token_create(user=data.c1, name="x")
    assert _api(client, "scoring_api_reports", clinician_key).status_code == 403


def test_openapi_document_is_well_formed(client):
    response = client.get(reverse("scoring_api_openapi"))
    assert response.status_code == 200
    doc = response.json()
    assert doc["openapi"].startswith("3.") and doc["info"]["title"] and doc["info"]["version"]
    # Generated from the typed endpoints (django-ninja); the URLs clients use are unchanged.
    assert set(doc["paths"]) == {
        "/research/api/v1/reports/",
        "/research/api/v1/reports/{report_id}/",
        "/research/api/v1/reports/{report_id}/{table}.json",
    }
    assert reverse("scoring_api_report_table", args=[3, "correlation"]) == (
        "/research/api/v1/reports/3/correlation.json"
    )
    (scheme,) = doc["components"]["securitySchemes"].values()
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer"

    def refs(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "$ref":
                    yield v
                else:
                    yield from refs(v)
        elif isinstance(node, list):
            for v in node:
                yield from refs(v)

    for ref in refs(doc):
        name = ref.removeprefix("#/components/schemas/")
        assert name in doc["components"]["schemas"], ref
    for path, item in doc["paths"].items():
        for op in item.values():
            assert op["operationId"] and "200" in op["responses"] and "401" in op["responses"]
            templated = set(re.findall(r"\{(\w+)\}", path))
            declared = {p["name"] for p in op.get("parameters", [])}
            assert templated <= declared, path


# --- pages -------------------------------------------------------------------------------------
def test_report_page_shows_plots_and_tables(data, client):
    report = _done_report(data)
    client.force_login(data.researcher)
    html = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert html.count("<svg") >= 6  # correlation, accuracy, heatmap, 2 leaderboard, scatters…
    assert 'style="' not in html  # the CSP forbids inline styles
    assert "<script>" not in html
    assert "simulated-banner" not in html
    assert reverse("scoring_method") in html
    for text in ("SECRET-", "c1@example.edu", "Carla"):  # (the signed-in user's own email shows)
        assert text not in html


def test_pending_report_page_polls_with_a_static_script(data, client):
    report = services.report_create(dataset=data.dataset, actor=None, enqueue=False)
    client.force_login(data.researcher)
    html = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert "scoring/report_status.js" in html and 'http-equiv="refresh"' in html
    status = client.get(reverse("scoring_report_status", args=[report.pk])).json()
    assert status["status"] == "pending"


def test_new_report_form_creates_a_report(data, client, django_capture_on_commit_callbacks):
    client.force_login(data.researcher)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("scoring_reports"),
            {"dataset": data.dataset.pk, "n_resamples": 200, "seed": 3, "confidence": 0.9},
        )
    report = CorrelationReport.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("scoring_report_detail", args=[report.pk])
    report.refresh_from_db()
    assert report.status == "done" and report.parameters["seed"] == 3
    assert report.created_by == data.researcher


def test_token_page_shows_the_key_once_and_revokes_only_own_tokens(data, client):
    client.force_login(data.researcher)
    response = client.post(reverse("scoring_api_tokens"), {"name": "notebook"})
    key = response.context["new_key"]
    assert key and key in response.content.decode()
    token = ApiToken.objects.get()
    assert key not in client.get(reverse("scoring_api_tokens")).content.decode()
    other = factories.make_user("r2@example.edu", roles=[Role.RESEARCHER])
    client.force_login(other)
    assert client.post(reverse("scoring_api_token_revoke", args=[token.pk])).status_code == 404
    client.force_login(data.researcher)
    client.post(reverse("scoring_api_token_revoke", args=[token.pk]))
    token.refresh_from_db()
    assert token.revoked_at is not None
    from review.models import AuditEvent

    audited = AuditEvent.objects.filter(object_type="ApiToken", object_id=str(token.pk))
    assert sorted(audited.values_list("action", flat=True)) == [
        AuditEvent.Action.API_TOKEN_CREATED,
        AuditEvent.Action.API_TOKEN_REVOKED,
    ]
    assert key not in str(list(audited.values_list("details", flat=True)))


# --- demo --------------------------------------------------------------------------------------
def test_simulated_reviews_are_idempotent_and_labelled(data, client):
    from review.demo.reviews import demo_simulated_reviews

    lines = demo_simulated_reviews(dataset_name="reports", n_clinicians=2)
    assert "4 new" in lines[0]
    assert "0 new" in demo_simulated_reviews(dataset_name="reports", n_clinicians=2)[0]
    simulated = Review.objects.filter(assignment__clinician__is_simulated=True)
    assert simulated.count() == 4 and all(r.status == "submitted" for r in simulated)
    assert {r.assignment.clinician.full_name for r in simulated} == {
        "Simulated clinician 1",
        "Simulated clinician 2",
    }
    assert not any(r.assignment.clinician.has_usable_password() for r in simulated)
    report = _done_report(data)
    assert report.provenance["counts"]["reviews_simulated"] == 4
    assert report.provenance["counts"]["reviews_real"] == 4
    client.force_login(data.researcher)
    html = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert "simulated-banner" in html and "SIMULATED" in html


# --- evaluator provenance and truncation ----------------------------------------------------------
def test_every_export_and_the_page_name_each_metrics_evaluator(data, client):
    data.bleu.identity = {
        "backend": "bleu",
        "options": {"tokenize": "13a"},
        "signature": "nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:2.6.0",
        "versions": {"sacrebleu": "2.6.0"},
        "reference_aggregate": "max",
    }
    data.bleu.save()
    report = _done_report(data)
    (bleu,) = [m for m in exports.metric_provenance(report) if m["metric"] == "bleu"]
    assert bleu["sacrebleu_signature"].startswith("nrefs:1|case:mixed")
    assert bleu["reference_aggregation"] == "max"
    assert bleu["library_versions"] == {"sacrebleu": "2.6.0"}
    # A BLEU has no layer or weights: "not applicable", so "not recorded" keeps meaning a gap.
    assert bleu["layer"] == "not applicable" and bleu["weights_sha256"] == "not applicable"
    (rouge,) = [m for m in exports.metric_provenance(report) if m["metric"] == "rougeL"]
    assert rouge["stemming"] == "not recorded"  # it applies to ROUGE, and was not recorded
    assert bleu["n_truncated"] == 0 and bleu["truncated_excluded"] is False
    for table in exports.TABLES:
        document = json.loads(exports.to_json(report, table))
        assert [m["metric"] for m in document["metric_provenance"]] == ["bleu", "rougeL"]
    rows = list(csv.DictReader(io.StringIO(exports.to_csv(report, "correlation"))))
    assert {r["metric"]: r["reference_aggregation"] for r in rows} == {
        "bleu": "max",
        "rougeL": "not recorded",
    }
    rows = list(csv.DictReader(io.StringIO(exports.to_csv(report, "metrics"))))
    assert [r["sacrebleu_signature"][:7] for r in rows] == ["nrefs:1", "not app"]
    client.force_login(data.researcher)
    page = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert 'data-testid="metric-provenance"' in page and "tok:13a" in page
    assert "not recorded" in page


def test_bertscore_identity_names_model_layer_idf_and_weights(data):
    from scoring.reports.analysis import metric_provenance

    identity = {
        "backend": "bertscore",
        "model": {
            "source": "hub",
            "id": "distilbert-base-uncased",
            "files": {"model.safetensors": "ab" * 32},
        },
        "options": {"num_layers": 5, "idf": False, "rescale_with_baseline": True},
        "location": {"model_path": "/secret/path"},
    }
    p = metric_provenance(identity)
    assert p["model"] == "distilbert-base-uncased" and p["layer"] == 5
    assert p["idf"] is False and p["baseline_rescaling"] is True
    assert p["weights_sha256"] == {"model.safetensors": "ab" * 32}
    assert p["stemming"] == "not recorded" and "/secret/path" not in json.dumps(p)


def test_the_report_counts_responses_shown_masked_and_the_near_misses(data, client):
    # What masking finds in the text, whatever the import flagged: a name of another model
    # counts, a stale flag does not; a near miss ("Mixtrall") is counted apart.
    first, second = data.responses[0][0], data.responses[0][1]
    ModelResponse.objects.filter(instruction__dataset=data.dataset).update(text="Rest.")
    ModelResponse.objects.filter(pk=first.pk).update(text="As GPT-4, I would hold the statin.")
    ModelResponse.objects.filter(pk=second.pk).update(
        names_own_model=True, text="Mixtrall would hold the statin."
    )
    confirmed = data.responses[0][2]  # an admin confirmed its masking: no longer awaited
    ModelResponse.objects.filter(pk=confirmed.pk).update(
        text="Meditorn would agree.", mask_checked_at=timezone.now()
    )
    report = _done_report(data)
    assert report.provenance["counts"]["responses_masked"] == 1
    assert report.provenance["counts"]["responses_near_misses"] == 1
    client.force_login(data.researcher)
    page = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert "1 response had model names masked for clinicians" in page
    assert "1 response holds near misses that await an admin’s check (mask_check)" in page


def test_the_backends_recorded_provenance_reaches_every_export(data):
    # What a backend writes into MetricConfig.provenance (scoring.metrics) wins over what can be
    # dug out of the identity, and reaches the report's exports.
    MetricConfig.objects.filter(pk=data.bleu.pk).update(
        provenance={
            "metric": "bleu",
            "sacrebleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
            "reference_aggregation": "first",
            "library_versions": {"sacrebleu": "2.6.0"},
        }
    )
    report = _done_report(data)
    (bleu,) = [m for m in exports.metric_provenance(report) if m["metric"] == "bleu"]
    assert bleu["sacrebleu_signature"].endswith("version:2.6.0")
    assert bleu["reference_aggregation"] == "first"
    assert bleu["library_versions"] == {"sacrebleu": "2.6.0"}


def test_truncated_pairs_are_counted_and_can_be_excluded(data, client):
    cut = data.responses[0][0]  # model-a on instruction 0: bleu 30.0
    MetricScore.objects.filter(response=cut, config=data.bleu).update(truncated=True)
    kept = _done_report(data)
    (bleu,) = [m for m in exports.metric_provenance(kept) if m["metric"] == "bleu"]
    assert bleu["n_truncated"] == 1 and bleu["truncated_excluded"] is False
    rows = [r for r in kept.results["responses"] if r["response_id"] == cut.pk]
    assert rows and all(r["truncated_bleu"] and r["score_bleu"] == 30.0 for r in rows)

    client.force_login(data.researcher)
    response = client.post(
        reverse("scoring_reports"),
        {
            "dataset": data.dataset.pk,
            "n_resamples": 200,
            "seed": 7,
            "confidence": 0.95,
            "exclude_truncated": "on",
        },
    )
    assert response.status_code == 302
    excluded = compute.report_compute(report_id=CorrelationReport.objects.latest("id").pk)
    assert excluded.parameters["exclude_truncated"] is True
    assert excluded.status == CorrelationReport.Status.DONE, excluded.error
    rows = [r for r in excluded.results["responses"] if r["response_id"] == cut.pk]
    assert rows and all(r["score_bleu"] is None for r in rows)
    (bleu,) = [m for m in exports.metric_provenance(excluded) if m["metric"] == "bleu"]
    assert bleu["n_truncated"] == 1 and bleu["truncated_excluded"] is True
    b_kept = next(r for r in kept.results["correlation"] if r["metric"] == "bleu")
    b_excl = next(r for r in excluded.results["correlation"] if r["metric"] == "bleu")
    assert b_excl["n_scored"] == b_kept["n_scored"] - 2  # two clinicians judged that response


@pytest.mark.slow
def test_a_report_can_add_the_learned_metric_and_store_it(data, client):
    from scoring.models import LearnedMetricModel
    from scoring.reports import learned

    report = _done_report(data, learned_metric=True)
    assert report.status == CorrelationReport.Status.DONE, report.error
    keys = [r["metric"] for r in report.results["correlation"]]
    assert keys == ["bleu", "rougeL", "learned"]
    pairs = {(p["metric_a"], p["metric_b"]) for p in report.results["paired_tests"]}
    assert {("bleu", "learned"), ("rougeL", "learned")} <= pairs
    info = report.results["learned_metric"]
    assert info["n_reviews"] == 4 and info["n_splits"] == 2 and "by patient" in info["cv"]
    assert len(info["repeats"]) == learned.DEFAULT_REPEATS
    assert set(info["fold_of_instruction"]) == {"INS-0", "INS-1"}
    stored = LearnedMetricModel.objects.get(pk=info["stored_model_id"])
    assert stored.report_id == report.pk and stored.n_reviews == 4
    assert stored.provenance["embedding_model"] == learned.EMBEDDING_MODEL_ID
    assert len(stored.provenance["embedding_weights_sha256"]) == 64
    ranker = learned.LinearRanker.from_dict(stored.parameters)
    assert ranker.coef.shape == (len(stored.feature_names),)
    (row,) = [m for m in exports.metric_provenance(report) if m["metric"] == "learned"]
    assert row["weights_sha256"] == stored.provenance["embedding_weights_sha256"]
    client.force_login(data.researcher)
    page = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert "learned from 4 reviews" in page
    assert "SECRET-" not in json.dumps(report.results)


# --- every section exportable; what a rerun needs -------------------------------------------------
def test_every_section_is_a_csv_and_json_table_with_what_a_rerun_needs(data, client):
    ModelVariant.objects.create(
        dataset=data.dataset, model_name=MODELS[0], base_model="M", context_length=32768
    )
    ModelVariant.objects.create(
        dataset=data.dataset, model_name=MODELS[1], base_model="M", context_length=2048
    )
    report = _done_report(data, learned_metric=True)
    assert report.status == CorrelationReport.Status.DONE, report.error
    for table in ("significance", "paired_tests", "human_ceiling", "leave_one_out",
                  "position_bias", "context_length", "breakdowns", "style_control", "reviews",
                  "variants"):  # fmt: skip
        document = json.loads(exports.to_json(report, table))
        assert document["rows"], table
        assert set(document["rows"][0]) == set(exports.columns(report, table))
        rows = list(csv.DictReader(io.StringIO(exports.to_csv(report, table))))
        assert len(rows) == len(document["rows"])
    parameters = json.loads(exports.to_json(report, "correlation"))["parameters"]
    assert parameters["confidence"] == 0.95 and parameters["cluster_unit"] == "instruction"
    assert parameters["model_variants"][MODELS[0]] == {"base_model": "M", "context_length": 32768}
    assert parameters["response_set"]["fingerprint"]
    reviews = {r["review_id"]: r for r in exports.rows(report, "reviews")}
    # The "cannot assess" review is there with its reason, the one-rank review marked skipped,
    # every review with its instruction's learned fold.
    assert any(r["excluded"] == "cannot assess: other" for r in reviews.values())
    assert reviews[data.r12.pk]["skipped"] is True and reviews[data.r12.pk]["distinct_ranks"] == 1
    assert all(r["learned_fold"] in (0, 1) for r in reviews.values())
    leave_one_out = exports.rows(report, "leave_one_out")
    assert {r["clinician"] for r in leave_one_out if r["part"] == "clinician"} == {
        data.c1.pseudonym,
        data.c2.pseudonym,
    }
