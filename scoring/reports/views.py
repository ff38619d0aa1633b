"""Researcher pages for correlation reports: list and create, read, export; API tokens; method.

Scoring-run pages live in ``scoring.runs.views``; the token API in ``scoring.reports.api``.
"""

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from review import access
from scoring.models import CorrelationReport
from scoring.reports import exports, learned, selectors, services, wording
from scoring.reports.errors import ReportError
from scoring.reports.forms import ApiTokenForm, ReportForm
from scoring.reports.page import paper_page, report_page
from scoring.reports.paper import paper_tables_for
from scoring.reports.truth import consensus_label, truth_page


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
                study=form.cleaned_data["study"],
                include_unblindable=form.cleaned_data["include_unblindable"],
                source=form.cleaned_data["source"] or "app",
                cluster=form.cleaned_data["cluster"] or "auto",
                min_clusters=form.cleaned_data["min_clusters"] or 10,
                ppi_predictor=form.cleaned_data["ppi_predictor"] or "auto",
                consensus=form.cleaned_data["consensus"] or "reviews",
                include_gold=form.cleaned_data["include_gold"],
            )
        except ReportError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("scoring_report_detail", report_id=report.pk)
    return render(
        request,
        "scoring/reports/list.html",
        {
            "form": form,
            "reports": selectors.reports_recent(),
            "datasets": selectors.report_datasets(),
        },
    )


@access.researcher_required
@require_GET
def report_detail(request: HttpRequest, report_id: int) -> HttpResponse:
    report = _report_or_404(report_id)
    context: dict[str, Any] = {
        "report": report,
        "tables": [{"name": t, "label": exports.TABLE_LABELS[t]} for t in exports.TABLES],
        "formats": exports.FORMATS,
        "simulated": report.provenance.get("counts", {}).get("reviews_simulated", 0),
        # Said the same way while computing and once done (it read "instructions" before).
        "resampling_unit": wording.resampling_unit(report.parameters, report.results),
        # The truth metrics were scored against, named on every page state.
        "consensus_label": consensus_label(str(report.parameters.get("consensus", "reviews"))),
    }
    if report.status == CorrelationReport.Status.DONE:
        context.update(report_page(report.results))
        context["metric_provenance"] = exports.metric_provenance(report)
        context.update(truth_page(report.results))
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
def paper(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """The MedAlign paper's tables from a dataset's release judgements, beside the paper's;
    admins also map the dataset's model names to the paper's here."""
    dataset = get_object_or_404(selectors.report_datasets(), pk=dataset_id)
    tables = paper_tables_for(dataset)
    is_admin = bool(getattr(request, "access", None) and request.access.is_admin)  # type: ignore[attr-defined]
    return render(
        request,
        "scoring/reports/paper.html",
        {"dataset": dataset, "tables": tables, "can_map": is_admin, **paper_page(tables)},
    )


@access.admin_required
@require_POST
def paper_map(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """An admin maps the dataset's model names to the paper's models (``map:<model name>``
    fields, each a paper label or empty), all or nothing."""
    dataset = get_object_or_404(selectors.report_datasets(), pk=dataset_id)
    mapping = {
        key[len("map:") :]: str(value)
        for key, value in request.POST.items()
        if key.startswith("map:")
    }
    try:
        changes = services.paper_model_names_set(
            dataset=dataset, mapping=mapping, actor=request.user, request=request
        )
    except ReportError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "; ".join(changes) if changes else "Nothing changed.")
    return redirect(reverse("scoring_paper_tables", args=[dataset.pk]))


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
