"""Assigning, autosaving and submitting adjudications. Every state change of an
``Adjudication`` happens here (see the transitions in its docstring).

The save protocol is the review page's (``review.services.reviews``), so the page runs the same
script with the same guarantees: edits ``{"handle", "field", "value", "at"}`` merge into the
draft per response and field (the later edit wins, resending is harmless), time spent counts
once per tab and sequence number, submit carries the final edits and is idempotent, and a
submitted adjudication answers edits with ``read_only`` naming those it did not take. The page's
own field is ``reason``: why the adjudicator resolves the disagreement so.

An adjudicator never resolves a disagreement over their own reviews: refused when assigning
(they hold an assignment of the instruction, in any study or for any purpose) and again on
every open, save and submit (``review.access.adjudication_get_for_adjudicator``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone

from medalign_site.prepared import update_rows
from review.access import can_unblind, unblinding_roles, user_access
from review.models import (
    AdjudicatedJudgement,
    Adjudication,
    Assignment,
    AuditEvent,
    Study,
    StudyResponse,
    User,
)
from review.models.reviews import new_handle
from review.selectors.adjudications import adjudication_judgements, adjudication_values
from review.selectors.drafts import JUDGEMENT_FIELDS, Judged, draft_values
from review.selectors.quality import disagreements, quality_policy

from .audit import audit_record
from .reviews import (
    EditBatch,
    IncompleteReview,
    ReviewError,
    ReviewReadOnly,
    draft_merge,
    draft_save_updates,
    edits_validate,
    shown_order_for,
    time_increment,
    unstorable_refusal,
)

ADJUDICATION_FIELDS = ("reason",)
_CSPRNG = secrets.SystemRandom()


class AdjudicationError(Exception):
    """An adjudication an admin asked for that would break a rule; the message is for them."""


class AdjudicationForbidden(ReviewError):
    status = 403
    code = "forbidden"


def holds_instruction(adjudicator_id: int, instruction_id: int) -> bool:
    """Whether the account was ever asked to review the instruction (any study, any purpose):
    then some review of it may be theirs, and they never adjudicate it."""
    return Assignment.objects.filter(
        clinician_id=adjudicator_id, instruction_id=instruction_id
    ).exists()


@dataclass
class AdjudicationPlan:
    created: list[Adjudication] = field(default_factory=list)
    own: list[str] = field(default_factory=list)  # instructions the adjudicator reviewed
    already: list[str] = field(default_factory=list)  # already adjudicated (or assigned)
    agreed: list[str] = field(default_factory=list)  # no longer a disagreement


@transaction.atomic
def adjudications_create(
    *,
    study: Study,
    instruction_ids: list[int],
    adjudicator: User,
    actor: User,
    request: HttpRequest | None = None,
) -> AdjudicationPlan:
    """Ask ``adjudicator`` to resolve the study's disagreements on these instructions.

    Refused whole for an account without adjudicator access or with access that reads model
    names (adjudication is blind, as reviewing is). Instructions the adjudicator was asked to
    review, instructions already adjudicated and instructions that no longer disagree (under
    the study's tau threshold) are left out, each listed."""
    access = user_access(adjudicator)
    if not access.is_adjudicator:
        raise AdjudicationError(f"{adjudicator.email} has no current adjudicator access.")
    roles = unblinding_roles(adjudicator)
    if roles:
        raise AdjudicationError(
            f"{adjudicator.email} can read model names ({', '.join(roles)} access): "
            "adjudication is blind, ask an adjudicator without it."
        )
    threshold = quality_policy(study).adjudication_tau
    found = {
        d.instruction_id: d
        for d in disagreements(study, threshold=threshold, instruction_ids=set(instruction_ids))
    }
    plan = AdjudicationPlan()
    now = timezone.now()
    for instruction_id in instruction_ids:
        disagreement = found.get(instruction_id)
        if disagreement is None:
            plan.agreed.append(str(instruction_id))
            continue
        code = disagreement.instruction_code
        if disagreement.adjudication is not None:
            plan.already.append(code)
            continue
        if holds_instruction(adjudicator.pk, instruction_id):
            plan.own.append(code)
            continue
        order = shown_order_for(
            list(
                StudyResponse.objects.filter(
                    study=study, instruction_id=instruction_id
                ).values_list("response_id", flat=True)
            )
        )
        reviewers = list(disagreement.review_ids)
        _CSPRNG.shuffle(reviewers)
        try:
            with transaction.atomic():
                adjudication = Adjudication.objects.create(
                    study=study,
                    instruction_id=instruction_id,
                    adjudicator=adjudicator,
                    assigned_by=actor,
                    created_at=now,
                    started_at=now,
                    updated_at=now,
                    reviewer_order=reviewers,
                    evidence={**disagreement.evidence, "threshold": threshold},
                    shown_order=order,
                    handles=[new_handle() for _ in order],
                )
        except IntegrityError:
            plan.already.append(code)  # another admin assigned it meanwhile
            continue
        adjudication.reviews.set(disagreement.review_ids)
        plan.created.append(adjudication)
        audit_record(
            action=AuditEvent.Action.ADJUDICATION_ASSIGNED,
            actor=actor,
            request=request,
            obj=adjudication,
            instruction_id=code,
            details={
                "study": study.pk,
                "adjudicator": adjudicator.pseudonym,
                "reviews": disagreement.review_ids,
                "evidence": adjudication.evidence,
            },
        )
    return plan


def adjudication_check_allowed(adjudication: Adjudication, adjudicator: User) -> None:
    """Refuse an adjudicator who holds an assignment of the instruction (their own review)."""
    if holds_instruction(adjudicator.pk, adjudication.instruction_id):
        raise AdjudicationForbidden(
            "You reviewed this instruction yourself, so you cannot adjudicate it: an admin will "
            "give it to another adjudicator. Nothing was saved."
        )


def adjudication_state(adjudication: Adjudication) -> dict[str, Any]:
    """What save and submit answer with (the review page's shape)."""
    return {
        "review": adjudication.pk,
        "status": adjudication.status,
        "version": adjudication.version,
        "submitted_at": (
            adjudication.submitted_at.isoformat() if adjudication.submitted_at else None
        ),
        "time_spent_seconds": adjudication.time_spent_seconds,
        "draft": draft_values(adjudication),
    }


def _validate(adjudication: Adjudication, payload: Any) -> EditBatch:
    return edits_validate(
        handles=list(adjudication.handles), payload=payload, fields=ADJUDICATION_FIELDS
    )


def _read_only(adjudication: Adjudication, batch: EditBatch) -> ReviewReadOnly:
    values, reason = adjudication_values(adjudication)
    current: dict[str, Any] = {"reason": reason}
    for handle, judged in values.items():
        for name in JUDGEMENT_FIELDS:
            current[f"{handle}.{name}"] = getattr(judged, name)
    unapplied = sorted(
        {e.key for e in batch.edits if current.get(e.key) != e.value}
        | {key for _, key in batch.refused}
    )
    when = timezone.localtime(adjudication.submitted_at).strftime("%-d %b %Y, %H:%M")
    return ReviewReadOnly(
        f"This adjudication was submitted on {when}, so it takes no more changes",
        extra={"unapplied": unapplied, "state": adjudication_state(adjudication)},
    )


def adjudication_save_draft(
    *,
    adjudication: Adjudication,
    adjudicator: User,
    payload: Any,
    request: HttpRequest | None = None,
) -> dict[str, Any]:
    """Merge an edit batch into the draft: one conditional UPDATE, retried on a race. Text the
    database cannot store is refused by name, the rest of the batch saved (as on reviews)."""
    adjudication_check_allowed(adjudication, adjudicator)
    batch = _validate(adjudication, payload)
    state = _save_batch(adjudication, adjudicator, batch, request)
    if batch.refused:
        raise unstorable_refusal(batch, state)
    return state


def _save_batch(
    adjudication: Adjudication,
    adjudicator: User,
    batch: EditBatch,
    request: HttpRequest | None,
) -> dict[str, Any]:
    for _attempt in range(20):
        if not adjudication.is_editable:
            raise _read_only(adjudication, batch)
        if not batch.edits and not batch.active_seconds:
            return adjudication_state(adjudication)
        updates, audit = draft_save_updates(adjudication, batch, timezone.now())
        with transaction.atomic():
            won = update_rows(
                Adjudication,
                where={
                    "pk": adjudication.pk,
                    "version": adjudication.version,
                    "status": adjudication.status,
                },
                values=updates,
            )
            if won:
                for name, value in updates.items():
                    setattr(adjudication, name, value)
                if audit:
                    _audit(adjudication, adjudicator, request, AuditEvent.Action.ADJUDICATION_SAVED)
                return adjudication_state(adjudication)
        adjudication = Adjudication.objects.select_related("instruction").get(pk=adjudication.pk)
    raise ReviewError("the adjudication is too busy to save; try again")  # pragma: no cover


def _audit(
    adjudication: Adjudication,
    adjudicator: User,
    request: HttpRequest | None,
    action: str,
    **details: Any,
) -> None:
    instruction = adjudication.instruction
    audit_record(
        action=action,
        actor=adjudicator,
        request=request,
        obj=adjudication,
        person_id=instruction.person_id,
        instruction_id=instruction.instruction_id,
        details={"version": adjudication.version, **details},
    )


def _check_complete(values: dict[str, Judged], reason: str) -> None:
    if not values:
        raise IncompleteReview("there are no responses to judge", field="edits")
    unranked = [j for j in values.values() if j.rank is None]
    unmarked = [j for j in values.values() if j.is_correct is None]
    if unranked:
        raise IncompleteReview(f"{len(unranked)} response(s) not ranked yet", field="rank")
    if unmarked:
        raise IncompleteReview(
            f"{len(unmarked)} response(s) not marked correct or incorrect", field="is_correct"
        )
    if not reason.strip():
        raise IncompleteReview("say why you resolve the disagreement so", field="reason")


def adjudication_submit(
    *,
    adjudication_id: int,
    adjudicator: User,
    payload: Any,
    request: HttpRequest | None = None,
) -> dict[str, Any]:
    """Apply the final edits and submit: the resolved judgements are written as rows."""
    with transaction.atomic():
        adjudication = (
            Adjudication.objects.select_for_update(of=("self",))
            .select_related("instruction")
            .filter(pk=adjudication_id, adjudicator=adjudicator)
            .first()
        )
        if adjudication is None:
            raise Adjudication.DoesNotExist
        adjudication_check_allowed(adjudication, adjudicator)
        batch = _validate(adjudication, payload)
        if batch.refused and adjudication.is_editable:
            # Not submitted: the other edits go to the draft (the row is locked: one try).
            state = _save_batch(adjudication, adjudicator, batch, request)
            raise unstorable_refusal(batch, state)
        if not adjudication.is_editable:
            refusal = _read_only(adjudication, batch)
            if refusal.extra["unapplied"]:
                raise refusal
            return adjudication_state(adjudication)
        draft, _changed, count_time = draft_merge(adjudication.draft, batch)
        adjudication.draft = draft
        rows = adjudication_judgements(adjudication)
        values, reason = adjudication_values(adjudication, rows)
        _check_complete(values, reason)
        now = timezone.now()
        if count_time:
            adjudication.time_spent_seconds += time_increment(adjudication, batch, now)
        AdjudicatedJudgement.objects.filter(adjudication=adjudication).delete()
        AdjudicatedJudgement.objects.bulk_create(
            [
                AdjudicatedJudgement(
                    adjudication=adjudication,
                    response_id=int(rid),
                    position=position,
                    rank=values[handle].rank,
                    is_correct=values[handle].is_correct,
                    tags=sorted(values[handle].tags),
                    comment=values[handle].comment,
                )
                for position, (handle, rid) in enumerate(
                    zip(adjudication.handles, adjudication.shown_order, strict=True)
                )
            ]
        )
        adjudication.reason = reason.strip()
        adjudication.draft = {}
        adjudication.edited_at = adjudication.edited_at or now
        adjudication.version += 1
        adjudication.updated_at = now
        adjudication.status = Adjudication.Status.SUBMITTED
        adjudication.submitted_at = now
        adjudication.adjudicator_could_unblind = can_unblind(adjudicator)
        adjudication.save()
        _audit(
            adjudication,
            adjudicator,
            request,
            AuditEvent.Action.ADJUDICATION_SUBMITTED,
            time_spent_seconds=adjudication.time_spent_seconds,
            reviews=list(adjudication.reviews.values_list("pk", flat=True)),
        )
        return adjudication_state(adjudication)
