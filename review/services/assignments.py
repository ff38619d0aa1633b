"""Assigning instructions to clinicians, in bulk, with a target overlap per instruction."""

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Count
from django.http import HttpRequest
from django.utils import timezone

from review.access import user_access
from review.models import (
    Assignment,
    AuditEvent,
    Dataset,
    Instruction,
    Review,
    Study,
    StudyResponse,
    User,
)
from review.selectors.quality import known_instruction_ids
from review.selectors.studies import study_current
from review.services.quality import gold_pairs_for, interleave
from review.services.studies import study_first_round

from .audit import audit_record

MAX_OVERLAP = 20


@dataclass
class AssignmentPlan:
    """What ``assignments_create`` would do (or did): new pairs and what could not be met."""

    overlap: int
    instructions: int = 0
    already_full: int = 0  # instructions that already had ``overlap`` clinicians or more
    short: int = 0  # instructions left below ``overlap``: not enough clinicians to choose from
    pairs: list[tuple[int, int]] = field(default_factory=list)  # (instruction id, clinician id)
    per_clinician: dict[str, int] = field(default_factory=dict)  # email -> new assignments
    studies: dict[int, int] = field(default_factory=dict)  # instruction id -> study id
    # Left out because the clinician holds the instruction in another round whose responses
    # this round shares (a copied round): (instruction, clinician) pairs, and instructions.
    repeats_left_out: int = 0
    shared_instructions: int = 0
    # The other rounds those clinicians hold the instructions in (round numbers).
    shared_rounds: list[int] = field(default_factory=list)
    # Gold and calibration items among the instructions: never assigned as ordinary work
    # (review.services.quality mixes gold in, blind).
    known_items: int = 0
    # Gold assignments made beside the new ones (``assignments_create``).
    gold: int = 0

    @property
    def created(self) -> int:
        return len(self.pairs)


def _studies_for(
    instructions: list[Instruction], study: Study | None, actor: User | None, *, create: bool
) -> dict[int, int]:
    """Each instruction's study: ``study`` (instructions of its dataset only), else its
    dataset's latest round (created as "Round 1" if the dataset has none and ``create``; a
    plan alone writes nothing and counts no existing assignment then)."""
    if study is not None:
        stray = [i for i in instructions if i.dataset_id != study.dataset_id]
        if stray:
            raise ValueError(
                f"{len(stray)} instructions are not of {study.dataset.name}, the study's dataset"
            )
        return {i.pk: study.pk for i in instructions}
    by_dataset: dict[int, int] = {}
    for dataset_id in sorted({i.dataset_id for i in instructions}):
        dataset = Dataset.objects.get(pk=dataset_id)
        current = study_first_round(dataset=dataset, actor=actor) if create else None
        current = current or study_current(dataset)
        by_dataset[dataset_id] = current.pk if current is not None else 0
    return {i.pk: by_dataset[i.dataset_id] for i in instructions}


def assignments_plan(
    *,
    instructions: Iterable[Instruction],
    clinicians: Iterable[User],
    overlap: int,
    study: Study | None = None,
    actor: User | None = None,
    create_study: bool = False,
    fresh_only: bool = False,
    repeat_reviewers: bool = False,
) -> AssignmentPlan:
    """Choose clinicians to bring every instruction up to ``overlap`` reviewers. Writes nothing.

    A clinician who holds the instruction in another round whose response set shares a
    response with this round's (a copied round), or where this round has no responses for it
    yet, is not chosen for it unless ``repeat_reviewers``: they would see responses they have
    ranked already, and whatever is new beside them would stand out as the new model's. The
    plan counts the pairs so left out (``repeats_left_out``).

    ``fresh_only`` (adaptive waves) goes further: a clinician who holds the instruction in any
    other round is not chosen for it; a second ranking by the same person is not an
    independent review.

    Assignments belong to a study (``study``, else each instruction's dataset's latest round):
    existing assignments of that study count towards the overlap (whoever holds them), and
    nobody is assigned an instruction twice in one study. Each instruction goes to the
    least-loaded eligible clinicians, load counting every assignment a clinician holds in any
    dataset, ties broken by user id, and
    instructions are taken in id order: the same inputs always give the same plan.

    The demo's simulated clinicians (``User.is_simulated``) are not clinicians: their assignments do
    not count towards the overlap (they review every instruction, so counting them would leave
    nothing for real people) and they are never given new work.
    """
    if not 1 <= overlap <= MAX_OVERLAP:
        raise ValueError(f"overlap must be between 1 and {MAX_OVERLAP}")
    chosen = {i.pk: i for i in instructions}
    instruction_ids = sorted(chosen)
    studies = _studies_for(list(chosen.values()), study, actor, create=create_study)
    people = sorted(
        {c.pk: c for c in clinicians if not c.is_simulated}.values(),
        key=lambda c: c.pk,
    )
    plan = AssignmentPlan(overlap=overlap, instructions=len(instruction_ids), studies=studies)
    known = known_instruction_ids(set(studies.values()))
    if known:
        plan.known_items = sum(1 for i in instruction_ids if (studies[i], i) in known)
        instruction_ids = [i for i in instruction_ids if (studies[i], i) not in known]
    holders: dict[int, set[int]] = defaultdict(set)
    elsewhere: dict[int, set[int]] = defaultdict(set)  # held in another round
    held_elsewhere: list[tuple[int, int, int]] = []
    for instruction_id, clinician_id, study_id in (
        Assignment.objects.filter(instruction_id__in=instruction_ids)
        .exclude(clinician__is_simulated=True)
        .values_list("instruction_id", "clinician_id", "study_id")
    ):
        if studies[instruction_id] == study_id:
            holders[instruction_id].add(clinician_id)
        elif fresh_only:
            elsewhere[instruction_id].add(clinician_id)
        else:
            held_elsewhere.append((instruction_id, clinician_id, study_id))
    # Who would meet responses they have ranked before: (instruction -> clinicians).
    repeats: dict[int, set[int]] = defaultdict(set)
    shared_rounds: set[int] = set()
    if held_elsewhere and not repeat_reviewers:
        sets: dict[tuple[int, int], set[int]] = defaultdict(set)
        for study_id, instruction_id, response_id in StudyResponse.objects.filter(
            instruction_id__in={i for i, _, _ in held_elsewhere}
        ).values_list("study_id", "instruction_id", "response_id"):
            sets[(study_id, instruction_id)].add(response_id)
        for instruction_id, clinician_id, study_id in held_elsewhere:
            here = sets[(studies[instruction_id], instruction_id)]
            # No responses here yet: what joins later may well be the ones they ranked.
            if not here or here & sets[(study_id, instruction_id)]:
                repeats[instruction_id].add(clinician_id)
                shared_rounds.add(study_id)
    chosen_people = {c.pk for c in people}
    load = Counter(
        dict(
            Assignment.objects.filter(clinician__in=people)
            .values("clinician")
            .annotate(n=Count("id"))
            .values_list("clinician", "n")
        )
    )
    new: Counter[int] = Counter()
    for instruction_id in instruction_ids:
        need = overlap - len(holders[instruction_id])
        if need <= 0:
            plan.already_full += 1
            continue
        left_out = (repeats[instruction_id] & chosen_people) - holders[instruction_id]
        if left_out:
            plan.repeats_left_out += len(left_out)
            plan.shared_instructions += 1
        eligible = [
            c
            for c in people
            if c.pk not in holders[instruction_id]
            and c.pk not in elsewhere[instruction_id]
            and c.pk not in left_out
        ]
        eligible.sort(key=lambda c: (load[c.pk], c.pk))
        for clinician in eligible[:need]:
            plan.pairs.append((instruction_id, clinician.pk))
            holders[instruction_id].add(clinician.pk)
            load[clinician.pk] += 1
            new[clinician.pk] += 1
        if len(holders[instruction_id]) < overlap:
            plan.short += 1
    plan.per_clinician = {c.email: new[c.pk] for c in people}
    plan.shared_rounds = sorted(
        Study.objects.filter(pk__in=shared_rounds).values_list("round", flat=True)
    )
    return plan


@transaction.atomic
def assignments_create(
    *,
    instructions: Iterable[Instruction],
    clinicians: Iterable[User],
    overlap: int,
    actor: User | None,
    study: Study | None = None,
    adaptive_wave: bool = False,
    fresh_only: bool = False,
    repeat_reviewers: bool = False,
) -> AssignmentPlan:
    """Top every instruction up to ``overlap`` clinicians of its study, balanced; audited.

    An adaptive study is assigned only by its waves (``review.services.adaptive`` passes
    ``adaptive_wave``): an assignment outside them would have no known probability.

    The unique (study, instruction, clinician) constraint is the last line of defence against a
    concurrent run: a pair another admin created meanwhile is skipped, not duplicated.
    """
    plan = assignments_plan(
        instructions=instructions,
        clinicians=clinicians,
        overlap=overlap,
        study=study,
        actor=actor,
        create_study=True,
        fresh_only=fresh_only,
        repeat_reviewers=repeat_reviewers,
    )
    if (
        not adaptive_wave
        and Study.objects.filter(
            pk__in=set(plan.studies.values()), assignment_mode=Study.AssignmentMode.ADAPTIVE
        ).exists()
    ):
        raise AssignmentError(
            "This study is assigned adaptively: its instructions go out in waves, from its "
            "studies page or 'manage.py assign'."
        )
    # One creation time for the batch, and gold (if the study mixes it in) at random places
    # among the new work: nothing in when or where an assignment arrived sets gold apart.
    now = timezone.now()
    gold = gold_pairs_for(
        (plan.studies[instruction_id], instruction_id, clinician_id)
        for instruction_id, clinician_id in plan.pairs
    )
    plan.gold = len(gold)
    rows = interleave(
        [
            Assignment(
                study_id=plan.studies[instruction_id],
                instruction_id=instruction_id,
                clinician_id=clinician_id,
                assigned_by=actor,
                created_at=now,
            )
            for instruction_id, clinician_id in plan.pairs
        ],
        [
            Assignment(
                study_id=study_id,
                instruction_id=instruction_id,
                clinician_id=clinician_id,
                assigned_by=actor,
                created_at=now,
                purpose=Assignment.Purpose.GOLD,
            )
            for study_id, instruction_id, clinician_id in gold
        ],
    )
    Assignment.objects.bulk_create(rows, batch_size=500, ignore_conflicts=True)
    audit_record(
        action=AuditEvent.Action.ASSIGNMENTS_CREATED,
        actor=actor,
        details={
            "overlap": overlap,
            "studies": sorted(set(plan.studies.values())),
            "instructions": plan.instructions,
            "created": plan.created,
            "already_full": plan.already_full,
            "short": plan.short,
            "repeat_reviewers": repeat_reviewers,
            "repeats_left_out": plan.repeats_left_out,
            "per_clinician": plan.per_clinician,
            # Admins may know; clinicians never see the audit log.
            "gold": plan.gold,
            "known_items_left_out": plan.known_items,
        },
    )
    return plan


class AssignmentError(Exception):
    """An assignment change that would break a rule; the message is for the admin."""


def _check_not_started(assignment: Assignment) -> None:
    # A review (draft or submitted) is the clinician's own work: moving its assignment would
    # show it, comments included, to another clinician and re-attribute it in exports.
    if Review.objects.filter(assignment=assignment).exists():
        raise AssignmentError(
            f"{assignment.clinician.email} has started or submitted this review: it stays "
            "theirs. Assign the instruction to another clinician in addition instead."
        )


@transaction.atomic
def assignment_reassign(
    *,
    assignment: Assignment,
    clinician: User,
    actor: User,
    request: HttpRequest | None = None,
) -> Assignment:
    """Give an assignment nobody has started to another approved clinician; audited."""
    assignment = (
        Assignment.objects.select_for_update().select_related("clinician").get(pk=assignment.pk)
    )
    _check_not_started(assignment)
    if not user_access(clinician).is_clinician:
        raise AssignmentError(f"{clinician.email} has no current clinician access.")
    if Assignment.objects.filter(
        study_id=assignment.study_id, instruction_id=assignment.instruction_id, clinician=clinician
    ).exists():
        raise AssignmentError(f"{clinician.email} already has this instruction.")
    previous = assignment.clinician
    assignment.clinician = clinician
    assignment.assigned_by = actor
    assignment.save(update_fields=["clinician", "assigned_by"])
    audit_record(
        action=AuditEvent.Action.ASSIGNMENT_CHANGED,
        actor=actor,
        request=request,
        obj=assignment,
        instruction_id=assignment.instruction.instruction_id,
        details={"change": "reassigned", "from": previous.email, "to": clinician.email},
    )
    return assignment


@transaction.atomic
def assignment_delete(
    *, assignment: Assignment, actor: User, request: HttpRequest | None = None
) -> None:
    """Withdraw an assignment nobody has started; audited."""
    assignment = (
        Assignment.objects.select_for_update().select_related("clinician").get(pk=assignment.pk)
    )
    _check_not_started(assignment)
    audit_record(
        action=AuditEvent.Action.ASSIGNMENT_CHANGED,
        actor=actor,
        request=request,
        obj=assignment,
        instruction_id=assignment.instruction.instruction_id,
        details={"change": "withdrawn", "clinician": assignment.clinician.email},
    )
    assignment.delete()
