"""Researcher pages for generation runs: start one, and its detail page (progress and Resume
are the shared run pages': ``scoring.runs.views``)."""

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from kombu.exceptions import OperationalError as BrokerError

from review import access
from review.models import Dataset
from scoring.generation import runs as generation
from scoring.generation.names import run_response_names
from scoring.generation.selectors import generation_responses, generation_runs_recent
from scoring.llm.backends import GenerationParams
from scoring.llm.prompts import HELM_TEMPLATE
from scoring.models import GenerationRun
from scoring.runs.views import BROKER_DOWN, run_detail_render


class GenerationRunForm(forms.Form):
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.order_by("name"))
    model = forms.ChoiceField(
        help_text="A model folder on this server (GENERATION_MODEL_DIR) or an endpoint an admin "
        "allowlisted; records are never sent anywhere else."
    )
    context_lengths = forms.CharField(
        initial="2048,32768",
        help_text="Tokens of the model's own tokenizer, comma-separated: one response per length.",
    )
    policy = forms.ChoiceField(
        choices=[
            ("recent", "Most recent tokens of the record (HELM)"),
            ("bm25", "Visits chosen by BM25 against the instruction, in time order (MedAlign)"),
        ],
        initial="recent",
    )
    template = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        initial=HELM_TEMPLATE,
        help_text="HELM's medalign template; {ehr} and {question} are filled in. An edited "
        "template is recorded with its own version (name and sha256); on a dataset that is not "
        "synthetic it runs once an admin has approved it.",
    )
    template_label = forms.SlugField(required=False, help_text="A name for an edited template.")
    label = forms.CharField(
        required=False, max_length=80, help_text="The model's name in responses (default: its own)."
    )
    max_new_tokens = forms.IntegerField(min_value=1, max_value=32768, initial=256)
    temperature = forms.FloatField(min_value=0, max_value=5, initial=0.0)
    top_p = forms.FloatField(min_value=0.01, max_value=1, initial=1.0)
    seed = forms.IntegerField(min_value=0, max_value=2**32 - 1, initial=0)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        model = self.fields["model"]
        assert isinstance(model, forms.ChoiceField)
        model.choices = [(c.key, c.description) for c in generation.model_choices()]

    def clean_context_lengths(self) -> list[int]:
        raw = self.cleaned_data["context_lengths"]
        try:
            return [int(v) for v in raw.replace(" ", "").split(",") if v]
        except ValueError:
            raise forms.ValidationError("whole numbers separated by commas") from None


@require_http_methods(["GET", "POST"])
@access.researcher_required
def generation_runs(request: HttpRequest) -> HttpResponse:
    form = GenerationRunForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = generation.generation_run_create(
                dataset=data["dataset"],
                model=data["model"],
                context_lengths=data["context_lengths"],
                policy=data["policy"],
                template_text=data["template"].replace("\r\n", "\n"),
                template_name=data["template_label"],
                params=GenerationParams(
                    max_new_tokens=data["max_new_tokens"],
                    temperature=data["temperature"],
                    top_p=data["top_p"],
                    seed=data["seed"],
                ),
                label=data["label"],
                actor=request.user,  # type: ignore[arg-type]
            )
        except (generation.GenerationRunError, ValueError) as exc:
            messages.error(request, str(exc))
        except BrokerError:
            messages.error(request, BROKER_DOWN)
            latest = GenerationRun.objects.filter(dataset=data["dataset"]).order_by("-pk").first()
            if latest is not None:
                return redirect("generation_run_detail", run_id=latest.pk)
        else:
            return redirect("generation_run_detail", run_id=run.pk)
    return render(
        request,
        "scoring/generation/list.html",
        {"form": form, "runs": generation_runs_recent()},
    )


@require_GET
@access.researcher_required
def generation_run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(GenerationRun.objects.select_related("dataset"), pk=run_id)
    return run_detail_render(
        request,
        run,
        "scoring/generation/detail.html",
        {
            "responses": generation_responses(run),
            "response_names": run_response_names(run.label, run.context_lengths),
            # Adding responses to a round is the admin's step (the dataset's studies page).
            "can_add_to_round": request.access.is_admin,  # type: ignore[attr-defined]
        },
    )
