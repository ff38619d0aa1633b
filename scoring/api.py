"""Read-only JSON API for researchers: reports and their tables, with per-user tokens.

Authentication is ``Authorization: Bearer <key>`` only (no session, so no CSRF surface). A key
is looked up by its sha256; the token must be unrevoked, and its owner must hold researcher or
admin access *now* (``user_access``): revoking or letting a DUA approval lapse ends API access
without touching tokens. Missing or unknown token: 401; valid token, no current access: 403.
"""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from review.access import user_access
from review.models import Role
from scoring import exports, selectors, services
from scoring.models import CorrelationReport

API_VERSION = "1.0.0"


def _error(status: int, code: str, message: str) -> JsonResponse:
    response = JsonResponse({"error": code, "message": message}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="medalign-research"'
    return response


def token_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        header = request.headers.get("Authorization", "")
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            return _error(401, "unauthenticated", "send Authorization: Bearer <token>")
        token = selectors.api_token_for_key(key=key.strip())
        if token is None or not token.user.is_active:
            return _error(401, "invalid_token", "the token is unknown or revoked")
        access = user_access(token.user)
        if not (access.is_admin or access.has(Role.RESEARCHER)):
            return _error(403, "no_access", "the token's owner has no current researcher access")
        services.api_token_touch(token=token)
        request.api_user = token.user  # type: ignore[attr-defined]
        return view(request, *args, **kwargs)

    return wrapped


def _report_or_404(report_id: int) -> CorrelationReport | None:
    return selectors.report_get(report_id=report_id)


@require_GET
@token_required
def reports(request: HttpRequest) -> JsonResponse:
    items = [
        exports.report_summary(
            r,
            url=request.build_absolute_uri(
                reverse("scoring_api_report", kwargs={"report_id": r.pk})
            ),
        )
        for r in selectors.reports_recent(limit=200)
    ]
    return JsonResponse({"reports": items})


@require_GET
@token_required
def report(request: HttpRequest, report_id: int) -> JsonResponse:
    obj = _report_or_404(report_id)
    if obj is None:
        return _error(404, "not_found", "no such report")
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
            )
        }
        data["metric_provenance"] = exports.metric_provenance(obj)
    return JsonResponse(data)


@require_GET
@token_required
def report_table(request: HttpRequest, report_id: int, table: str) -> JsonResponse:
    obj = _report_or_404(report_id)
    if obj is None or table not in exports.TABLES:
        return _error(404, "not_found", "no such report or table")
    if obj.status != CorrelationReport.Status.DONE:
        return _error(409, "not_ready", f"the report is {obj.status}")
    document = exports.document(obj, table)
    services.report_export_record(
        report=obj,
        table=table,
        fmt="json",
        channel="api",
        actor=request.api_user,  # type: ignore[attr-defined]
        rows=len(document["rows"]),
        request=request,
    )
    response = JsonResponse(document)
    response["Cache-Control"] = "no-store, private"
    return response


@require_GET
def openapi(request: HttpRequest) -> JsonResponse:
    """The OpenAPI 3 description (public: it describes the API, it holds no data)."""
    base = reverse("scoring_api_openapi").rsplit("/", 1)[0]  # .../api/v1
    return JsonResponse(openapi_document(request.build_absolute_uri(base)))


def openapi_document(server: str) -> dict[str, Any]:
    error = {"$ref": "#/components/schemas/Error"}

    def responses(ok: dict[str, Any], *extra: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "200": {"description": "OK", "content": {"application/json": {"schema": ok}}},
            "401": {"description": "Missing, unknown or revoked token", "content": _json(error)},
            "403": {
                "description": "The owner has no current researcher access",
                "content": _json(error),
            },
        }
        for status in extra:
            out[str(status)] = {"description": _STATUS[status], "content": _json(error)}
        return out

    report_id = {
        "name": "report_id",
        "in": "path",
        "required": True,
        "schema": {"type": "integer"},
    }
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "MedAlign Review research API",
            "version": API_VERSION,
            "description": (
                "Read-only access to metric–clinician correlation reports. Exports carry "
                "pseudonymous clinician ids, never names, emails or any record or response "
                "text. Every table download is audited."
            ),
        },
        "servers": [{"url": server}],
        "security": [{"bearerAuth": []}],
        "paths": {
            "/reports/": {
                "get": {
                    "summary": "List reports",
                    "operationId": "listReports",
                    "responses": responses(
                        {
                            "type": "object",
                            "properties": {
                                "reports": {
                                    "type": "array",
                                    "items": {"$ref": "#/components/schemas/ReportSummary"},
                                }
                            },
                        }
                    ),
                }
            },
            "/reports/{report_id}/": {
                "get": {
                    "summary": "One report: parameters, provenance, summary statistics",
                    "operationId": "getReport",
                    "parameters": [report_id],
                    "responses": responses({"$ref": "#/components/schemas/Report"}, 404),
                }
            },
            "/reports/{report_id}/{table}.json": {
                "get": {
                    "summary": "A table of a report (audited as an export)",
                    "operationId": "getReportTable",
                    "parameters": [
                        report_id,
                        {
                            "name": "table",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string", "enum": list(exports.TABLES)},
                        },
                    ],
                    "responses": responses({"$ref": "#/components/schemas/Table"}, 404, 409),
                }
            },
        },
        "components": {
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A personal token from the “API tokens” page.",
                }
            },
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error", "message"],
                    "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
                },
                "ReportSummary": {
                    "type": "object",
                    "required": ["id", "dataset", "status"],
                    "properties": {
                        "id": {"type": "integer"},
                        "title": {"type": "string"},
                        "dataset": {"type": "string"},
                        "status": {
                            "type": "string",
                            "enum": [s.value for s in CorrelationReport.Status],
                        },
                        "created_at": {"type": "string", "format": "date-time"},
                        "finished_at": {"type": "string", "format": "date-time", "nullable": True},
                        "parameters": {"type": "object"},
                        "reviews": {"type": "integer", "nullable": True},
                        "simulated_reviews": {"type": "integer", "nullable": True},
                        "url": {"type": "string"},
                    },
                },
                "Report": {
                    "allOf": [
                        {"$ref": "#/components/schemas/ReportSummary"},
                        {
                            "type": "object",
                            "properties": {
                                "error": {"type": "string"},
                                "tables": {
                                    "type": "object",
                                    "additionalProperties": {"type": "string"},
                                },
                                "provenance": {"type": "object"},
                                "summary": {"type": "object"},
                            },
                        },
                    ]
                },
                "Table": {
                    "type": "object",
                    "required": ["report", "table", "columns", "rows"],
                    "properties": {
                        "report": {"type": "integer"},
                        "dataset": {"type": "string"},
                        "table": {"type": "string", "enum": list(exports.TABLES)},
                        "parameters": {"type": "object"},
                        "computed_at": {"type": "string", "nullable": True},
                        "simulated_reviews": {"type": "integer"},
                        "columns": {"type": "array", "items": {"type": "string"}},
                        "rows": {"type": "array", "items": {"type": "object"}},
                    },
                },
            },
        },
    }


_STATUS = {404: "No such report or table", 409: "The report is not computed yet"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}
