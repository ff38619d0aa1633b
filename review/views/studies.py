"""Admins' study pages: each dataset's studies (rounds) and their response sets, the
candidates a generation run or an import left outside every study, and the audited steps
that change them (``review.services.studies``)."""

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from review import access
from review.models import Dataset, ModelResponse, Study, User
from review.selectors.adaptive import (
    DEFAULTS,
    FIXED_LAMBDA_BELOW,
    adaptive_state,
    predictor_choices,
)
from review.selectors.assignments import clinicians_approved
from review.selectors.studies import dataset_model_names, round_name_hits, studies_overview
from review.services import adaptive as adaptive_services
from review.services import studies as services


class ModelForm(forms.Form):
    model_name = forms.CharField(max_length=100)


class RoundForm(forms.Form):
    name = forms.CharField(max_length=120)
    copy_from = forms.IntegerField(required=False)


class AdaptiveForm(forms.Form):
    predictor = forms.IntegerField(required=False)
    overlap = forms.IntegerField(min_value=1, max_value=20, initial=DEFAULTS["overlap"])
    min_probability = forms.FloatField(min_value=0.001, max_value=1.0)
    budget = forms.FloatField(min_value=0.001, max_value=1.0)
    waves = forms.IntegerField(min_value=1, max_value=50)
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1)


@require_GET
@access.admin_required
def studies_page(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset, pk=dataset_id)
    rows, groups = studies_overview(dataset)
    for row in rows:
        # Adaptive studies: the next wave and the stopping rule; uniform ones not yet
        # assigned: the predictors an adaptive design could use.
        if row.study.assignment_mode == Study.AssignmentMode.ADAPTIVE:
            row.adaptive = adaptive_state(row.study)
        elif not row.assignments:
            row.predictors = predictor_choices(row.study)
    return render(
        request,
        "review/admin/studies.html",
        {
            "dataset": dataset,
            "rows": rows,
            "groups": groups,
            "defaults": DEFAULTS,
            "active_tune_min": FIXED_LAMBDA_BELOW,
        },
    )


def _admin(request: HttpRequest) -> User:
    # ``access.admin_required`` let only a signed-in admin through.
    assert isinstance(request.user, User)
    return request.user


def _back(dataset_id: int) -> HttpResponse:
    return redirect(reverse("admin_studies", args=[dataset_id]))


def _model_name(request: HttpRequest) -> str | None:
    form = ModelForm(request.POST)
    return form.cleaned_data["model_name"] if form.is_valid() else None


@access.admin_required
@require_POST
def study_add_model(request: HttpRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study.objects.select_related("dataset"), pk=study_id)
    name = _model_name(request)
    responses = list(
        ModelResponse.objects.filter(
            instruction__dataset=study.dataset, model_name=name
        ).select_related("instruction")
    )
    if not name or not responses:
        messages.error(request, "Choose a model of this dataset.")
        return _back(study.dataset_id)
    try:
        change = services.study_add_responses(
            study=study,
            responses=responses,
            source=f"model {name}",
            actor=_admin(request),
            request=request,
        )
    except services.StudyError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Added {change.added} responses of {name} to {study.name} "
            f"({change.already} were already in it).",
        )
    return _back(study.dataset_id)


@access.admin_required
@require_POST
def study_remove_model(request: HttpRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study.objects.select_related("dataset"), pk=study_id)
    name = _model_name(request)
    if not name:
        messages.error(request, "Choose a model of this study.")
        return _back(study.dataset_id)
    try:
        change = services.study_remove_model(
            study=study, model_name=name, actor=_admin(request), request=request
        )
    except services.StudyError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Took {change.removed} responses of {name} out of {study.name}.")
    return _back(study.dataset_id)


@access.admin_required
@require_POST
def model_retire(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset, pk=dataset_id)
    name = _model_name(request)
    candidates = ModelResponse.objects.filter(
        instruction__dataset=dataset, model_name=name, studies__isnull=True
    )
    try:
        n = services.responses_retire(responses=candidates, actor=_admin(request), request=request)
    except services.StudyError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Retired {n} candidate responses of {name}; scores kept.")
    return _back(dataset.pk)


@access.admin_required
@require_POST
def study_new_round(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset, pk=dataset_id)
    form = RoundForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Name the new round.")
        return _back(dataset.pk)
    source = None
    if form.cleaned_data["copy_from"]:
        source = Study.objects.filter(pk=form.cleaned_data["copy_from"], dataset=dataset).first()
    try:
        study = services.study_create(
            dataset=dataset,
            name=form.cleaned_data["name"],
            actor=_admin(request),
            copy_responses_from=source,
            request=request,
        )
    except services.StudyError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Created {study.name} (round {study.round}). Assign clinicians to it: its "
            "assignments are its own.",
        )
        hits = round_name_hits(study.name, dataset_model_names(dataset))
        if hits:
            # Clinicians never see it (they see the number alone), but researchers, exports
            # and the audit log do, and a name that says which model is new travels.
            messages.warning(
                request,
                f"The name names a model ({', '.join(hits)}): clinicians see “Round "
                f"{study.round}” only, never the name, but reports, exports and the audit "
                "log show it. Prefer a name that says what changed without naming a model.",
            )
    return _back(dataset.pk)


@access.admin_required
@require_POST
def study_adaptive_design(request: HttpRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study.objects.select_related("dataset"), pk=study_id)
    form = AdaptiveForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Check the adaptive design's parameters.")
        return _back(study.dataset_id)
    data = form.cleaned_data
    choices = dict(predictor_choices(study))
    if data["predictor"] is not None and data["predictor"] not in choices:
        messages.error(request, "Choose a metric with scores on this study's responses.")
        return _back(study.dataset_id)
    try:
        adaptive_services.study_set_adaptive(
            study=study,
            actor=_admin(request),
            predictor_config_id=data["predictor"],
            predictor=choices.get(data["predictor"], "") if data["predictor"] else "",
            overlap=data["overlap"],
            min_probability=data["min_probability"],
            budget=data["budget"],
            waves=data["waves"],
            seed=data["seed"],
            request=request,
        )
    except services.StudyError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{study.name} is now assigned adaptively.")
    return _back(study.dataset_id)


@access.admin_required
@require_POST
def study_adaptive_wave(request: HttpRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study.objects.select_related("dataset"), pk=study_id)
    try:
        result, _ = adaptive_services.adaptive_assign_wave(
            study=study, clinicians=clinicians_approved(), actor=_admin(request), request=request
        )
    except services.StudyError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Wave {result.wave}: {result.drawn} of {result.walked} instructions drawn "
            f"({result.expected:.1f} expected); {result.assignments.created} assignments created.",
        )
    return _back(study.dataset_id)
