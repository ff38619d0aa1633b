"""Starting, autosaving, submitting and reopening reviews.

Every state change of a Review happens here (see the transitions in ``Review``'s docstring).
Drafts carry the version the client last saw: a save from an older version (another tab, a
reopened review) is refused with ``StaleReview`` so nobody silently overwrites newer work.
Payloads are validated completely before anything is written, and each call runs in one
transaction, so an invalid payload stores nothing.
"""

import hashlib
import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone

from review.models import (
    Assignment,
    AuditEvent,
    ErrorTag,
    ModelResponse,
    ResponseJudgement,
    Review,
    User,
)

from .audit import audit_record

MAX_COMMENT_CHARS = 5000
MAX_NOTE_CHARS = 2000
# Time spent: the client reports active seconds since its last save. One save may add at most
# this much, and never more than the wall-clock time since the previous save (plus slack), so a
# buggy or hostile client cannot inflate the figure.
MAX_SECONDS_PER_SAVE = 300
SECONDS_SLACK = 5
# The audit trail gets one REVIEW_SAVED per review per minute at most: autosave fires every few
# seconds while someone types, and a row per keystroke pause would bury the events that matter.
SAVE_AUDIT_INTERVAL = timedelta(minutes=1)

PAYLOAD_KEYS = {"version", "active_seconds", "cannot_assess", "cannot_assess_note", "judgements"}
JUDGEMENT_KEYS = {"response", "position", "rank", "is_correct", "error_tags", "comment"}


class ReviewError(Exception):
    """A request the review cannot take; ``status`` is the HTTP status the view answers with."""

    status = 400
    code = "invalid"

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def as_dict(self) -> dict[str, str]:
        data = {"error": self.code, "message": self.message}
        if self.field:
            data["field"] = self.field
        return data


class InvalidReview(ReviewError):
    status = 400
    code = "invalid"


class IncompleteReview(ReviewError):
    status = 400
    code = "incomplete"


class StaleReview(ReviewError):
    status = 409
    code = "stale"


class ReviewReadOnly(ReviewError):
    status = 409
    code = "read_only"


# --- starting ------------------------------------------------------------------------------------
def shown_order_for(
    *, clinician_id: int, instruction_id: int, response_ids: list[int]
) -> list[int]:
    """Response ids in a random order that is stable for one clinician and instruction.

    Seeded by a hash of (clinician, instruction): reloading shows the same order, and two
    clinicians usually see different orders, which spreads any position bias.
    """
    digest = hashlib.sha256(f"medalign-order:{clinician_id}:{instruction_id}".encode()).digest()
    order = sorted(response_ids)
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return order


def review_get_or_start(*, assignment: Assignment) -> Review:
    """The assignment's review, started (as a draft with a shown order) on first open.

    A draft opened before the instruction's responses were imported has nothing to show; it picks
    them up the first time it is opened after they arrive.
    """
    review = Review.objects.filter(assignment=assignment).first()
    if review is not None:
        if review.status == Review.Status.DRAFT and not review.shown_order:
            with transaction.atomic():
                review = Review.objects.select_for_update().get(pk=review.pk)
                if not review.shown_order:
                    _show_responses(review, assignment)
        return review
    try:
        with transaction.atomic():
            review = Review.objects.create(assignment=assignment, shown_order=[])
            _show_responses(review, assignment)
            return review
    except IntegrityError:
        # Two tabs opened the page at once: the other request started it first.
        return Review.objects.get(assignment=assignment)


def _show_responses(review: Review, assignment: Assignment) -> None:
    response_ids = list(
        ModelResponse.objects.filter(instruction_id=assignment.instruction_id).values_list(
            "id", flat=True
        )
    )
    if not response_ids:
        return
    order = shown_order_for(
        clinician_id=assignment.clinician_id,
        instruction_id=assignment.instruction_id,
        response_ids=response_ids,
    )
    review.shown_order = order
    review.save(update_fields=["shown_order"])
    ResponseJudgement.objects.bulk_create(
        [
            ResponseJudgement(review=review, response_id=rid, position=position)
            for position, rid in enumerate(order)
        ]
    )


# --- validating --------------------------------------------------------------------------------
@dataclass(frozen=True)
class JudgementData:
    response_id: int
    rank: int | None
    is_correct: bool | None
    tag_ids: tuple[int, ...]
    comment: str


@dataclass(frozen=True)
class DraftData:
    version: int
    active_seconds: int
    cannot_assess: str
    cannot_assess_note: str
    judgements: dict[int, JudgementData]  # by response id


def _int(value: Any, field: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    # bool is an int in Python; a JSON true must not pass for 1.
    if type(value) is not int or value < minimum or (maximum is not None and value > maximum):
        bounds = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise InvalidReview(f"{field} must be a whole number {bounds}", field=field)
    return value


def _str(value: Any, field: str, *, max_chars: int) -> str:
    if not isinstance(value, str):
        raise InvalidReview(f"{field} must be text", field=field)
    if len(value) > max_chars:
        raise InvalidReview(f"{field} is longer than {max_chars} characters", field=field)
    return value


def review_validate(review: Review, payload: Any) -> DraftData:
    """Check a draft payload against the review; InvalidReview naming the first problem."""
    if not isinstance(payload, dict):
        raise InvalidReview("the body must be a JSON object")
    unknown = set(payload) - PAYLOAD_KEYS
    if unknown:
        raise InvalidReview(f"unknown field(s): {', '.join(sorted(unknown))}")
    if "version" not in payload or "judgements" not in payload:
        raise InvalidReview("version and judgements are required")
    version = _int(payload["version"], "version")
    active = _int(payload.get("active_seconds", 0), "active_seconds", maximum=86_400)
    cannot_assess = payload.get("cannot_assess", "")
    if cannot_assess not in Review.CannotAssess.values:
        raise InvalidReview("cannot_assess is not a known reason", field="cannot_assess")
    note = _str(
        payload.get("cannot_assess_note", ""), "cannot_assess_note", max_chars=MAX_NOTE_CHARS
    )

    items = payload["judgements"]
    shown = [int(rid) for rid in review.shown_order]
    n = len(shown)
    if not isinstance(items, list) or len(items) != n:
        raise InvalidReview(f"judgements must list all {n} responses", field="judgements")
    tags = dict(ErrorTag.objects.filter(is_active=True).values_list("slug", "id"))
    judgements: dict[int, JudgementData] = {}
    positions: set[int] = set()
    for i, item in enumerate(items):
        where = f"judgements[{i}]"
        if not isinstance(item, dict) or set(item) - JUDGEMENT_KEYS:
            raise InvalidReview(f"{where} has unknown fields", field=where)
        response_id = _int(item.get("response"), f"{where}.response", minimum=1)
        if response_id not in shown:
            raise InvalidReview(f"{where}.response is not a response of this review", field=where)
        if response_id in judgements:
            raise InvalidReview(f"{where}.response appears twice", field=where)
        position = _int(item.get("position"), f"{where}.position", maximum=n - 1)
        if position in positions:
            raise InvalidReview(f"{where}.position appears twice", field=where)
        if shown[position] != response_id:
            raise InvalidReview(f"{where}.position does not match the order shown", field=where)
        positions.add(position)
        rank = item.get("rank")
        if rank is not None:
            rank = _int(rank, f"{where}.rank", minimum=1, maximum=n)
        is_correct = item.get("is_correct")
        if is_correct is not None and type(is_correct) is not bool:
            raise InvalidReview(f"{where}.is_correct must be true, false or null", field=where)
        slugs = item.get("error_tags", [])
        if (
            not isinstance(slugs, list)
            or not all(isinstance(s, str) for s in slugs)
            or len(set(slugs)) != len(slugs)
        ):
            raise InvalidReview(f"{where}.error_tags must be a list without repeats", field=where)
        if any(slug not in tags for slug in slugs):
            raise InvalidReview(f"{where}.error_tags holds an unknown tag", field=where)
        comment = _str(item.get("comment", ""), f"{where}.comment", max_chars=MAX_COMMENT_CHARS)
        judgements[response_id] = JudgementData(
            response_id=response_id,
            rank=rank,
            is_correct=is_correct,
            tag_ids=tuple(sorted(tags[s] for s in slugs)),
            comment=comment,
        )
    return DraftData(
        version=version,
        active_seconds=active,
        cannot_assess=cannot_assess,
        cannot_assess_note=note,
        judgements=judgements,
    )


def _check_complete(data: DraftData) -> None:
    if data.cannot_assess:
        if data.cannot_assess == Review.CannotAssess.OTHER and not data.cannot_assess_note.strip():
            raise IncompleteReview("say why the review cannot be assessed", field="cannot_assess")
        return
    if not data.judgements:
        raise IncompleteReview("there are no responses to judge yet", field="judgements")
    unranked = [j for j in data.judgements.values() if j.rank is None]
    unmarked = [j for j in data.judgements.values() if j.is_correct is None]
    if unranked:
        raise IncompleteReview(f"{len(unranked)} response(s) not ranked yet", field="rank")
    if unmarked:
        raise IncompleteReview(
            f"{len(unmarked)} response(s) not marked correct or incorrect", field="is_correct"
        )


# --- writing ----------------------------------------------------------------------------------
def _locked(review_id: int, clinician: User) -> Review:
    # The caller already reached the review through access.review_get_for_clinician; the lock
    # serialises concurrent saves and submits of one review (two tabs, a double click).
    return (
        Review.objects.select_for_update(of=("self",))
        .select_related("assignment__instruction")
        .get(pk=review_id, assignment__clinician=clinician)
    )


def _apply(review: Review, data: DraftData) -> None:
    now = timezone.now()
    judgements = list(ResponseJudgement.objects.filter(review=review))
    for judgement in judgements:
        new = data.judgements[judgement.response_id]
        judgement.rank = new.rank
        judgement.is_correct = new.is_correct
        judgement.comment = new.comment
    ResponseJudgement.objects.bulk_update(judgements, ["rank", "is_correct", "comment"])
    through = ResponseJudgement.error_tags.through
    through.objects.filter(responsejudgement__review=review).delete()
    through.objects.bulk_create(
        [
            through(responsejudgement_id=j.pk, errortag_id=tag_id)
            for j in judgements
            for tag_id in data.judgements[j.response_id].tag_ids
        ]
    )
    elapsed = (now - review.updated_at).total_seconds() + SECONDS_SLACK
    increment = max(0, min(data.active_seconds, MAX_SECONDS_PER_SAVE, int(elapsed)))
    review.time_spent_seconds += increment
    review.cannot_assess = data.cannot_assess
    review.cannot_assess_note = data.cannot_assess_note
    review.version += 1
    review.updated_at = now


def review_state(review: Review) -> dict[str, Any]:
    """What save and submit answer with: identical for a repeated submit."""
    return {
        "review": review.pk,
        "status": review.status,
        "version": review.version,
        "submitted_at": review.submitted_at.isoformat() if review.submitted_at else None,
        "time_spent_seconds": review.time_spent_seconds,
    }


@transaction.atomic
def review_save_draft(
    *, review_id: int, clinician: User, payload: Any, request: HttpRequest | None = None
) -> dict[str, Any]:
    review = _locked(review_id, clinician)
    if not review.is_editable:
        raise ReviewReadOnly("this review is submitted; an admin can reopen it")
    data = review_validate(review, payload)
    if data.version != review.version:
        raise StaleReview("this review changed in another window; reload to continue")
    _apply(review, data)
    review.save()
    instruction = review.assignment.instruction
    recent = AuditEvent.objects.filter(
        actor=clinician,
        action=AuditEvent.Action.REVIEW_SAVED,
        object_type="Review",
        object_id=str(review.pk),
        created_at__gte=review.updated_at - SAVE_AUDIT_INTERVAL,
    ).exists()
    if not recent:
        audit_record(
            action=AuditEvent.Action.REVIEW_SAVED,
            actor=clinician,
            request=request,
            obj=review,
            person_id=instruction.person_id,
            instruction_id=instruction.instruction_id,
            details={"version": review.version},
        )
    return review_state(review)


@transaction.atomic
def review_submit(
    *, review_id: int, clinician: User, payload: Any, request: HttpRequest | None = None
) -> dict[str, Any]:
    """Save the final state and submit. Submitting a submitted review returns it unchanged."""
    review = _locked(review_id, clinician)
    if review.status == Review.Status.SUBMITTED:
        return review_state(review)
    data = review_validate(review, payload)
    if data.version != review.version:
        raise StaleReview("this review changed in another window; reload to continue")
    _check_complete(data)
    _apply(review, data)
    review.status = Review.Status.SUBMITTED
    review.submitted_at = review.updated_at
    review.save()
    instruction = review.assignment.instruction
    audit_record(
        action=AuditEvent.Action.REVIEW_SUBMITTED,
        actor=clinician,
        request=request,
        obj=review,
        person_id=instruction.person_id,
        instruction_id=instruction.instruction_id,
        details={"version": review.version, "time_spent_seconds": review.time_spent_seconds},
    )
    return review_state(review)


MAX_REOPEN_REASON_CHARS = 2000


@transaction.atomic
def review_reopen(
    *, review: Review, actor: User, reason: str, request: HttpRequest | None = None
) -> bool:
    """Let the clinician edit a submitted review again, saying why. False if it was not submitted.

    The reason is required: the clinician reads it in their queue and on the review page, and
    the audit row keeps it, so a reopening is never unexplained.
    """
    reason = (reason or "").strip()
    if not reason:
        raise InvalidReview("say why the review is reopened", field="reason")
    if len(reason) > MAX_REOPEN_REASON_CHARS:
        raise InvalidReview(
            f"the reason is longer than {MAX_REOPEN_REASON_CHARS} characters", field="reason"
        )
    review = (
        Review.objects.select_for_update(of=("self",))
        .select_related("assignment__instruction")
        .get(pk=review.pk)
    )
    if review.status != Review.Status.SUBMITTED:
        return False
    now = timezone.now()
    review.status = Review.Status.REOPENED
    review.reopened_by = actor
    review.reopened_at = now
    review.reopen_reason = reason
    review.version += 1  # an open tab still showing the read-only review must reload
    review.updated_at = now
    review.save()
    instruction = review.assignment.instruction
    audit_record(
        action=AuditEvent.Action.REVIEW_REOPENED,
        actor=actor,
        request=request,
        obj=review,
        person_id=instruction.person_id,
        instruction_id=instruction.instruction_id,
        details={"reason": reason, "clinician": review.assignment.clinician_id},
    )
    return True
