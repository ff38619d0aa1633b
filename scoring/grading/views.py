"""Researcher pages for grading runs: start one, and its detail page (progress and Resume are
the shared run pages': ``scoring.runs.views``)."""

from typing import Any

from django import forms
from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from kombu.exceptions import OperationalError as BrokerError

from review import access
from review.models import Dataset
from scoring.generation.runs import model_choices
from scoring.grading import runs as grading
from scoring.grading.grader import RubricGrader
from scoring.models import GraderVerdict, GradingRun
from scoring.runs.views import BROKER_DOWN, run_detail_render

DEFAULTS = RubricGrader.option_defaults


class GradingRunForm(forms.Form):
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.order_by("name"))
    model = forms.ChoiceField(
        help_text="A model folder on this server (GENERATION_MODEL_DIR) or an endpoint an admin "
        "allowlisted; records are never sent anywhere else."
    )
    record_tokens = forms.IntegerField(
        min_value=64,
        max_value=1 << 20,
        initial=DEFAULTS["record_tokens"],
        help_text="Tokens (the grader's tokenizer) of the instruction with the record, most "
        "recent part kept.",
    )
    max_new_tokens = forms.IntegerField(
        min_value=16, max_value=4096, initial=DEFAULTS["max_new_tokens"]
    )
    retries = forms.IntegerField(
        min_value=0,
        max_value=5,
        initial=DEFAULTS["retries"],
        help_text="Times an endpoint is asked again when its answer does not parse (a local "
        "model, greedy, is not); then the verdict is missing.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        model = self.fields["model"]
        assert isinstance(model, forms.ChoiceField)
        model.choices = [(c.key, c.description) for c in model_choices()]


@require_http_methods(["GET", "POST"])
@access.researcher_required
def grading_runs(request: HttpRequest) -> HttpResponse:
    form = GradingRunForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = grading.grading_run_create(
                dataset=data["dataset"],
                model=data["model"],
                options={k: data[k] for k in ("record_tokens", "max_new_tokens", "retries")},
                actor=request.user,  # type: ignore[arg-type]
            )
        except grading.GradingRunError as exc:
            messages.error(request, str(exc))
        except BrokerError:
            messages.error(request, BROKER_DOWN)
            latest = GradingRun.objects.filter(dataset=data["dataset"]).order_by("-pk").first()
            if latest is not None:
                return redirect("grading_run_detail", run_id=latest.pk)
        else:
            return redirect("grading_run_detail", run_id=run.pk)
    runs = GradingRun.objects.select_related("dataset", "config")[:50]
    return render(request, "scoring/grading/list.html", {"form": form, "runs": runs})


@require_GET
@access.researcher_required
def grading_run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(GradingRun.objects.select_related("dataset", "config"), pk=run_id)
    counts = GraderVerdict.objects.filter(
        config_id=run.config_id, response__instruction__dataset_id=run.dataset_id
    ).aggregate(
        met=Count("id", filter=Q(criteria_met=True)),
        not_met=Count("id", filter=Q(criteria_met=False)),
        missing=Count("id", filter=Q(criteria_met__isnull=True)),
    )
    return run_detail_render(request, run, "scoring/grading/detail.html", {"counts": counts})
