"""Researcher pages for correlation reports: list and create, read, export; API tokens; method.

Scoring-run pages live in ``scoring.runs.views``; the token API in ``scoring.reports.api``.
"""

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from review import access
from review.models import response_label
from scoring.models import CorrelationReport
from scoring.reports import exports, learned, plots, selectors, services
from scoring.reports.forms import ApiTokenForm, ReportForm

# Points drawn per scatter plot: thousands of circles make a page heavy and add nothing a
# reader can see; a deterministic stride sample keeps the shape (the export has every row).
SCATTER_MAX_POINTS = 1200


def _svg(document: str) -> SafeString:
    # plots.py escapes every piece of text it draws, so its output is safe to inline.
    # Charts carry no style attribute (the CSP refuses inline styles): scoring.css sizes them.
    return mark_safe(document)  # noqa: S308


def _report_or_404(report_id: int) -> CorrelationReport:
    report = selectors.report_get(report_id=report_id)
    if report is None:
        raise Http404
    return report


@access.researcher_required
@require_http_methods(["GET", "POST"])
def reports(request: HttpRequest) -> HttpResponse:
    form = ReportForm(request.POST or None, datasets=selectors.report_datasets())
    if request.method == "POST" and form.is_valid():
        try:
            report = services.report_create(
                dataset=form.cleaned_data["dataset"],
                actor=request.user,
                n_resamples=form.cleaned_data["n_resamples"],
                seed=form.cleaned_data["seed"],
                confidence=form.cleaned_data["confidence"],
                exclude_truncated=form.cleaned_data["exclude_truncated"],
                learned_metric=form.cleaned_data["learned_metric"],
                title=form.cleaned_data["title"],
                request=request,
            )
        except services.ReportError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("scoring_report_detail", report_id=report.pk)
    return render(
        request,
        "scoring/reports/list.html",
        {"form": form, "reports": selectors.reports_recent()},
    )


@access.researcher_required
@require_GET
def report_detail(request: HttpRequest, report_id: int) -> HttpResponse:
    report = _report_or_404(report_id)
    context: dict[str, Any] = {
        "report": report,
        "tables": exports.TABLES,
        "formats": exports.FORMATS,
        "simulated": report.provenance.get("counts", {}).get("reviews_simulated", 0),
    }
    if report.status == CorrelationReport.Status.DONE:
        context.update(_report_figures(report.results))
        context["metric_provenance"] = exports.metric_provenance(report)
        context["lm_label"] = learned.LEARNED_LABEL
        context["provenance_headers"] = [
            c.replace("_", " ").capitalize() for c in exports.PROVENANCE_COLUMNS
        ]
    return render(request, "scoring/reports/detail.html", context)


@access.researcher_required
@require_GET
def report_status(request: HttpRequest, report_id: int) -> JsonResponse:
    status = selectors.report_status(report_id=report_id)
    if status is None:
        raise Http404
    return JsonResponse(status)


@access.researcher_required
@require_GET
def report_export(request: HttpRequest, report_id: int, table: str, fmt: str) -> HttpResponse:
    report = _report_or_404(report_id)
    if table not in exports.TABLES or fmt not in exports.FORMATS:
        raise Http404
    if report.status != CorrelationReport.Status.DONE:
        raise Http404
    body, content_type = exports.render(report, table, fmt)
    services.report_export_record(
        report=report,
        table=table,
        fmt=fmt,
        channel="page",
        actor=request.user,
        rows=len(report.results.get(table, [])),
        request=request,
    )
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = (
        f'attachment; filename="{exports.filename(report, table, fmt)}"'
    )
    response["Cache-Control"] = "no-store, private"
    return response


@access.researcher_required
@require_GET
def method(request: HttpRequest) -> HttpResponse:
    return render(request, "scoring/method.html")


@access.researcher_required
@require_http_methods(["GET", "POST"])
def api_tokens(request: HttpRequest) -> HttpResponse:
    form = ApiTokenForm(request.POST or None)
    new_key = None
    if request.method == "POST" and form.is_valid():
        _, new_key = services.api_token_create(user=request.user, name=form.cleaned_data["name"])
        form = ApiTokenForm()
    response = render(
        request,
        "scoring/tokens.html",
        {
            "form": form,
            "new_key": new_key,
            "tokens": selectors.api_tokens_for_user(user=request.user),
            "api_root": request.build_absolute_uri(reverse("scoring_api_reports")),
            "openapi_url": request.build_absolute_uri(reverse("scoring_api_openapi")),
            "now": timezone.now(),
            "token_days": settings.API_TOKEN_DAYS,
        },
    )
    if new_key:
        response["Cache-Control"] = "no-store, private"  # the key is on this page only once
    return response


@access.researcher_required
@require_POST
def api_token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = selectors.api_tokens_for_user(user=request.user).filter(pk=token_id).first()
    if token is None:
        raise Http404  # someone else's token looks exactly like a missing one
    services.api_token_revoke(token=token)
    messages.success(request, f"Token “{token.name}” revoked.")
    return redirect("scoring_api_tokens")


# --- figures -----------------------------------------------------------------------------------
def _fmt_ci(value: Any, lo: Any, hi: Any, digits: int = 3) -> str:
    def f(v: Any) -> str:
        return "n/a" if v is None else f"{v:.{digits}f}"

    return f"{f(value)} [{f(lo)}, {f(hi)}]"


def _report_figures(results: dict[str, Any]) -> dict[str, Any]:
    correlation = results.get("correlation", [])
    ceiling = results.get("human_ceiling", {})
    tau_rows = [
        {"label": r["label"], "value": r["mean_tau"], "lo": r["ci_low"], "hi": r["ci_high"]}
        for r in correlation
    ]
    if ceiling:
        tau_rows.append(
            {
                "label": "Clinician vs clinician (ceiling)",
                "value": ceiling.get("mean_tau"),
                "lo": ceiling.get("ci_low"),
                "hi": ceiling.get("ci_high"),
            }
        )
    accuracy_rows = [
        {
            "label": r["label"],
            "value": r["pairwise_accuracy"],
            "lo": r["pairwise_ci_low"],
            "hi": r["pairwise_ci_high"],
        }
        for r in correlation
    ]
    leaderboard = results.get("leaderboard", [])
    win = results.get("win_rate", {"models": [], "matrix": []})
    bias = results.get("position_bias", {})
    labels = {m["key"]: m["label"] for m in results.get("metrics", [])}
    figures = {
        "correlation_chart": _svg(
            plots.interval_chart(
                tau_rows,
                "Agreement with clinicians: mean per-review Kendall's tau-b",
                "Kendall's tau-b (95% cluster-bootstrap interval)",
            )
        )
        if tau_rows
        else None,
        "accuracy_chart": _svg(
            plots.interval_chart(
                accuracy_rows, "Pairwise accuracy", "Share of pairs ordered as clinicians", (0, 1)
            )
        )
        if accuracy_rows
        else None,
        "win_chart": _svg(plots.heatmap(win["models"], win["matrix"], "Win rate (row vs column)"))
        if win["models"]
        else None,
        "correct_chart": _svg(
            plots.bar_chart(
                [
                    {
                        "label": r["model"],
                        "value": r["share_correct"],
                        "lo": r["correct_ci_low"],
                        "hi": r["correct_ci_high"],
                    }
                    for r in leaderboard
                ],
                "Share judged correct (Wilson interval)",
                "Share correct",
            )
        )
        if leaderboard
        else None,
        "bt_chart": _svg(
            plots.bar_chart(
                [
                    {
                        "label": r["model"],
                        "value": r["bt_strength"],
                        "lo": r["bt_ci_low"],
                        "hi": r["bt_ci_high"],
                    }
                    for r in leaderboard
                ],
                "Bradley-Terry strength (bootstrap interval)",
                "log-strength",
            )
        )
        if leaderboard
        else None,
        "position_chart": _svg(
            plots.bar_chart(
                [
                    {"label": response_label(p), "value": m, "lo": None, "hi": None}
                    for p, m in zip(
                        bias.get("positions", []), bias.get("mean_rank", []), strict=True
                    )
                ],
                "Mean rank by shown position",
                "Mean rank (1 = best)",
            )
        )
        if bias.get("positions")
        else None,
        "scatters": _scatters(results),
        "correlation": correlation,
        "ceiling": ceiling,
        "leaderboard": leaderboard,
        "bias": bias,
        "paired": [
            {
                **p,
                "label_a": labels.get(p["metric_a"], p["metric_a"]),
                "label_b": labels.get(p["metric_b"], p["metric_b"]),
                "summary": _fmt_ci(p["difference"], p["ci_low"], p["ci_high"]),
            }
            for p in results.get("paired_tests", [])
        ],
        "breakdowns": _breakdown_tables(results),
        "context": _context_tables(results.get("context_length") or {}),
        "counts": results.get("counts", {}),
        "labels": labels,
    }
    return figures


def _context_tables(section: dict[str, Any]) -> dict[str, Any]:
    """The context-length section's rows, with intervals already formatted."""
    return {
        "cells": [
            {
                **c,
                "correct": _fmt_ci(c["share_correct"], c["correct_ci_low"], c["correct_ci_high"]),
            }
            for c in section.get("cells", [])
        ],
        "comparisons": [
            {
                **c,
                "correct": _fmt_ci(
                    c["correct_difference"],
                    c["correct_difference_ci_low"],
                    c["correct_difference_ci_high"],
                ),
                "rank": _fmt_ci(
                    c["rank_difference"], c["rank_difference_ci_low"], c["rank_difference_ci_high"]
                ),
            }
            for c in section.get("comparisons", [])
        ],
    }


def _scatters(results: dict[str, Any]) -> list[dict[str, Any]]:
    responses = results.get("responses", [])
    step = max(1, -(-len(responses) // SCATTER_MAX_POINTS))
    sample = responses[::step]
    out = []
    for metric in results.get("metrics", []):
        key = f"score_{metric['key']}"
        points = [(r["rank"], r[key]) for r in sample if r.get(key) is not None and r["rank"]]
        out.append(
            {
                "label": metric["label"],
                "svg": _svg(
                    plots.scatter(
                        points,
                        f"{metric['label']} against clinician rank",
                        "Rank (1 = best)",
                        metric["label"],
                    )
                ),
                "shown": len(points),
                "total": sum(1 for r in responses if r.get(key) is not None and r["rank"]),
            }
        )
    return out


def _breakdown_tables(results: dict[str, Any]) -> list[dict[str, Any]]:
    metrics = results.get("metrics", [])
    tables = []
    for by, title in (("category", "Instruction category"), ("specialty", "Author specialty")):
        groups = results.get("breakdowns", {}).get(by, {})
        rows = []
        for value, group in groups.items():
            cells = []
            for m in metrics:
                c = group["metrics"].get(m["key"], {})
                cells.append(
                    {
                        "summary": _fmt_ci(c.get("mean_tau"), c.get("ci_low"), c.get("ci_high")),
                        "n": c.get("n_reviews", 0),
                    }
                )
            rows.append({"value": value, "n_reviews": group["n_reviews"], "cells": cells})
        tables.append({"by": by, "title": title, "rows": rows})
    return tables
