"""Clinician views: queue, review page, record endpoints, autosave and submit; bulk assignment.

Blinding: responses reach the browser as per-review random handles and neutral labels, never as
database ids or model names (review.selectors.reviews masks text that names a model). Every
read of record or response text is audited. The JSON endpoints answer JSON whatever happens
(401 when the session ended, 403 when access lapsed: medalign_site.errors), so the page can
keep its unsaved edits and say what to do.
"""

import json
from collections.abc import Iterable
from datetime import date
from typing import Any

from django.contrib import messages
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from medalign_site.errors import json_endpoint
from review import access
from review.forms.clinician import AssignForm
from review.models import (
    Assignment,
    AuditEvent,
    Dataset,
    GoldItem,
    Instruction,
    Patient,
    Review,
    Study,
    User,
)
from review.selectors import records as record_selectors
from review.selectors.assignments import instructions_for_assignment
from review.selectors.quality import (
    CalibrationSummary,
    calibration_feedback,
    calibration_summaries,
    gold_items_available,
)
from review.selectors.records import Cursor
from review.selectors.reviews import (
    QUEUE_STATUSES,
    clinician_has_assignments,
    clinician_next_instruction,
    clinician_queue,
    clinician_reopen_reason,
    instruction_responses,
    review_page_data,
)
from review.selectors.studies import study_current, study_label, study_names
from review.services import excerpts as excerpt_services
from review.services import reviews as review_services
from review.services.assignments import AssignmentError, assignments_create, assignments_plan
from review.services.audit import audit_record
from review.views.page_data import record_urls, response_data
from scoring.reports.study_design import study_design


# --- queue ------------------------------------------------------------------------------------
@require_GET
@access.clinician_required
def queue(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", "")
    status = status if status in QUEUE_STATUSES else ""
    category = request.GET.get("category", "")[:100]
    if not category.isprintable():
        category = ""  # a NUL byte would reach the database (a 500 on PostgreSQL)
    data = clinician_queue(request.user, status=status, category=category)
    return render(
        request,
        "review/clinician/queue.html",
        {"queue": data, "status": status, "category": category, "statuses": QUEUE_STATUSES},
    )


@require_GET
@access.clinician_required
def next_review(request: HttpRequest) -> HttpResponse:
    try:
        after = int(request.GET["after"]) if request.GET.get("after") else None
    except ValueError:
        after = None
    found = clinician_next_instruction(request.user, after_assignment=after)
    if found is None:
        # Two different situations: "all done" must not be claimed when nothing was assigned.
        if clinician_has_assignments(request.user):
            messages.success(request, "Nothing left to review: every assignment is submitted.")
        else:
            messages.info(
                request,
                "Nothing is assigned to you yet: an admin will assign instructions to review.",
            )
        return redirect("clinician_queue")
    instruction_pk, study_id = found
    url = reverse("clinician_review", args=[instruction_pk])
    return redirect(url if study_id is None else f"{url}?study={study_id}")


# --- the review page ----------------------------------------------------------------------------
@require_GET
@access.clinician_required
def review_page(request: HttpRequest, instruction_id: int) -> HttpResponse:
    assignment = access.assignment_get_for_instruction(
        request.user, instruction_id=instruction_id, study_id=_study_param(request)
    )
    instruction = assignment.instruction
    try:
        review_services.review_check_allowed(request.user)
    except review_services.ReviewForbidden as exc:
        return render(
            request,
            "review/clinician/review_forbidden.html",
            {"message": exc.message},
            status=403,
        )
    responses = instruction_responses(study_id=assignment.study_id, instruction_id=instruction.pk)
    # Researcher, admin or staff access shows which model wrote each response, or the order
    # this review shows them in: the review is flagged and the page says so.
    unblinding = access.unblinding_roles(request.user)
    could_unblind = bool(unblinding)
    review = review_services.review_open(
        assignment=assignment,
        response_ids=[row[0] for row in responses],
        could_unblind=could_unblind,
        request=request,
    )
    if set(review.shown_order) != {row[0] for row in responses}:
        # The set was read again under the study's lock when the review started (PostgreSQL):
        # show what the review froze.
        responses = instruction_responses(
            study_id=assignment.study_id, instruction_id=instruction.pk
        )
    page = review_page_data(
        review,
        dataset_id=instruction.dataset_id,
        show_references=instruction.dataset.show_references_to_clinicians,
        responses=responses,
    )
    patient = instruction.patient
    excerpt_html = excerpt_services.record_excerpt_html(instruction, patient) if patient else ""
    # Calibration is open (the clinician knows it, and sees the reference once submitted);
    # a gold item is blind, so nothing below depends on whether the assignment is one.
    calibration = assignment.purpose == Assignment.Purpose.CALIBRATION
    # Data for review.js: handles, labels and the current values. Nothing here names a model
    # or carries a database id of a response.
    data = {
        "review": review.pk,
        # Keys the tab's unsent edits (sessionStorage), so another account signed in later in
        # the same tab never sends them. Not the user id: nothing on the page may identify the
        # clinician's place in any ordering.
        "owner": access.page_owner(request.user),
        "status": review.status,
        "editable": review.is_editable,
        # A calibration page reloads once submitted, to show the reference beside the review.
        "calibration": calibration,
        "cannot_assess": page.cannot_assess,
        "cannot_assess_note": page.cannot_assess_note,
        "responses": response_data(page.responses),
        "urls": record_urls(instruction)
        | {
            "save": reverse("review_save", args=[review.pk]),
            "submit": reverse("review_submit", args=[review.pk]),
            "next": reverse("clinician_next") + f"?after={assignment.pk}",
            "login": reverse("account_login") + "?next=" + reverse("session_resumed"),
            "access": reverse("application_status"),
        },
        # The page refuses text over these with a message, and never cuts it.
        "limits": {
            "comment": review_services.MAX_COMMENT_CHARS,
            "cannot_assess_note": review_services.MAX_NOTE_CHARS,
        },
    }
    response = render(
        request,
        "review/clinician/review.html",
        {
            "could_unblind": could_unblind,
            "unblinding_roles": unblinding,
            "assignment": assignment,
            "instruction": instruction,
            "patient": patient,
            "review": review,
            # As the clinician reads it: a model it names is masked (``review.reopen_reason``
            # is what the admin typed).
            "reopen_reason": clinician_reopen_reason(review.reopen_reason, instruction.dataset_id),
            "page": page,
            "excerpt_html": excerpt_html,
            "data": data,
            "calibration": calibration,
            "feedback": calibration_feedback(assignment, review) if calibration else None,
        },
    )
    return response


def _study_param(request: HttpRequest) -> int | None:
    """``?study=<id>``: which round's assignment, for a clinician asked in several."""
    raw = request.GET.get("study", "")
    return int(raw) if raw.isdigit() and len(raw) < 19 else None


@require_GET
@access.record_reader_required
def session_resumed(request: HttpRequest) -> HttpResponse:
    """Where the sign-in opened from a review page lands: it tells that page to send its edits
    (BroadcastChannel) and closes itself."""
    return render(request, "review/clinician/session_resumed.html")


# --- record endpoints: HTML fragments in JSON, paged ------------------------------------------
def _record_for(request: HttpRequest, instruction_id: int) -> tuple[Instruction, Patient]:
    instruction = access.instruction_get_for_clinician(request.user, instruction_id=instruction_id)
    if instruction.patient is None:
        raise Http404
    return instruction, instruction.patient


def _audit_record_read(
    request: HttpRequest, instruction: Instruction, patient: Patient, details: dict[str, Any]
) -> None:
    audit_record(
        action=AuditEvent.Action.RECORD_VIEWED,
        request=request,
        obj=patient,
        person_id=patient.person_id,
        instruction_id=instruction.instruction_id,
        details=details,
    )


def _bad_request(message: str) -> JsonResponse:
    return JsonResponse({"error": "invalid", "message": message}, status=400)


def _cursor(request: HttpRequest) -> Cursor | None:
    """The page cursor, or the end of the day to jump to; ValueError if malformed."""
    raw_day = request.GET.get("day", "")
    if raw_day and not request.GET.get("cursor"):
        return Cursor.end_of_day(date.fromisoformat(raw_day[:10]))
    return Cursor.decode(request.GET.get("cursor", ""))


@json_endpoint("GET")
@require_GET
@access.record_reader_required
def record_excerpt(request: HttpRequest, instruction_id: int) -> JsonResponse:
    instruction, patient = _record_for(request, instruction_id)
    excerpt = excerpt_services.record_excerpt_cached(instruction, patient)
    _audit_record_read(request, instruction, patient, {"view": "excerpt"})
    html = render_to_string(
        "review/clinician/_excerpt.html",
        {"excerpt": excerpt, "instruction": instruction},
        request=request,
    )
    return JsonResponse({"html": html, "concepts": excerpt.concepts})


@json_endpoint("GET")
@require_GET
@access.record_reader_required
def record_events(request: HttpRequest, instruction_id: int) -> JsonResponse:
    instruction, patient = _record_for(request, instruction_id)
    try:
        cursor = _cursor(request)
    except ValueError:
        return _bad_request("the cursor or date is not valid")
    event_type = request.GET.get("type", "")[:40]
    if not event_type.isprintable():
        # A NUL byte reached PostgreSQL and came back as a 500.
        return _bad_request("the event type is not valid")
    page = record_selectors.record_timeline_page(patient, cursor=cursor, event_type=event_type)
    # Every page is audited, not only the first: a cursor is the client's to choose, and one
    # the server never handed out read a whole record unaudited. The row
    # says how many events the page held, so the trail shows how much of a record was read.
    jumped = bool(request.GET.get("day")) and not request.GET.get("cursor")
    kind = "day" if jumped else "next" if cursor is not None else "first"
    details = {"view": "timeline", "page": kind, "events": page.count}
    if event_type:
        details["type"] = event_type
    _audit_record_read(request, instruction, patient, details)
    data: dict[str, Any] = {
        "html": render_to_string(
            "review/clinician/_events.html",
            {"rows": page.rows, "instruction": instruction, "last": patient.last_event_at},
            request=request,
        ),
        "next": page.next_cursor,
        "count": page.count,
    }
    if cursor is None and not event_type:
        # The first page also lists the record's event types, for the filter.
        data["types"] = record_selectors.record_event_types(patient)
    return JsonResponse(data)


@json_endpoint("GET")
@require_GET
@access.record_reader_required
def record_event(request: HttpRequest, instruction_id: int, event_id: int) -> JsonResponse:
    instruction, patient = _record_for(request, instruction_id)
    event = record_selectors.record_event_get(patient, event_id=event_id)
    if event is None:
        raise Http404
    _audit_record_read(request, instruction, patient, {"view": "event", "event": event_id})
    html = render_to_string("review/clinician/_event.html", {"event": event}, request=request)
    return JsonResponse({"html": html})


@json_endpoint("POST")
@require_POST
@access.record_reader_required
def record_search(request: HttpRequest, instruction_id: int) -> JsonResponse:
    # A POST: search terms can quote the record, and URLs end up in proxy and server logs.
    instruction, patient = _record_for(request, instruction_id)
    try:
        body = _json_body(request)
    except review_services.ReviewError as exc:
        return _bad_request(exc.message)
    if not isinstance(body, dict) or not isinstance(body.get("q", ""), str):
        return _bad_request('send {"q": text, "cursor": text}')
    query = body.get("q", "")[:200]
    try:
        cursor = Cursor.decode(str(body.get("cursor") or ""))
    except ValueError:
        return _bad_request("the cursor is not valid")
    if "\x00" in query:
        return _bad_request("the search is not valid")
    found, page = record_selectors.record_search_page(patient, query=query, cursor=cursor)
    # Every page is audited. The query itself may quote patient text, so
    # only its length is kept.
    audit_record(
        action=AuditEvent.Action.RECORD_SEARCHED,
        request=request,
        obj=patient,
        person_id=patient.person_id,
        instruction_id=instruction.instruction_id,
        details={
            "query_length": len(query),
            "page": "next" if cursor is not None else "first",
            "results": page.count,
        },
    )
    html = render_to_string(
        "review/clinician/_events.html",
        {
            "rows": page.rows,
            "instruction": instruction,
            "search": True,
            "last": patient.last_event_at,
        },
        request=request,
    )
    # What was searched for, as the user wrote it and what it also matched: never a stem.
    return JsonResponse(
        {
            "html": html,
            "next": page.next_cursor,
            "count": page.count,
            "concepts": [c.to_json() for c in found],
        }
    )


# --- autosave and submit -------------------------------------------------------------------------
def _json_body(request: HttpRequest) -> Any:
    if request.content_type != "application/json":
        raise review_services.InvalidReview("send the review as application/json")
    try:
        body = request.body
    except RequestDataTooBig:
        raise review_services.InvalidReview("the review is too large to save") from None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise review_services.InvalidReview("the body is not valid JSON") from None
    except RecursionError:  # "[[[[…" nested deeper than the parser's stack
        raise review_services.InvalidReview("the body is nested too deeply") from None


@json_endpoint("POST")
@require_POST
@access.clinician_required
def review_save(request: HttpRequest, review_id: int) -> JsonResponse:
    review = access.review_get_for_clinician(request.user, review_id=review_id)
    try:
        state = review_services.review_save_draft(
            review=review,
            clinician=request.user,
            payload=_json_body(request),
            request=request,
        )
    except review_services.ReviewError as exc:
        return JsonResponse(exc.as_dict(), status=exc.status)
    return JsonResponse(state)


@json_endpoint("POST")
@require_POST
@access.clinician_required
def review_submit(request: HttpRequest, review_id: int) -> JsonResponse:
    # The service reads the review scoped to this clinician (and locks a reopened one): one read,
    # not two.
    try:
        payload = _json_body(request)
    except review_services.ReviewError as exc:
        access.review_get_for_clinician(request.user, review_id=review_id)  # 404 comes first
        return JsonResponse(exc.as_dict(), status=exc.status)
    try:
        state = review_services.review_submit(
            review_id=review_id, clinician=request.user, payload=payload, request=request
        )
    except Review.DoesNotExist:
        raise Http404 from None
    except review_services.ReviewError as exc:
        return JsonResponse(exc.as_dict(), status=exc.status)
    return JsonResponse(state)


# --- bulk assignment (admins) ------------------------------------------------------------------
@require_http_methods(["GET", "POST"])
@access.admin_required
def admin_assign(request: HttpRequest) -> HttpResponse:
    form = AssignForm(request.POST or None)
    plan = None
    study = None
    design = None
    calibration: list[tuple[str, CalibrationSummary]] = []
    unblinding: list[tuple[str, str]] = []
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        instructions = instructions_for_assignment(
            dataset=data["dataset"], specialty=data["specialty"], category=data["category"]
        )
        clinicians = list(data["clinicians"])
        unblinding = [
            (c.email, ", ".join(roles)) for c in clinicians if (roles := access.unblinding_roles(c))
        ]
        study = data["study"]
        if request.POST.get("action") == "create":
            try:
                plan = assignments_create(
                    instructions=instructions,
                    clinicians=clinicians,
                    overlap=data["overlap"],
                    study=study,
                    actor=request.user,
                    repeat_reviewers=data["repeat_reviewers"],
                )
            except AssignmentError as exc:
                messages.error(request, str(exc))
                return redirect("admin_assign")
            names = ", ".join(sorted(study_names(set(plan.studies.values())))) or "no study"
            gold = f" and {plan.gold} gold items mixed in" if plan.gold else ""
            known = (
                f" ({plan.known_items} gold or calibration items are never ordinary work)"
                if plan.known_items
                else ""
            )
            messages.success(
                request,
                f"Created {plan.created} assignments for {plan.instructions} instructions "
                f"in {names}{gold}.{known}",
            )
            return redirect("admin_assign")
        plan = assignments_plan(
            instructions=instructions,
            clinicians=clinicians,
            overlap=data["overlap"],
            study=study,
            repeat_reviewers=data["repeat_reviewers"],
        )
        # The round the plan fills, named before anything is created.
        study = study or study_current(data["dataset"])
        design = _design(data["dataset"], study, instructions, clinicians)
        calibration = _calibration(study, clinicians)
    return render(
        request,
        "review/admin/assign.html",
        {
            "form": form,
            "plan": plan,
            "study": study,
            "design": design,
            "study_label": study_label(study.round, study.name) if study else "",
            # Chosen accounts that can read model names: assigned if the admin goes on, with
            # their reviews flagged and left out of reports.
            "unblinding": unblinding,
            # Where the round has calibration items: each chosen clinician's results first.
            "calibration": calibration,
        },
    )


def _calibration(
    study: Study | None, clinicians: list[User]
) -> list[tuple[str, CalibrationSummary]]:
    if study is None or not gold_items_available(study.pk, use=GoldItem.Use.CALIBRATION):
        return []
    found = calibration_summaries(study)
    return [(c.email, found.get(c.pk) or CalibrationSummary()) for c in clinicians]


def _design(
    dataset: Dataset,
    study: Study | None,
    instructions: Iterable[Instruction],
    clinicians: list[User],
) -> dict[str, object]:
    """The design calculator for the instructions and clinicians the preview assigns."""
    chosen = list(instructions)
    return study_design(
        dataset=dataset,
        study=study,
        instructions=len(chosen),
        patients=len({i.person_id or f"i{i.pk}" for i in chosen}),
        clinicians=len(clinicians),
    )
