"""Adjudicators' pages: their queue, the adjudication page, its autosave and submit.

The adjudication page is the review page's layout and script (``review.js``, the same save
protocol: an edit is never lost) with the disagreeing clinicians' judgements under each
response, as "Reviewer 1", "Reviewer 2"…, and a reason to give. Responses are blinded as on the
review page (per-adjudication handles and labels, masked text). Every open is audited as a
record view; an adjudicator never opens an adjudication of an instruction they were asked to
review (404, ``review.access.adjudication_get_for_adjudicator``).
"""

import json
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from medalign_site.errors import json_endpoint
from review import access
from review.models import Adjudication, AuditEvent, User, response_label
from review.selectors.adjudications import (
    adjudication_page_data,
    adjudication_responses,
    adjudicator_queue,
)
from review.services import adjudications as services
from review.services import excerpts as excerpt_services
from review.services.audit import audit_record_many
from review.services.reviews import MAX_COMMENT_CHARS, MAX_REASON_CHARS, InvalidReview, ReviewError
from review.views.page_data import record_urls, response_data


def _user(request: HttpRequest) -> User:
    """The signed-in user (``access.*_required`` let no one else through)."""
    assert isinstance(request.user, User)
    return request.user


@require_GET
@access.adjudicator_required
def queue(request: HttpRequest) -> HttpResponse:
    return render(
        request, "review/adjudicator/queue.html", {"rows": adjudicator_queue(_user(request))}
    )


def _evidence(adjudication: Adjudication) -> dict[str, Any]:
    """What made it a disagreement, by this page's own labels."""
    evidence = adjudication.evidence or {}
    position = {int(r): k for k, r in enumerate(adjudication.shown_order)}
    split = [
        response_label(position[int(r)]) for r in evidence.get("split", []) if int(r) in position
    ]
    return {
        "split": sorted(split),
        "min_tau": evidence.get("min_tau"),
        "threshold": evidence.get("threshold"),
    }


@require_GET
@access.adjudicator_required
def adjudication_page(request: HttpRequest, adjudication_id: int) -> HttpResponse:
    adjudication = access.adjudication_get_for_adjudicator(
        _user(request), adjudication_id=adjudication_id
    )
    instruction = adjudication.instruction
    responses = adjudication_responses(adjudication)
    page = adjudication_page_data(
        adjudication, dataset_id=instruction.dataset_id, responses=responses
    )
    patient = instruction.patient
    excerpt_html = excerpt_services.record_excerpt_html(instruction, patient) if patient else ""
    audit_record_many(
        actions=[AuditEvent.Action.INSTRUCTION_VIEWED, AuditEvent.Action.RECORD_VIEWED],
        request=request,
        obj=adjudication,
        person_id=instruction.person_id,
        instruction_id=instruction.instruction_id,
    )
    data = {
        "kind": "adjudication",
        "review": adjudication.pk,
        "owner": access.page_owner(_user(request)),
        "status": adjudication.status,
        "editable": adjudication.is_editable,
        "fields": {"reason": page.reason},
        "require_reason": True,
        "responses": response_data(page.responses),
        "urls": record_urls(instruction)
        | {
            "save": reverse("adjudication_save", args=[adjudication.pk]),
            "submit": reverse("adjudication_submit", args=[adjudication.pk]),
            "next": reverse("adjudication_queue"),
            "login": reverse("account_login") + "?next=" + reverse("session_resumed"),
            "access": reverse("application_status"),
        },
        "limits": {"comment": MAX_COMMENT_CHARS, "reason": MAX_REASON_CHARS},
    }
    return render(
        request,
        "review/adjudicator/adjudication.html",
        {
            "adjudication": adjudication,
            "instruction": instruction,
            "patient": patient,
            "page": page,
            "excerpt_html": excerpt_html,
            "evidence": _evidence(adjudication),
            "data": data,
        },
    )


def _json_body(request: HttpRequest) -> Any:
    if request.content_type != "application/json":
        raise InvalidReview("send the adjudication as application/json")
    try:
        return json.loads(request.body)
    except RequestDataTooBig:
        raise InvalidReview("the adjudication is too large to save") from None
    except (ValueError, UnicodeDecodeError):
        raise InvalidReview("the body is not valid JSON") from None
    except RecursionError:
        raise InvalidReview("the body is nested too deeply") from None


@json_endpoint("POST")
@require_POST
@access.adjudicator_required
def adjudication_save(request: HttpRequest, adjudication_id: int) -> JsonResponse:
    adjudication = access.adjudication_get_for_adjudicator(
        _user(request), adjudication_id=adjudication_id
    )
    try:
        state = services.adjudication_save_draft(
            adjudication=adjudication,
            adjudicator=_user(request),
            payload=_json_body(request),
            request=request,
        )
    except ReviewError as exc:
        return JsonResponse(exc.as_dict(), status=exc.status)
    return JsonResponse(state)


@json_endpoint("POST")
@require_POST
@access.adjudicator_required
def adjudication_submit(request: HttpRequest, adjudication_id: int) -> JsonResponse:
    access.adjudication_get_for_adjudicator(_user(request), adjudication_id=adjudication_id)
    try:
        state = services.adjudication_submit(
            adjudication_id=adjudication_id,
            adjudicator=_user(request),
            payload=_json_body(request),
            request=request,
        )
    except Adjudication.DoesNotExist:
        raise Http404 from None
    except ReviewError as exc:
        return JsonResponse(exc.as_dict(), status=exc.status)
    return JsonResponse(state)
