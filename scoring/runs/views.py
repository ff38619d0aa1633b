"""Researcher pages for runs: start a scoring run; follow any run's progress and resume it.

The detail page (``templates/scoring/runs/run_detail.html``), its progress JSON and Resume are
shared by every kind of run (``PAGES``); a kind's own view adds what only it shows (a scoring
run's metric configurations, a generation run's provenance: ``scoring.generation.views``).
"""

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from kombu.exceptions import OperationalError as BrokerError

from medalign_site.errors import navigation_redirect
from review import access
from review.models import Dataset
from scoring.models import ScoringRun
from scoring.models.runs import RunBase
from scoring.runs import machinery, metric_configs
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


@dataclass(frozen=True)
class RunPages:
    """A kind's run pages, as the shared detail page and views name them."""

    title: str  # "Scoring run"
    plural: str
    noun: str  # what its runs produce: "scores"
    list_url: str  # URL names
    detail_url: str
    progress_url: str
    resume_url: str


PAGES = {
    "scoring": RunPages(
        "Scoring run",
        "Scoring runs",
        "scores",
        "scoring_runs",
        "scoring_run_detail",
        "scoring_run_progress",
        "scoring_run_resume",
    ),
    "generation": RunPages(
        "Generation run",
        "Generation runs",
        "responses",
        "generation_runs",
        "generation_run_detail",
        "generation_run_progress",
        "generation_run_resume",
    ),
    "grading": RunPages(
        "Grading run",
        "Grading runs",
        "verdicts",
        "grading_runs",
        "grading_run_detail",
        "grading_run_progress",
        "grading_run_resume",
    ),
}


def run_detail_render(
    request: HttpRequest, run: RunBase, template: str, context: dict[str, Any]
) -> HttpResponse:
    """A run's detail page (``template`` extends ``scoring/runs/run_detail.html``)."""
    kind = machinery.kind_of(run).name
    return render(
        request,
        template,
        {"run": run, "progress": run_progress(run), "pages": PAGES[kind], **context},
    )


@require_GET
@access.researcher_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(ScoringRun.objects.select_related("dataset"), pk=run_id)
    return run_detail_render(
        request, run, "scoring/runs/detail.html", {"configs": list(run.configs.all())}
    )


def _run_detail_url(run_id: int, kind: str = "scoring") -> str:
    return reverse(PAGES[kind].detail_url, kwargs={"run_id": run_id})


@navigation_redirect(_run_detail_url)
@require_GET
@access.researcher_required
def run_progress_json(request: HttpRequest, run_id: int, kind: str = "scoring") -> JsonResponse:
    run = machinery.kind_named(kind).run_model._default_manager.filter(pk=run_id).first()
    if run is None:
        raise Http404
    return JsonResponse(run_progress(run).as_dict())


@access.researcher_required
@require_POST
def run_resume(request: HttpRequest, run_id: int, kind: str = "scoring") -> HttpResponse:
    run_kind = machinery.kind_named(kind)
    run = get_object_or_404(run_kind.run_model, pk=run_id)
    try:
        machinery.run_resume(kind=run_kind, run=run)
    except BrokerError:
        messages.error(request, BROKER_DOWN)
    else:
        messages.success(request, f"Resumed: only the {PAGES[kind].noun} still missing are queued.")
    return redirect(PAGES[kind].detail_url, run_id=run.pk)
