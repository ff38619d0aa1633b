"""Rubric views: the clinician's rubric work (write, review, grade) and the admin's page.

Writing and reviewing are plain forms (a rubric is a few criteria, saved on a button); grading
is the review page's autosave and idempotent submit (``review.services.grading``). Every page
that shows the record or responses is audited like the review page.
"""

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from medalign_site.errors import json_endpoint
from medalign_site.uploads import upload_limit
from review import access
from review.forms.rubrics import (
    BLANK_ROWS,
    AuthorAssignForm,
    GradingAssignForm,
    ReviewerForm,
    RubricUploadForm,
    criteria_from_post,
)
from review.models import AuditEvent, CriterionGrading, Dataset, Instruction, Rubric, User
from review.selectors import rubrics as selectors
from review.services import excerpts as excerpt_services
from review.services import grading as grading_services
from review.services import reviews as review_services
from review.services import rubrics as services
from review.services.audit import audit_record_many
from review.services.rubric_jsonl import rubrics_export, rubrics_import
from review.views.clinician import _json_body


def _user(request: HttpRequest) -> User:
    # The decorators let only signed-in, approved users through.
    assert isinstance(request.user, User)
    return request.user


# --- the clinician's rubric work --------------------------------------------------------------
@require_GET
@access.clinician_required
def rubric_work(request: HttpRequest) -> HttpResponse:
    work = selectors.clinician_rubric_work(_user(request))
    return render(request, "review/clinician/rubric_work.html", {"work": work})


def _audit_page(request: HttpRequest, obj: object, instruction: Instruction) -> None:
    audit_record_many(
        actions=[AuditEvent.Action.INSTRUCTION_VIEWED, AuditEvent.Action.RECORD_VIEWED],
        request=request,
        obj=obj,
        person_id=instruction.person_id,
        instruction_id=instruction.instruction_id,
    )


def _rubric_page(request: HttpRequest, rubric: Rubric, *, mode: str) -> HttpResponse:
    instruction = rubric.instruction
    patient = instruction.patient
    excerpt_html = excerpt_services.record_excerpt_html(instruction, patient) if patient else ""
    _audit_page(request, rubric, instruction)
    editable = (
        rubric.status in services.AUTHOR_EDITABLE
        if mode == "write"
        else rubric.status == Rubric.Status.IN_REVIEW
    )
    return render(
        request,
        "review/clinician/rubric_edit.html",
        {
            "mode": mode,
            "rubric": rubric,
            "instruction": instruction,
            "patient": patient,
            "excerpt_html": excerpt_html,
            # The author writes with the reference answer at hand, whatever the ranking's
            # blinding: a rubric says what a good answer must contain.
            "references": selectors.instruction_references(instruction.pk),
            "criteria": selectors.rubric_criteria(rubric),
            "blank_rows": range(BLANK_ROWS),
            "editable": editable,
        },
    )


def _save_posted(request: HttpRequest, rubric: Rubric) -> bool:
    """Save the posted criteria; False (with the message shown) if they were refused."""
    try:
        services.rubric_save_criteria(
            rubric=rubric,
            actor=_user(request),
            criteria=criteria_from_post(request.POST),
            request=request,
        )
    except services.RubricError as exc:
        messages.error(request, f"Not saved: {exc.message}.")
        return False
    return True


@require_http_methods(["GET", "POST"])
@access.clinician_required
def rubric_write(request: HttpRequest, rubric_id: int) -> HttpResponse:
    rubric = access.rubric_get_for_author(_user(request), rubric_id=rubric_id)
    if request.method == "POST":
        action = request.POST.get("action", "save")
        if _save_posted(request, rubric):
            try:
                if action == "submit":
                    services.rubric_submit(rubric=rubric, actor=_user(request), request=request)
                    messages.success(request, "Sent for review by a second clinician.")
                    return redirect("rubric_work")
                messages.success(request, "Criteria saved.")
            except services.RubricError as exc:
                messages.error(request, f"Not sent: {exc.message}.")
        return redirect("rubric_write", rubric_id=rubric.pk)
    return _rubric_page(request, rubric, mode="write")


@require_http_methods(["GET", "POST"])
@access.clinician_required
def rubric_review(request: HttpRequest, rubric_id: int) -> HttpResponse:
    rubric = access.rubric_get_for_reviewer(_user(request), rubric_id=rubric_id)
    if request.method == "POST":
        action = request.POST.get("action", "save")
        note = request.POST.get("note", "")
        try:
            if action == "send_back":
                services.rubric_send_back(
                    rubric=rubric, actor=_user(request), note=note, request=request
                )
                messages.success(request, "Sent back to its author with your note.")
                return redirect("rubric_work")
            if request.POST.get("edited") == "1" and not _save_posted(request, rubric):
                return redirect("rubric_review", rubric_id=rubric.pk)
            if action == "accept":
                services.rubric_accept(
                    rubric=rubric, actor=_user(request), note=note, request=request
                )
                messages.success(request, "Accepted: clinicians can now grade with it.")
                return redirect("rubric_work")
            messages.success(request, "Your edits are saved.")
        except services.RubricError as exc:
            messages.error(request, f"Not done: {exc.message}.")
        return redirect("rubric_review", rubric_id=rubric.pk)
    return _rubric_page(request, rubric, mode="review")


# --- grading ------------------------------------------------------------------------------------
@require_GET
@access.clinician_required
def grading_page(request: HttpRequest, grading_id: int) -> HttpResponse:
    grading = access.grading_get_for_clinician(_user(request), grading_id=grading_id)
    grading = grading_services.grading_get_or_start(grading)
    instruction = grading.instruction
    page = selectors.grading_page_data(grading)
    patient = instruction.patient
    excerpt_html = excerpt_services.record_excerpt_html(instruction, patient) if patient else ""
    _audit_page(request, grading, instruction)
    data = {
        "grading": grading.pk,
        "owner": access.page_owner(_user(request)),
        "editable": grading.is_editable,
        "values": page.values,
        "labels": {r.handle: r.label for r in page.responses},
        "criteria": [{"key": f"c{c.pk}", "points": c.points} for c in page.criteria],
        "urls": {
            "save": reverse("grading_save", args=[grading.pk]),
            "submit": reverse("grading_submit", args=[grading.pk]),
            "login": reverse("account_login") + "?next=" + reverse("session_resumed"),
            "work": reverse("rubric_work"),
        },
    }
    return render(
        request,
        "review/clinician/grading.html",
        {
            "grading": grading,
            "instruction": instruction,
            "patient": patient,
            "excerpt_html": excerpt_html,
            "page": page,
            "data": data,
        },
    )


@json_endpoint("POST")
@require_POST
@access.clinician_required
def grading_save(request: HttpRequest, grading_id: int) -> JsonResponse:
    access.grading_get_for_clinician(_user(request), grading_id=grading_id)
    try:
        state = grading_services.grading_save_draft(
            grading_id=grading_id,
            clinician=_user(request),
            payload=_json_body(request),
            request=request,
        )
    except review_services.ReviewError as exc:
        return JsonResponse(exc.as_dict(), status=exc.status)
    return JsonResponse(state)


@json_endpoint("POST")
@require_POST
@access.clinician_required
def grading_submit(request: HttpRequest, grading_id: int) -> JsonResponse:
    access.grading_get_for_clinician(_user(request), grading_id=grading_id)
    try:
        state = grading_services.grading_submit(
            grading_id=grading_id,
            clinician=_user(request),
            payload=_json_body(request),
            request=request,
        )
    except CriterionGrading.DoesNotExist:
        raise Http404 from None
    except review_services.ReviewError as exc:
        return JsonResponse(exc.as_dict(), status=exc.status)
    return JsonResponse(state)


# --- admins -------------------------------------------------------------------------------------
def _an_admin(request: HttpRequest) -> bool:
    """Who may send this page a rubric file: an admin, in a session past the second factor
    (anyone else's body is refused unread past Django's limit for form fields)."""
    user = request.user
    return bool(
        user.is_authenticated
        and access.user_access(user).is_admin
        and access.second_factor_passed(request)
    )


@require_http_methods(["GET", "POST"])
@upload_limit("RUBRIC_UPLOAD_MAX_BYTES", allowed=_an_admin)
@access.admin_required
def admin_rubrics(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset, pk=dataset_id)
    action = request.POST.get("action", "") if request.method == "POST" else ""
    author_form = AuthorAssignForm(request.POST if action == "author" else None)
    reviewer_form = ReviewerForm(
        request.POST if action == "reviewer" else None, dataset_id=dataset.pk
    )
    grading_form = GradingAssignForm(
        request.POST if action == "grading" else None, dataset_id=dataset.pk
    )
    upload_form = RubricUploadForm(
        request.POST if action == "upload" else None, request.FILES if action == "upload" else None
    )
    try:
        if action == "author" and author_form.is_valid():
            data = author_form.cleaned_data
            instruction = dataset.instructions.filter(instruction_id=data["instruction_id"]).first()
            if instruction is None:
                author_form.add_error("instruction_id", "No such instruction in this dataset.")
            else:
                rubric = services.rubric_assign(
                    instruction=instruction,
                    author=data["author"],
                    reviewer=data["reviewer"],
                    actor=_user(request),
                    request=request,
                )
                messages.success(request, f"Asked {data['author'].email} to write {rubric}.")
                return redirect("admin_rubrics", dataset_id=dataset.pk)
        elif action == "reviewer" and reviewer_form.is_valid():
            data = reviewer_form.cleaned_data
            services.rubric_set_reviewer(
                rubric=data["rubric"],
                reviewer=data["reviewer"],
                actor=_user(request),
                request=request,
            )
            messages.success(request, f"{data['reviewer'].email} reviews {data['rubric']}.")
            return redirect("admin_rubrics", dataset_id=dataset.pk)
        elif action == "grading" and grading_form.is_valid():
            data = grading_form.cleaned_data
            try:
                created = grading_services.gradings_assign(
                    rubric=data["rubric"],
                    study=data["study"],
                    clinicians=list(data["clinicians"]),
                    actor=_user(request),
                    request=request,
                )
            except services.RubricError as exc:
                messages.error(request, f"Nothing assigned: {exc}.")
                return redirect("admin_rubrics", dataset_id=dataset.pk)
            messages.success(request, f"Created {len(created)} grading assignment(s).")
            return redirect("admin_rubrics", dataset_id=dataset.pk)
        elif action == "upload" and upload_form.is_valid():
            upload = upload_form.cleaned_data["file"]
            lines = (raw.decode("utf-8", errors="replace") for raw in upload)
            result = rubrics_import(
                dataset=dataset,
                lines=lines,
                source_name=upload.name or "upload.jsonl",
                actor=_user(request),
                request=request,
            )
            messages.success(
                request,
                f"Imported {len(result.created)} rubric(s), in review; "
                f"skipped {len(result.skipped)}.",
            )
            return redirect("admin_rubrics", dataset_id=dataset.pk)
    except services.RubricError as exc:
        messages.error(request, f"Not done: {exc.message}.")
    return render(
        request,
        "review/admin/rubrics.html",
        {
            "dataset": dataset,
            "rubrics": selectors.rubrics_of(dataset),
            "gradings": selectors.gradings_of(dataset),
            "author_form": author_form,
            "reviewer_form": reviewer_form,
            "grading_form": grading_form,
            "upload_form": upload_form,
        },
    )


@require_GET
@access.admin_required
def admin_rubrics_export(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset, pk=dataset_id)
    lines = rubrics_export(
        dataset=dataset,
        actor=_user(request),
        all_versions=request.GET.get("all") == "1",
        request=request,
    )
    response = StreamingHttpResponse(lines, content_type="application/jsonl; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{dataset.name}-rubrics.jsonl"'
    return response  # type: ignore[return-value]  # streamed: rubrics are written as read
