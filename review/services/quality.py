"""Writes for reviewing quality: a study's quality settings, gold and calibration items,
calibration assignments, gold mixed into queues, and clinicians' exclusions. Every change is
audited.

Gold is blind. A gold assignment is an ordinary assignment of the same study (the same page, the
same handles, the same CSPRNG order when it opens); it is only ever made beside the regular
assignments an admin makes (``assignments_create``), at a random place among them and with the
same creation time, so neither the queue's order nor when work arrived sets it apart.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone
from scipy.stats import rankdata

from review.access import user_access
from review.models import (
    Assignment,
    AuditEvent,
    ClinicianExclusion,
    GoldItem,
    GoldJudgement,
    Instruction,
    ModelResponse,
    QualityPolicy,
    Review,
    Study,
    StudyResponse,
    User,
)
from review.selectors.quality import (
    gold_items_available,
    held_instruction_ids,
    purpose_counts,
    quality_policy,
)

from .audit import audit_record

MAX_GOLD_RATE = 0.5
MAX_REASON_CHARS = 2000
RELEASE_REASON = "The release's own clinicians judged these responses (binary_correct, model_rank)."
_CSPRNG = secrets.SystemRandom()


class QualityError(Exception):
    """A quality change that would break a rule; the message is for the admin."""


def _reason(reason: str, *, what: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise QualityError(f"Give a reason for {what}: it is recorded and shown in reports.")
    if len(reason) > MAX_REASON_CHARS:
        raise QualityError(f"The reason is longer than {MAX_REASON_CHARS} characters.")
    return reason


# --- settings ----------------------------------------------------------------------------------
@transaction.atomic
def quality_policy_set(
    *,
    study: Study,
    gold_rate: float,
    adjudication_tau: float,
    drift_window: int,
    actor: User,
    request: HttpRequest | None = None,
) -> QualityPolicy:
    """Set the share of gold in clinicians' queues, the tau below which two rankings
    disagree, and the drift signal's window."""
    if not 0.0 <= gold_rate <= MAX_GOLD_RATE:
        raise QualityError(f"The gold rate is a share from 0 to {MAX_GOLD_RATE:g}.")
    if not -1.0 <= adjudication_tau <= 1.0:
        raise QualityError("The tau threshold is from -1 to 1.")
    if not 2 <= drift_window <= 500:
        raise QualityError("The drift window is from 2 to 500 reviews.")
    before = quality_policy(study)
    old = (before.gold_rate, before.adjudication_tau, before.drift_window)
    policy, _ = QualityPolicy.objects.update_or_create(
        study=study,
        defaults={
            "gold_rate": float(gold_rate),
            "adjudication_tau": float(adjudication_tau),
            "drift_window": int(drift_window),
            "updated_by": actor,
            "updated_at": timezone.now(),
        },
    )
    audit_record(
        action=AuditEvent.Action.QUALITY_POLICY_CHANGED,
        actor=actor,
        request=request,
        obj=study,
        details={
            "before": {"gold_rate": old[0], "adjudication_tau": old[1], "drift_window": old[2]},
            "after": {
                "gold_rate": policy.gold_rate,
                "adjudication_tau": policy.adjudication_tau,
                "drift_window": policy.drift_window,
            },
        },
    )
    return policy


# --- gold and calibration items ----------------------------------------------------------------
Judgements = Mapping[int, tuple[int | None, bool | None]]  # response id -> (rank, correct)


def _set_ids(study: Study, instruction: Instruction) -> set[int]:
    return set(
        StudyResponse.objects.filter(study=study, instruction=instruction).values_list(
            "response_id", flat=True
        )
    )


@transaction.atomic
def gold_item_set(
    *,
    study: Study,
    instruction: Instruction,
    use: str,
    source: str,
    judgements: Judgements,
    reason: str,
    actor: User,
    senior: User | None = None,
    request: HttpRequest | None = None,
) -> GoldItem:
    """Make an instruction of the study a gold or calibration item with a reference judgement
    of every response of its set (each marked correct or incorrect; ranks where known), or
    change an item's reference. A senior clinician's reference names them and says why."""
    if use not in GoldItem.Use.values or source not in GoldItem.Source.values:
        raise QualityError("Choose what the item is for and where its reference comes from.")
    if instruction.dataset_id != study.dataset_id:
        raise QualityError("The instruction is not of the study's dataset.")
    if study.assignment_mode == Study.AssignmentMode.ADAPTIVE:
        # Its instructions are reviewed with recorded probabilities, and its estimates weigh
        # every review by them: an item reviewed outside that design would bias them.
        raise QualityError(
            f"{study.name} is assigned adaptively: gold and calibration items belong to a "
            "uniform round."
        )
    if source == GoldItem.Source.SENIOR:
        reason = _reason(reason, what="a senior clinician's reference")
        if senior is None or not user_access(senior).has("clinician", "adjudicator"):
            raise QualityError("Name the senior clinician (an account with clinician access).")
    response_ids = _set_ids(study, instruction)
    if not response_ids:
        raise QualityError(f"#{instruction.instruction_id} has no responses in {study.name}.")
    if set(judgements) != response_ids:
        raise QualityError("Give the reference of every response of the instruction's set.")
    if any(correct is None for _rank, correct in judgements.values()):
        raise QualityError("Mark every response correct or incorrect.")
    n = len(response_ids)
    if any(rank is not None and not 1 <= rank <= n for rank, _ in judgements.values()):
        raise QualityError(f"Ranks go from 1 (best) to {n}.")
    item = GoldItem.objects.select_for_update().filter(study=study, instruction=instruction).first()
    change = "created" if item is None else "reference changed"
    if item is not None and item.use != use:
        used = Assignment.objects.filter(
            study=study, instruction=instruction, purpose=item.use
        ).exists()
        if used:
            raise QualityError(
                f"#{instruction.instruction_id} is already assigned as a {item.use} item: it "
                "keeps that use (a clinician who calibrated on it knows its answer)."
            )
    if item is None:
        item = GoldItem(study=study, instruction=instruction, created_by=actor)
    item.use, item.source, item.reason, item.senior = use, source, reason.strip(), senior
    item.retired_at = None
    item.save()
    GoldJudgement.objects.filter(item=item).delete()
    GoldJudgement.objects.bulk_create(
        [
            GoldJudgement(item=item, response_id=rid, rank=rank, is_correct=correct)
            for rid, (rank, correct) in sorted(judgements.items())
        ]
    )
    audit_record(
        action=AuditEvent.Action.GOLD_CHANGED,
        actor=actor,
        request=request,
        obj=item,
        instruction_id=instruction.instruction_id,
        details={
            "change": change,
            "study": study.pk,
            "use": use,
            "source": source,
            "senior": senior.pseudonym if senior else None,
            "responses": n,
        },
    )
    return item


def release_judgements(
    study: Study, instruction: Instruction
) -> dict[int, tuple[int | None, bool]]:
    """The release's own verdicts of the instruction's set as a reference, or {} when some
    response of the set has none. The release's ranks (``model_rank``) become ranks 1…n,
    equal ones tied; a response without one gets no rank."""
    rows = list(
        ModelResponse.objects.filter(studies__study=study, instruction=instruction).values_list(
            "id", "release_rank", "release_binary_correct"
        )
    )
    if not rows or any(correct is None for _, _, correct in rows):
        return {}
    ranked = [(rid, rank) for rid, rank, _ in rows if rank is not None]
    ranks = dict(
        zip(
            [rid for rid, _ in ranked],
            rankdata([rank for _, rank in ranked], method="min").astype(int).tolist(),
            strict=True,
        )
    )
    return {rid: (ranks.get(rid), bool(correct)) for rid, _, correct in rows}


@dataclass
class ReleaseItems:
    created: int = 0
    without_labels: int = 0
    already: int = 0


@transaction.atomic
def gold_items_from_release(
    *,
    study: Study,
    instructions: Iterable[Instruction],
    use: str,
    actor: User,
    request: HttpRequest | None = None,
) -> ReleaseItems:
    """Make each instruction whose every response carries the release's verdict an item of
    ``use``, its reference the release's labels. Existing items are left as they are."""
    result = ReleaseItems()
    existing = set(GoldItem.objects.filter(study=study).values_list("instruction_id", flat=True))
    for instruction in instructions:
        if instruction.pk in existing:
            result.already += 1
            continue
        judgements = release_judgements(study, instruction)
        if not judgements:
            result.without_labels += 1
            continue
        gold_item_set(
            study=study,
            instruction=instruction,
            use=use,
            source=GoldItem.Source.RELEASE,
            judgements=judgements,
            reason=RELEASE_REASON,
            actor=actor,
            request=request,
        )
        result.created += 1
    return result


@transaction.atomic
def gold_item_retire(*, item: GoldItem, actor: User, request: HttpRequest | None = None) -> None:
    """No new assignments of the item; the reviews made of it keep their comparison."""
    if item.retired_at is not None:
        return
    item.retired_at = timezone.now()
    item.save(update_fields=["retired_at"])
    audit_record(
        action=AuditEvent.Action.GOLD_CHANGED,
        actor=actor,
        request=request,
        obj=item,
        instruction_id=item.instruction.instruction_id,
        details={"change": "retired", "study": item.study_id, "use": item.use},
    )


# --- assignments -------------------------------------------------------------------------------
def gold_pairs_for(
    new_pairs: Iterable[tuple[int, int, int]],
) -> list[tuple[int, int, int]]:
    """The gold assignments to make beside new regular ones ((study, instruction, clinician)
    each): per study and clinician, enough that gold is the study's ``gold_rate`` share of
    their queue in it, drawn with the CSPRNG among the study's active gold items the clinician
    has never been asked (in any study, for any purpose)."""
    new = Counter((study_id, clinician_id) for study_id, _, clinician_id in new_pairs)
    if not new:
        return []
    study_ids = {s for s, _ in new}
    policies = {p.study_id: p for p in QualityPolicy.objects.filter(study_id__in=study_ids)}
    rated = {s for s in study_ids if s in policies and policies[s].gold_rate > 0}
    if not rated:
        return []
    clinician_ids = {c for s, c in new if s in rated}
    counts = purpose_counts(rated, clinician_ids)
    held = held_instruction_ids(clinician_ids)
    available = {s: gold_items_available(s, use=GoldItem.Use.GOLD) for s in rated}
    out: list[tuple[int, int, int]] = []
    for (study_id, clinician_id), n_new in sorted(new.items()):
        if study_id not in rated:
            continue
        rate = policies[study_id].gold_rate
        regular = counts.get((study_id, clinician_id, Assignment.Purpose.REVIEW), 0) + n_new
        gold = counts.get((study_id, clinician_id, Assignment.Purpose.GOLD), 0)
        # gold / (gold + regular) = rate, rounded half up.
        target = int(rate / (1.0 - rate) * regular + 0.5)
        candidates = [i for i in available[study_id] if i not in held[clinician_id]]
        need = max(0, min(target - gold, len(candidates)))
        for instruction_id in _CSPRNG.sample(candidates, need):
            out.append((study_id, instruction_id, clinician_id))
            held[clinician_id].add(instruction_id)
    return out


def interleave(rows: list[Assignment], extra: list[Assignment]) -> list[Assignment]:
    """``rows`` in their order with each of ``extra`` at a place drawn with the CSPRNG: a
    queue lists assignments by id, so gold lands anywhere among the new work."""
    out = list(rows)
    for row in extra:
        out.insert(_CSPRNG.randrange(len(out) + 1), row)
    return out


@transaction.atomic
def calibration_assign(
    *, study: Study, clinician: User, actor: User, request: HttpRequest | None = None
) -> int:
    """Ask a clinician to review every active calibration item of the study they have not been
    asked yet; their queue lists these first, and each shows its reference once submitted."""
    if not user_access(clinician).is_clinician:
        raise QualityError(f"{clinician.email} has no current clinician access.")
    items = gold_items_available(study.pk, use=GoldItem.Use.CALIBRATION)
    if not items:
        raise QualityError(f"{study.name} has no calibration items yet.")
    held = held_instruction_ids({clinician.pk})[clinician.pk]
    todo = [i for i in items if i not in held]
    now = timezone.now()
    Assignment.objects.bulk_create(
        [
            Assignment(
                study=study,
                instruction_id=instruction_id,
                clinician=clinician,
                assigned_by=actor,
                created_at=now,
                purpose=Assignment.Purpose.CALIBRATION,
            )
            for instruction_id in todo
        ],
        ignore_conflicts=True,
    )
    audit_record(
        action=AuditEvent.Action.ASSIGNMENTS_CREATED,
        actor=actor,
        request=request,
        obj=study,
        details={
            "purpose": "calibration",
            "clinician": clinician.pseudonym,
            "created": len(todo),
            "already": len(items) - len(todo),
        },
    )
    return len(todo)


# --- exclusions --------------------------------------------------------------------------------
@transaction.atomic
def clinician_exclude(
    *,
    study: Study,
    clinician: User,
    reason: str,
    actor: User,
    request: HttpRequest | None = None,
) -> ClinicianExclusion:
    """Leave a clinician's reviews of the study out of its reports, saying why. An admin's
    decision only: no figure excludes anyone by itself."""
    reason = _reason(reason, what="leaving a clinician's reviews out")
    if ClinicianExclusion.objects.filter(
        study=study, clinician=clinician, lifted_at__isnull=True
    ).exists():
        raise QualityError(f"{clinician.email}'s reviews are already left out of {study.name}.")
    exclusion = ClinicianExclusion.objects.create(
        study=study, clinician=clinician, reason=reason, excluded_by=actor
    )
    reviews = Review.objects.filter(
        assignment__study=study, assignment__clinician=clinician, status=Review.Status.SUBMITTED
    ).count()
    audit_record(
        action=AuditEvent.Action.CLINICIAN_EXCLUDED,
        actor=actor,
        request=request,
        obj=exclusion,
        details={
            "study": study.pk,
            "clinician": clinician.pseudonym,
            "reason": reason,
            "submitted_reviews": reviews,
        },
    )
    return exclusion


@transaction.atomic
def clinician_readmit(
    *,
    exclusion: ClinicianExclusion,
    reason: str,
    actor: User,
    request: HttpRequest | None = None,
) -> ClinicianExclusion:
    """Bring a clinician's reviews back into the study's reports, saying why."""
    reason = _reason(reason, what="bringing the reviews back")
    exclusion = ClinicianExclusion.objects.select_for_update().get(pk=exclusion.pk)
    if exclusion.lifted_at is not None:
        raise QualityError("That exclusion was already lifted.")
    exclusion.lifted_at = timezone.now()
    exclusion.lifted_by = actor
    exclusion.lift_reason = reason
    exclusion.save(update_fields=["lifted_at", "lifted_by", "lift_reason"])
    audit_record(
        action=AuditEvent.Action.CLINICIAN_READMITTED,
        actor=actor,
        request=request,
        obj=exclusion,
        details={
            "study": exclusion.study_id,
            "clinician": exclusion.clinician.pseudonym,
            "reason": reason,
        },
    )
    return exclusion
