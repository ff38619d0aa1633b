"""Researcher pages for scoring runs: start a run, follow its progress, resume it."""

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from kombu.exceptions import OperationalError as BrokerError

from review import access
from review.models import Dataset
from scoring.models import ScoringRun
from scoring.runs import metric_configs
from scoring.runs import scoring as scoring_runs
from scoring.runs.selectors import run_progress, runs_recent

BROKER_DOWN = (
    "The run was saved but its tasks could not be queued: the task broker is unreachable. "
    "Nothing is lost; press Resume once the broker is back."
)


@require_http_methods(["GET", "POST"])
@access.researcher_required
def runs(request: HttpRequest) -> HttpResponse:
    datasets = Dataset.objects.order_by("name")
    statuses = metric_configs.metric_statuses()
    if request.method == "POST":
        raw_dataset = request.POST.get("dataset", "")
        dataset = (
            datasets.filter(pk=int(raw_dataset)).first()
            if raw_dataset.isdigit() and len(raw_dataset) < 19
            else None
        )
        metrics = [m for m in request.POST.getlist("metrics") if m in metric_configs.METRIC_LABELS]
        preset = request.POST.get("preset") or None
        if preset is not None and preset not in metric_configs.PRESETS:
            preset = None
            metrics = []  # an unknown preset is refused, not silently replaced
        if dataset is None or not (metrics or preset):
            messages.error(request, "Choose a dataset and at least one metric or a preset.")
        else:
            try:
                run = scoring_runs.scoring_run_create(
                    dataset=dataset, metrics=metrics, actor=request.user, preset=preset
                )
            except metric_configs.ScoringError as exc:
                messages.error(request, str(exc))
            except BrokerError:
                messages.error(request, BROKER_DOWN)
                latest = ScoringRun.objects.filter(dataset=dataset).order_by("-pk").first()
                if latest is not None:
                    return redirect("scoring_run_detail", run_id=latest.pk)
            else:
                return redirect("scoring_run_detail", run_id=run.pk)
    return render(
        request,
        "scoring/runs/list.html",
        {
            "runs": runs_recent(),
            "datasets": datasets,
            "statuses": statuses,
            "presets": metric_configs.PRESETS.values(),
        },
    )


@require_GET
@access.researcher_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(ScoringRun.objects.select_related("dataset"), pk=run_id)
    return render(
        request,
        "scoring/runs/detail.html",
        {"run": run, "progress": run_progress(run), "configs": list(run.configs.all())},
    )


@require_GET
@access.researcher_required
def run_progress_json(request: HttpRequest, run_id: int) -> JsonResponse:
    run = ScoringRun.objects.filter(pk=run_id).first()
    if run is None:
        raise Http404
    return JsonResponse(run_progress(run).as_dict())


@access.researcher_required
@require_POST
def run_resume(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(ScoringRun, pk=run_id)
    try:
        scoring_runs.scoring_run_resume(run=run)
    except BrokerError:
        messages.error(request, BROKER_DOWN)
    else:
        messages.success(request, "Resumed: only the scores still missing will be computed.")
    return redirect("scoring_run_detail", run_id=run.pk)
