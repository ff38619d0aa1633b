"""Read-only JSON API for researchers: reports and their tables, with per-user tokens.

Typed endpoints (django-ninja): the OpenAPI description at ``/research/api/v1/openapi.json`` is
generated from the schemas below, so it cannot drift from what the endpoints return.

Authentication is ``Authorization: Bearer <key>`` only (no session, so no CSRF surface). A key
is looked up by its sha256; the token must be unrevoked, and its owner must hold researcher or
admin access *now* (``user_access``): revoking or letting a DUA approval lapse ends API access
without touching tokens. Missing or unknown token: 401 (with ``WWW-Authenticate``); valid token,
no current access: 403; no such report or table: 404; report not computed yet: 409. Every error
body is ``{"error": code, "message": text}``. Table downloads are audited as exports.
"""

from typing import Annotated, Any, Literal

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path, reverse
from ninja import NinjaAPI, Schema
from ninja import Path as PathParam
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.security import HttpBearer

from review.access import user_access
from review.models import Role
from scoring.models import CorrelationReport
from scoring.reports import exports, selectors, services

API_VERSION = "1.1.0"
Status = Literal["pending", "running", "done", "failed"]


# --- errors --------------------------------------------------------------------------------------
class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _error(status: int, code: str, message: str) -> JsonResponse:
    response = JsonResponse({"error": code, "message": message}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="medalign-research"'
    return response


# --- authentication ------------------------------------------------------------------------------
class BearerToken(HttpBearer):
    """A researcher's personal token from the “API tokens” page."""

    def __call__(self, request: HttpRequest) -> Any:
        header = request.headers.get("Authorization", "")
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise ApiError(401, "unauthenticated", "send Authorization: Bearer <token>")
        return self.authenticate(request, key.strip())

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        api_token = selectors.api_token_for_key(key=token)
        if api_token is None or not api_token.user.is_active:
            raise ApiError(401, "invalid_token", "the token is unknown or revoked")
        access = user_access(api_token.user)
        if not (access.is_admin or access.has(Role.RESEARCHER)):
            raise ApiError(403, "no_access", "the token's owner has no current researcher access")
        services.api_token_touch(token=api_token)
        return api_token.user


class ResearchAPI(NinjaAPI):
    def get_root_path(self, path_params: dict[str, Any]) -> str:
        # The API is mounted without a namespace, so existing URL names keep working.
        return reverse("scoring_api_reports").removesuffix("reports/")


api = ResearchAPI(
    title="MedAlign Review research API",
    version=API_VERSION,
    description=(
        "Read-only access to metric–clinician correlation reports. Exports carry pseudonymous "
        "clinician ids, never names, emails or any record or response text. Every table "
        "download is audited."
    ),
    auth=BearerToken(),
    urls_namespace="scoring_api",
    openapi_url="/openapi.json",
    docs_url=None,
)


@api.exception_handler(ApiError)
def _api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return _error(exc.status, exc.code, exc.message)


@api.exception_handler(AuthenticationError)
def _auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return _error(401, "unauthenticated", "send Authorization: Bearer <token>")


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    # The only parameters are path segments: one that is not a report id names nothing, which
    # is the 404 clients got before the API was typed.
    return _error(404, "not_found", "no such report or table")


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return _error(exc.status_code, "error", str(exc))


# --- schemas -------------------------------------------------------------------------------------
class Error(Schema):
    error: str
    message: str


class Parameters(Schema):
    n_resamples: int | None = None
    seed: int | None = None
    confidence: float | None = None
    config_ids: list[int] | None = None
    exclude_truncated: bool | None = None


class ReportSummary(Schema):
    id: int
    title: str
    dataset: str
    status: Status
    created_at: str
    finished_at: str | None
    parameters: Parameters
    reviews: int | None
    simulated_reviews: int | None
    url: str


class ReportList(Schema):
    reports: list[ReportSummary]


class MetricProvenance(Schema):
    """One metric's evaluator; the string "not recorded" stands for anything not recorded."""

    metric: str
    label: str
    config_id: int | None
    backend: str | None
    identity_hash: str | None
    model: Any
    weights_sha256: Any
    layer: Any
    idf: Any
    baseline_rescaling: Any
    tokenizer: Any
    stemming: Any
    sacrebleu_signature: Any
    reference_aggregation: Any
    max_input_tokens: Any
    library_versions: Any
    n_truncated: Any
    truncated_excluded: Any


class Report(ReportSummary):
    error: str
    tables: dict[str, str]
    provenance: dict[str, Any]
    metric_provenance: list[MetricProvenance] = []
    summary: dict[str, Any] | None = None


class Table(Schema):
    report: int
    dataset: str
    table: str
    parameters: Parameters
    computed_at: str | None
    simulated_reviews: int
    metric_provenance: list[MetricProvenance]
    columns: list[str]
    rows: list[dict[str, Any]]


ERRORS = {401: Error, 403: Error}


# --- endpoints -----------------------------------------------------------------------------------
@api.get(
    "/reports/",
    response={200: ReportList, **ERRORS},
    url_name="scoring_api_reports",
    operation_id="listReports",
    summary="List reports",
)
def reports(request: HttpRequest) -> dict[str, Any]:
    items = [
        exports.report_summary(
            r,
            url=request.build_absolute_uri(
                reverse("scoring_api_report", kwargs={"report_id": r.pk})
            ),
        )
        for r in selectors.reports_recent(limit=200)
    ]
    return {"reports": items}


ReportId = Annotated[int, PathParam(ge=0, le=2**63 - 1, description="A report's id")]


@api.get(
    "/reports/{report_id}/",
    response={200: Report, 404: Error, **ERRORS},
    url_name="scoring_api_report",
    operation_id="getReport",
    summary="One report: parameters, provenance (per metric: evaluator and truncation), summary",
)
def report(request: HttpRequest, report_id: ReportId) -> dict[str, Any]:
    obj = selectors.report_get(report_id=report_id)
    if obj is None:
        raise ApiError(404, "not_found", "no such report")
    data = exports.report_summary(obj)
    data["error"] = obj.error
    data["tables"] = {
        table: request.build_absolute_uri(
            reverse("scoring_api_report_table", kwargs={"report_id": obj.pk, "table": table})
        )
        for table in exports.TABLES
    }
    provenance = dict(obj.provenance)
    # Review ids are in the provenance for reproducibility; the list can be long, so the API
    # gives its length here and the ids themselves in the exported tables (review_id column).
    for key in ("review_ids", "simulated_review_ids"):
        if key in provenance:
            provenance[key] = len(provenance[key])
    data["provenance"] = provenance
    data["metric_provenance"] = []
    if obj.status == CorrelationReport.Status.DONE:
        results = obj.results
        data["summary"] = {
            k: results.get(k)
            for k in (
                "counts",
                "human_ceiling",
                "paired_tests",
                "position_bias",
                "win_rate",
                "bradley_terry",
                "context_length",
                "learned_metric",
            )
        }
        data["metric_provenance"] = exports.metric_provenance(obj)
    return data


@api.get(
    "/reports/{report_id}/{table}.json",
    response={200: Table, 404: Error, 409: Error, **ERRORS},
    url_name="scoring_api_report_table",
    operation_id="getReportTable",
    summary="A table of a report (audited as an export): " + ", ".join(exports.TABLES),
)
def report_table(
    request: HttpRequest,
    report_id: ReportId,
    table: Annotated[str, PathParam(description="One of: " + ", ".join(exports.TABLES))],
) -> HttpResponse:
    obj = selectors.report_get(report_id=report_id)
    if obj is None or table not in exports.TABLES:
        raise ApiError(404, "not_found", "no such report or table")
    if obj.status != CorrelationReport.Status.DONE:
        raise ApiError(409, "not_ready", f"the report is {obj.status}")
    document = exports.document(obj, table)
    services.report_export_record(
        report=obj,
        table=table,
        fmt="json",
        channel="api",
        actor=request.auth,  # type: ignore[attr-defined]
        rows=len(document["rows"]),
        request=request,
    )
    response = JsonResponse(document)
    response["Cache-Control"] = "no-store, private"
    return response


def urlpatterns() -> list[URLPattern]:
    """The API's URLs under ``api/v1/``, with the names existing clients and pages use.

    Ninja's own root page and docs are left out (the docs would load scripts from a CDN).
    """
    names = {"openapi-json": "scoring_api_openapi"}
    out = []
    for p in api.urls[0]:
        name = names.get(p.name, p.name)
        if name and name.startswith("scoring_api_"):
            out.append(path("api/v1/" + str(p.pattern), p.callback, name=name))
    return out
