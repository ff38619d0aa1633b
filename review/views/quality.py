"""The admin's quality page: each clinician's figures with their evidence, gold and
calibration items, calibrating new clinicians, exclusions with their reasons, and sending
disagreements to adjudication. Admins only; every change goes through a service and is audited.
"""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from review import access
from review.forms.quality import (
    AdjudicateForm,
    CalibrateForm,
    ExcludeForm,
    PolicyForm,
    ReadmitForm,
    ReleaseGoldForm,
    SeniorGoldForm,
)
from review.models import (
    AuditEvent,
    ClinicianExclusion,
    Dataset,
    GoldItem,
    Instruction,
    Study,
    User,
)
from review.selectors.quality import (
    adjudicator_candidates,
    clinicians_to_calibrate,
    gold_item_for,
    senior_candidates,
    study_quality,
)
from review.selectors.studies import (
    studies_of,
    study_label,
    study_latest_reviewed,
    study_response_rows,
)
from review.services import adjudications as adjudication_services
from review.services import quality as services
from review.services.audit import audit_record


def _user(request: HttpRequest) -> User:
    """The signed-in user (``access.*_required`` let no one else through)."""
    assert isinstance(request.user, User)
    return request.user


def _back(study: Study) -> str:
    return reverse("admin_quality", args=[study.dataset_id]) + f"?round={study.round}"


@require_GET
@access.admin_required
def quality_page(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset, pk=dataset_id)
    rounds = list(studies_of(dataset))
    raw = request.GET.get("round", "")
    study = next((s for s in rounds if raw.isdigit() and s.round == int(raw)), None)
    study = study or study_latest_reviewed(dataset)
    code = request.GET.get("reference", "").strip()[:64]
    if study is not None and code:
        found = Instruction.objects.filter(dataset=dataset, instruction_id=code).first()
        if found is not None:
            return redirect("admin_quality_gold_item", study_id=study.pk, instruction_id=found.pk)
        messages.error(request, f"{dataset.name} has no instruction {code!r}.")
    if study is None:
        return render(request, "review/admin/quality.html", {"dataset": dataset, "data": None})
    data = study_quality(study)
    policy = data.policy
    return render(
        request,
        "review/admin/quality.html",
        {
            "dataset": dataset,
            "study": study,
            "study_label": study_label(study.round, study.name),
            "rounds": [(s.round, study_label(s.round, s.name)) for s in rounds],
            "data": data,
            "policy_form": PolicyForm(
                initial={
                    "gold_percent": round(100 * policy.gold_rate, 1),
                    "adjudication_tau": policy.adjudication_tau,
                    "drift_window": policy.drift_window,
                }
            ),
            "release_form": ReleaseGoldForm(),
            "calibrate_form": CalibrateForm(clinicians=clinicians_to_calibrate(study)),
            "adjudicate_form": AdjudicateForm(
                instruction_ids=[d.instruction_id for d in data.disagreements],
                adjudicators=data.adjudicators,
            ),
        },
    )


@access.admin_required
@require_POST
def quality_policy(request: HttpRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study, pk=study_id)
    form = PolicyForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The settings were not changed: " + _errors(form))
        return redirect(_back(study))
    try:
        services.quality_policy_set(
            study=study,
            gold_rate=form.cleaned_data["gold_percent"] / 100.0,
            adjudication_tau=form.cleaned_data["adjudication_tau"],
            drift_window=form.cleaned_data["drift_window"],
            actor=_user(request),
            request=request,
        )
    except services.QualityError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Quality settings saved.")
    return redirect(_back(study))


@access.admin_required
@require_POST
def gold_from_release(request: HttpRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study, pk=study_id)
    form = ReleaseGoldForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Nothing was changed: " + _errors(form))
        return redirect(_back(study))
    instructions = Instruction.objects.filter(
        dataset_id=study.dataset_id, responses__studies__study=study
    ).distinct()
    ids = form.ids()
    if ids:
        instructions = instructions.filter(instruction_id__in=ids)
    result = services.gold_items_from_release(
        study=study,
        instructions=instructions.order_by("instruction_id"),
        use=form.cleaned_data["use"],
        actor=_user(request),
        request=request,
    )
    messages.success(
        request,
        f"{result.created} items from the release's labels; {result.without_labels} without "
        f"the release's verdict on every response; {result.already} already items.",
    )
    return redirect(_back(study))


@require_http_methods(["GET", "POST"])
@access.admin_required
def gold_item(request: HttpRequest, study_id: int, instruction_id: int) -> HttpResponse:
    """A senior clinician's reference for one instruction (shows its question and responses:
    audited as an instruction view)."""
    study = get_object_or_404(Study, pk=study_id)
    instruction = get_object_or_404(Instruction, pk=instruction_id, dataset_id=study.dataset_id)
    rows = sorted(study_response_rows(study_id=study.pk, instruction_id=instruction.pk))
    seniors = senior_candidates()
    item = gold_item_for(study, instruction.pk)
    initial: dict[str, object] = {}
    if item is not None:
        initial = {"use": item.use, "reason": item.reason, "senior": item.senior_id}
        for j in item.judgements.all():
            initial[f"rank_{j.response_id}"] = j.rank
            initial[f"correct_{j.response_id}"] = (
                "" if j.is_correct is None else "true" if j.is_correct else "false"
            )
    form = SeniorGoldForm(
        request.POST or None,
        initial=initial,
        response_ids=[row[0] for row in rows],
        seniors=seniors,
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.gold_item_set(
                study=study,
                instruction=instruction,
                use=form.cleaned_data["use"],
                source=GoldItem.Source.SENIOR,
                judgements=form.judgements(),
                reason=form.cleaned_data["reason"],
                senior=form.cleaned_data["senior"],
                actor=_user(request),
                request=request,
            )
        except services.QualityError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"#{instruction.instruction_id} has its reference.")
            return redirect(_back(study))
    audit_record(
        action=AuditEvent.Action.INSTRUCTION_VIEWED,
        request=request,
        obj=instruction,
        person_id=instruction.person_id,
        instruction_id=instruction.instruction_id,
        details={"view": "gold reference"},
    )
    responses = [
        {
            "number": n,
            "text": text,
            "rank": form[f"rank_{rid}"],
            "correct": form[f"correct_{rid}"],
        }
        for n, (rid, text, _model) in enumerate(rows, start=1)
    ]
    return render(
        request,
        "review/admin/gold_item.html",
        {
            "study": study,
            "study_label": study_label(study.round, study.name),
            "instruction": instruction,
            "item": item,
            "form": form,
            "responses": responses,
        },
    )


@access.admin_required
@require_POST
def gold_retire(request: HttpRequest, item_id: int) -> HttpResponse:
    item = get_object_or_404(GoldItem.objects.select_related("study", "instruction"), pk=item_id)
    services.gold_item_retire(item=item, actor=_user(request), request=request)
    messages.success(request, f"#{item.instruction.instruction_id} gets no new assignments.")
    return redirect(_back(item.study))


@access.admin_required
@require_POST
def calibrate(request: HttpRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study, pk=study_id)
    form = CalibrateForm(request.POST, clinicians=clinicians_to_calibrate(study))
    if not form.is_valid():
        messages.error(request, "Choose a clinician who has not calibrated in this round yet.")
        return redirect(_back(study))
    clinician = form.cleaned_data["clinician"]
    try:
        n = services.calibration_assign(
            study=study, clinician=clinician, actor=_user(request), request=request
        )
    except services.QualityError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"{clinician.email} has {n} calibration items first in their queue."
        )
    return redirect(_back(study))


@access.admin_required
@require_POST
def exclude(request: HttpRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study, pk=study_id)
    form = ExcludeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Say why the clinician's reviews are left out: reports show it.")
        return redirect(_back(study))
    clinician = get_object_or_404(User, pk=form.cleaned_data["clinician"])
    try:
        services.clinician_exclude(
            study=study,
            clinician=clinician,
            reason=form.cleaned_data["reason"],
            actor=_user(request),
            request=request,
        )
    except services.QualityError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"{clinician.email}'s reviews of this round are left out of its reports, with "
            "your reason; the reports say so.",
        )
    return redirect(_back(study))


@access.admin_required
@require_POST
def readmit(request: HttpRequest, exclusion_id: int) -> HttpResponse:
    exclusion = get_object_or_404(
        ClinicianExclusion.objects.select_related("study", "clinician"), pk=exclusion_id
    )
    form = ReadmitForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Say why the reviews come back into reports.")
        return redirect(_back(exclusion.study))
    try:
        services.clinician_readmit(
            exclusion=exclusion,
            reason=form.cleaned_data["reason"],
            actor=_user(request),
            request=request,
        )
    except services.QualityError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{exclusion.clinician.email}'s reviews are back in reports.")
    return redirect(_back(exclusion.study))


@access.admin_required
@require_POST
def adjudicate(request: HttpRequest, study_id: int) -> HttpResponse:
    study = get_object_or_404(Study, pk=study_id)
    form = AdjudicateForm(
        request.POST,
        instruction_ids=[int(i) for i in request.POST.getlist("instructions") if i.isdigit()],
        adjudicators=adjudicator_candidates(),
    )
    if not form.is_valid():
        messages.error(request, "Choose the disagreements and an adjudicator.")
        return redirect(_back(study))
    try:
        plan = adjudication_services.adjudications_create(
            study=study,
            instruction_ids=form.cleaned_data["instructions"],
            adjudicator=form.cleaned_data["adjudicator"],
            actor=_user(request),
            request=request,
        )
    except adjudication_services.AdjudicationError as exc:
        messages.error(request, str(exc))
        return redirect(_back(study))
    parts = [f"{len(plan.created)} sent to adjudication"]
    if plan.own:
        parts.append(
            f"not {', '.join('#' + c for c in plan.own)}: the adjudicator reviewed "
            f"{'it' if len(plan.own) == 1 else 'them'}"
        )
    if plan.already:
        parts.append(f"{len(plan.already)} already adjudicated or assigned")
    if plan.agreed:
        parts.append(f"{len(plan.agreed)} no longer disagree")
    messages.success(request, "; ".join(parts) + ".")
    return redirect(_back(study))


def _errors(form: object) -> str:
    errors = getattr(form, "errors", {})
    return "; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items())
