"""Clinicians grading responses against an accepted rubric: assigning, starting, autosaving,
submitting. Every state change of a ``CriterionGrading`` happens here.

The save protocol is the review page's (``review.services.reviews``), so the same guarantees
hold: the browser sends edits ``{"handle", "field": "c<criterion id>", "value": true | false |
null, "at"}``; they merge into ``CriterionGrading.draft`` per (response, criterion), the later
edit winning, so resending is always safe; submit carries the final edits itself and is
idempotent (again with nothing new: the same answer; with edits the submitted grading lacks:
``read_only`` naming them). ``CriterionGrade`` rows are written at submit only, each naming the
rubric version; the errors are the review page's, so the page handles them the same way.
"""

from typing import Any

from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone

from review.access import unblinding_roles
from review.models import (
    AuditEvent,
    CriterionGrade,
    CriterionGrading,
    Rubric,
    Study,
    StudyResponse,
    User,
)
from review.models.reviews import new_handle
from review.selectors.drafts import criterion_ids, grading_values

from .audit import audit_record
from .reviews import (
    EDIT_KEYS,
    MAX_SECONDS_PER_SAVE,
    SAVE_AUDIT_INTERVAL,
    SECONDS_SLACK,
    Edit,
    EditBatch,
    IncompleteReview,
    InvalidReview,
    ReviewError,
    ReviewReadOnly,
    _int,
    batch_envelope,
    draft_merge,
    shown_order_for,
)
from .rubrics import RubricError


# --- assigning and starting ------------------------------------------------------------------
@transaction.atomic
def gradings_assign(
    *,
    rubric: Rubric,
    study: Study,
    clinicians: list[User],
    actor: User | None,
    request: HttpRequest | None = None,
) -> list[CriterionGrading]:
    """Ask each clinician to grade the study's responses to the rubric's instruction against
    this accepted version. A clinician already asked is not asked twice."""
    if rubric.status != Rubric.Status.ACCEPTED:
        raise RubricError("only an accepted rubric is graded; a second clinician accepts it first")
    if study.dataset_id != rubric.instruction.dataset_id:
        raise RubricError("the study is of another dataset")
    # Blind like ranking: an account with researcher, admin or staff access can map responses
    # to models (exports, the studies pages, the Django admin). Ranking keeps such reviews out
    # of reports; grading does not take them at all.
    unblinded = sorted(
        f"{c.email} ({', '.join(roles)})" for c in clinicians if (roles := unblinding_roles(c))
    )
    if unblinded:
        raise RubricError(
            f"{'; '.join(unblinded)}: can see model names through researcher, admin or staff "
            "access; grading is blind, ask clinicians without it"
        )
    created = []
    for clinician in clinicians:
        try:
            with transaction.atomic():
                created.append(
                    CriterionGrading.objects.create(
                        study=study,
                        instruction=rubric.instruction,
                        rubric=rubric,
                        clinician=clinician,
                        assigned_by=actor,
                    )
                )
        except IntegrityError:
            continue
    instruction = rubric.instruction
    audit_record(
        action=AuditEvent.Action.ASSIGNMENTS_CREATED,
        actor=actor,
        request=request,
        obj=rubric,
        person_id=instruction.person_id,
        instruction_id=instruction.instruction_id,
        details={"kind": "grading", "version": rubric.version, "created": len(created)},
    )
    return created


def grading_get_or_start(grading: CriterionGrading) -> CriterionGrading:
    """The grading, its responses' order drawn (CSPRNG, stored) the first time it shows any."""
    if grading.shown_order or grading.status != CriterionGrading.Status.DRAFT:
        return grading
    with transaction.atomic():
        grading = CriterionGrading.objects.select_for_update().get(pk=grading.pk)
        if not grading.shown_order:
            ids = list(
                StudyResponse.objects.filter(
                    study_id=grading.study_id, instruction_id=grading.instruction_id
                ).values_list("response_id", flat=True)
            )
            order = shown_order_for(ids)
            grading.shown_order = order
            grading.handles = [new_handle() for _ in order]
            grading.started_at = timezone.now()
            grading.save(update_fields=["shown_order", "handles", "started_at"])
    return grading


# --- validating and merging ------------------------------------------------------------------
def grading_validate(
    grading: CriterionGrading, payload: Any, *, criteria: list[int] | None = None
) -> EditBatch:
    """Check an edit batch against the grading; InvalidReview naming the first problem."""
    envelope = batch_envelope(payload)
    items, tab, seq, active = envelope.items, envelope.tab, envelope.seq, envelope.active_seconds
    handles = set(grading.handles)
    fields = {f"c{cid}" for cid in (criteria if criteria is not None else criterion_ids(grading))}
    now_ms = int(timezone.now().timestamp() * 1000)
    edits = []
    for i, item in enumerate(items):
        where = f"edits[{i}]"
        if not isinstance(item, dict) or set(item) - EDIT_KEYS:
            raise InvalidReview(f"{where} has unknown fields", field=where)
        handle, field = item.get("handle"), item.get("field")
        if not isinstance(handle, str) or handle not in handles:  # a list is unhashable
            raise InvalidReview(f"{where}.handle is not a response of this grading", field=where)
        if not isinstance(field, str) or field not in fields:
            raise InvalidReview(f"{where}.field is not a criterion of this rubric", field=where)
        if "value" not in item:
            raise InvalidReview(f"{where}.value is missing", field=where)
        value = item["value"]
        if value is not None and type(value) is not bool:
            raise InvalidReview(f"{where}.value must be true, false or null", field=where)
        at = min(_int(item.get("at"), f"{where}.at"), now_ms)
        edits.append(Edit(key=f"{item['handle']}.{item['field']}", value=value, at=at))
    return EditBatch(edits=edits, tab=tab, seq=seq, active_seconds=active)


def grading_state(grading: CriterionGrading) -> dict[str, Any]:
    """What save and submit answer with: the status and the draft's current values."""
    return {
        "grading": grading.pk,
        "status": grading.status,
        "version": grading.version,
        "submitted_at": grading.submitted_at.isoformat() if grading.submitted_at else None,
        "time_spent_seconds": grading.time_spent_seconds,
        "draft": {key: pair[0] for key, pair in grading.draft.get("fields", {}).items()},
    }


def _read_only(grading: CriterionGrading, batch: EditBatch) -> ReviewReadOnly:
    current = grading_values(grading)
    unapplied = sorted({e.key for e in batch.edits if current.get(e.key) != e.value})
    when = timezone.localtime(grading.submitted_at).strftime("%-d %b %Y, %H:%M")
    return ReviewReadOnly(
        f"This grading was submitted on {when}, so it takes no more changes",
        extra={"unapplied": unapplied, "state": grading_state(grading)},
    )


def _time_increment(grading: CriterionGrading, batch: EditBatch, now: Any) -> int:
    # As for reviews: never more than the wall-clock time since the last save (plus slack),
    # nor in total more than the time since the grading started.
    elapsed = (now - grading.updated_at).total_seconds() + SECONDS_SLACK
    started = grading.started_at or grading.created_at
    left = int((now - started).total_seconds()) - grading.time_spent_seconds
    return max(0, min(batch.active_seconds, MAX_SECONDS_PER_SAVE, int(elapsed), left))


def _locked(grading_id: int, clinician: User) -> CriterionGrading:
    grading = (
        CriterionGrading.objects.select_for_update(of=("self",))
        .select_related("instruction", "rubric")
        .filter(pk=grading_id, clinician=clinician)
        .first()
    )
    if grading is None:
        raise CriterionGrading.DoesNotExist
    if roles := unblinding_roles(clinician):
        # Assigned while blind, given researcher or admin access since: the exports or the
        # admin pages now map responses to models, so verdicts made from here on could follow
        # the model. Refused, with the reason.
        raise GradingUnblinded(
            f"Your account now also holds {' and '.join(roles)} access (it can see model "
            "names), so it can no longer grade blind: ask an admin to give this grading to "
            "another clinician."
        )
    return grading


class GradingUnblinded(ReviewError):
    status = 403
    code = "unblinded"


def _audit(
    grading: CriterionGrading, action: str, clinician: User, request: HttpRequest | None
) -> None:
    audit_record(
        action=action,
        actor=clinician,
        request=request,
        obj=grading,
        person_id=grading.instruction.person_id,
        instruction_id=grading.instruction.instruction_id,
        details={"version": grading.version, "rubric_version": grading.rubric.version},
    )


# --- writing ---------------------------------------------------------------------------------
@transaction.atomic
def grading_save_draft(
    *,
    grading_id: int,
    clinician: User,
    payload: Any,
    request: HttpRequest | None = None,
) -> dict[str, Any]:
    """Merge an edit batch into the grading's draft (under the row's lock: a save is short)."""
    grading = _locked(grading_id, clinician)
    batch = grading_validate(grading, payload)
    if not grading.is_editable:
        raise _read_only(grading, batch)
    if not batch.edits and not batch.active_seconds:
        return grading_state(grading)
    draft, changed, count_time = draft_merge(grading.draft, batch)
    now = timezone.now()
    if count_time:
        grading.time_spent_seconds += _time_increment(grading, batch, now)
    grading.draft = draft
    grading.version += 1
    grading.updated_at = now
    fields = ["draft", "version", "updated_at", "time_spent_seconds"]
    # One audit row a minute at most: autosave fires every few seconds while someone works.
    audit = changed and (
        grading.save_audited_at is None or now - grading.save_audited_at >= SAVE_AUDIT_INTERVAL
    )
    if audit:
        grading.save_audited_at = now
        fields.append("save_audited_at")
    grading.save(update_fields=fields)
    if audit:
        _audit(grading, AuditEvent.Action.GRADING_SAVED, clinician, request)
    return grading_state(grading)


@transaction.atomic
def grading_submit(
    *, grading_id: int, clinician: User, payload: Any, request: HttpRequest | None = None
) -> dict[str, Any]:
    """Apply the final edits and submit: a ``CriterionGrade`` per (response, criterion).

    Submitting again returns the submitted grading when the edits it carries are already in
    it, and ``read_only`` naming them otherwise.
    """
    grading = _locked(grading_id, clinician)
    criteria = criterion_ids(grading)
    batch = grading_validate(grading, payload, criteria=criteria)
    if grading.status == CriterionGrading.Status.SUBMITTED:
        refusal = _read_only(grading, batch)
        if refusal.extra["unapplied"]:
            raise refusal
        return grading_state(grading)
    grading.draft, _changed, count_time = draft_merge(grading.draft, batch)
    values = grading_values(grading, criteria=criteria)
    if not grading.handles:
        raise IncompleteReview("there are no responses to grade yet", field="edits")
    missing = sum(1 for value in values.values() if value is None)
    if missing:
        raise IncompleteReview(
            f"{missing} criterion verdict(s) not marked met or not met yet", field="met"
        )
    now = timezone.now()
    if count_time:
        grading.time_spent_seconds += _time_increment(grading, batch, now)
    CriterionGrade.objects.bulk_create(
        [
            CriterionGrade(
                grading=grading,
                clinician=clinician,
                response_id=int(rid),
                rubric_id=grading.rubric_id,
                criterion_id=cid,
                met=values[f"{handle}.c{cid}"],
                graded_at=now,
            )
            for handle, rid in zip(grading.handles, grading.shown_order, strict=True)
            for cid in criteria
        ]
    )
    grading.draft = {}
    grading.version += 1
    grading.updated_at = grading.submitted_at = now
    grading.status = CriterionGrading.Status.SUBMITTED
    grading.save()
    _audit(grading, AuditEvent.Action.GRADING_SUBMITTED, clinician, request)
    return grading_state(grading)
