"""Writing rubrics: assigning authors and reviewers, saving criteria, submitting, accepting,
sending back and revising. Every status change of a ``Rubric`` happens here (the transitions
are in its docstring), and each is audited (``RUBRIC_CHANGED``, details name the step; never
the criteria's text, which may quote the record).
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.http import HttpRequest
from django.utils import timezone

from review.models import AuditEvent, Criterion, Instruction, Rubric, User
from review.models.rubrics import MAX_POINTS, MIN_POINTS
from review.storable import UNSTORABLE, storable

from .audit import audit_record

MAX_CRITERIA = 100  # HealthBench's conversations carry 11 on average, 48 at most
MAX_CRITERION_CHARS = 2000
MAX_TAGS = 20
MAX_TAG_CHARS = 100
MAX_NOTE_CHARS = 2000
# "axis:accuracy", "theme:emergency_referrals", "level:example": no spaces, a prefix optional.
# Linear with ``re``: anchored, one character class, and only tried on tags of at most
# MAX_TAG_CHARS characters.
TAG_PATTERN = re.compile(r"^[A-Za-z0-9_.:\-/]+$")


class RubricError(Exception):
    """A request a rubric cannot take; ``field`` names what to fix."""

    def __init__(self, message: str, *, field: str = ""):
        super().__init__(message)
        self.message = message
        self.field = field


@dataclass(frozen=True)
class CriterionInput:
    text: str
    points: int
    tags: tuple[str, ...] = ()


def criterion_input(row: Mapping[str, Any], *, where: str = "criterion") -> CriterionInput:
    """One criterion checked: text, points (-10..10, not 0), tags; RubricError otherwise."""
    text = row.get("text", row.get("criterion"))
    if not isinstance(text, str) or not text.strip():
        raise RubricError(f"{where}: the criterion needs its text", field="text")
    text = text.strip()
    # PostgreSQL refuses NUL in text (a 500 there), and a lone surrogate cannot be stored as
    # UTF-8: both are refused here, named, wherever the criterion came from (page or JSONL).
    if "\x00" in text or any("\ud800" <= ch <= "\udfff" for ch in text):
        raise RubricError(
            f"{where}: the text holds a character that cannot be stored", field="text"
        )
    if len(text) > MAX_CRITERION_CHARS:
        raise RubricError(
            f"{where}: the text is longer than {MAX_CRITERION_CHARS} characters", field="text"
        )
    points = row.get("points")
    if isinstance(points, float) and points.is_integer():
        points = int(points)  # HealthBench's files write 5.0 as often as 5
    if type(points) is not int or not MIN_POINTS <= points <= MAX_POINTS or points == 0:
        raise RubricError(
            f"{where}: points must be a whole number from {MIN_POINTS} to {MAX_POINTS}, not 0",
            field="points",
        )
    tags = row.get("tags", [])
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    if (
        not isinstance(tags, list | tuple)
        or len(tags) > MAX_TAGS
        or not all(
            isinstance(t, str) and len(t) <= MAX_TAG_CHARS and TAG_PATTERN.match(t) for t in tags
        )
    ):
        raise RubricError(
            f"{where}: tags are words without spaces such as axis:accuracy, at most {MAX_TAGS}",
            field="tags",
        )
    return CriterionInput(text=text, points=points, tags=tuple(dict.fromkeys(tags)))


def criteria_inputs(rows: Iterable[Mapping[str, Any]]) -> list[CriterionInput]:
    out = [criterion_input(row, where=f"criterion {i + 1}") for i, row in enumerate(rows)]
    if len(out) > MAX_CRITERIA:
        raise RubricError(f"a rubric holds at most {MAX_CRITERIA} criteria", field="criteria")
    return out


def _audit(
    rubric: Rubric, actor: User | None, step: str, request: HttpRequest | None, **details: Any
) -> None:
    instruction = rubric.instruction
    audit_record(
        action=AuditEvent.Action.RUBRIC_CHANGED,
        actor=actor,
        request=request,
        obj=rubric,
        person_id=instruction.person_id,
        instruction_id=instruction.instruction_id,
        details={"step": step, "version": rubric.version, "status": rubric.status} | details,
    )


def _write_criteria(rubric: Rubric, criteria: list[CriterionInput]) -> None:
    rubric.criteria.all().delete()
    Criterion.objects.bulk_create(
        [
            Criterion(rubric=rubric, order=i, text=c.text, points=c.points, tags=list(c.tags))
            for i, c in enumerate(criteria)
        ]
    )


def _locked(rubric: Rubric) -> Rubric:
    return Rubric.objects.select_for_update().select_related("instruction").get(pk=rubric.pk)


def _check_reviewer(author: User | None, reviewer: User | None) -> None:
    if reviewer is not None and author is not None and reviewer.pk == author.pk:
        raise RubricError(
            "the reviewer must be a second clinician, not the author", field="reviewer"
        )


# --- assigning --------------------------------------------------------------------------------
@transaction.atomic
def rubric_assign(
    *,
    instruction: Instruction,
    author: User,
    reviewer: User | None = None,
    actor: User | None,
    request: HttpRequest | None = None,
) -> Rubric:
    """Ask ``author`` to write the instruction's next rubric version (the authoring
    assignment), optionally naming its reviewer. The draft starts as a copy of the latest
    accepted version, so revising keeps what was agreed. RubricError if a version is open."""
    _check_reviewer(author, reviewer)
    Instruction.objects.select_for_update().filter(pk=instruction.pk).first()
    versions = Rubric.objects.filter(instruction=instruction)
    if versions.exclude(status=Rubric.Status.ACCEPTED).exists():
        raise RubricError("this instruction already has a rubric being written or reviewed")
    latest = versions.filter(status=Rubric.Status.ACCEPTED).order_by("-version").first()
    number = (versions.aggregate(n=Max("version"))["n"] or 0) + 1
    try:
        rubric = Rubric.objects.create(
            instruction=instruction,
            version=number,
            author=author,
            reviewer=reviewer,
            assigned_by=actor,
        )
    except IntegrityError:
        raise RubricError("this instruction already has a rubric being written") from None
    if latest is not None:
        _write_criteria(
            rubric,
            [CriterionInput(c.text, c.points, tuple(c.tags)) for c in latest.criteria.all()],
        )
    _audit(rubric, actor, "assigned", request, author=author.pk, reviewer=_pk(reviewer))
    return rubric


def _pk(user: User | None) -> int | None:
    return user.pk if user is not None else None


@transaction.atomic
def rubric_set_reviewer(
    *, rubric: Rubric, reviewer: User, actor: User | None, request: HttpRequest | None = None
) -> Rubric:
    """Name (or change) the second clinician who reviews an open version."""
    rubric = _locked(rubric)
    if rubric.status == Rubric.Status.ACCEPTED:
        raise RubricError("an accepted rubric is not reviewed again; revise it instead")
    _check_reviewer(rubric.author, reviewer)
    rubric.reviewer = reviewer
    rubric.updated_at = timezone.now()
    rubric.save(update_fields=["reviewer", "updated_at"])
    _audit(rubric, actor, "reviewer_set", request, reviewer=reviewer.pk)
    return rubric


# --- the author -------------------------------------------------------------------------------
AUTHOR_EDITABLE = (Rubric.Status.DRAFT, Rubric.Status.SENT_BACK)


@transaction.atomic
def rubric_save_criteria(
    *,
    rubric: Rubric,
    actor: User,
    criteria: list[CriterionInput],
    request: HttpRequest | None = None,
) -> Rubric:
    """Replace an open version's criteria: the author's while it is a draft or sent back, the
    reviewer's while it is in review (recorded as the reviewer's edit)."""
    rubric = _locked(rubric)
    if rubric.status in AUTHOR_EDITABLE and actor.pk == rubric.author_id:
        step = "criteria_saved"
    elif rubric.status == Rubric.Status.IN_REVIEW and actor.pk == rubric.reviewer_id:
        step = "reviewer_edited"
        rubric.reviewer_edited = True
    else:
        raise RubricError("this rubric cannot be edited now")
    if len(criteria) > MAX_CRITERIA:
        raise RubricError(f"a rubric holds at most {MAX_CRITERIA} criteria", field="criteria")
    _write_criteria(rubric, criteria)
    rubric.updated_at = timezone.now()
    rubric.save(update_fields=["reviewer_edited", "updated_at"])
    _audit(rubric, actor, step, request, criteria=len(criteria))
    return rubric


def _check_usable(rubric: Rubric) -> None:
    points = list(rubric.criteria.values_list("points", flat=True))
    if not points:
        raise RubricError("write at least one criterion first", field="criteria")
    if not any(p > 0 for p in points):
        # A response's score is points met over the positive points: none, and no score exists.
        raise RubricError("at least one criterion must be worth positive points", field="points")


@transaction.atomic
def rubric_submit(*, rubric: Rubric, actor: User, request: HttpRequest | None = None) -> Rubric:
    """The author sends the version for review. Again after it was submitted: no change."""
    rubric = _locked(rubric)
    if actor.pk != rubric.author_id:
        raise RubricError("only the author submits a rubric")
    if rubric.status == Rubric.Status.IN_REVIEW:
        return rubric
    if rubric.status not in AUTHOR_EDITABLE:
        raise RubricError("this rubric was already accepted")
    _check_usable(rubric)
    now = timezone.now()
    rubric.status = Rubric.Status.IN_REVIEW
    rubric.submitted_at = rubric.updated_at = now
    rubric.save(update_fields=["status", "submitted_at", "updated_at"])
    _audit(rubric, actor, "submitted", request)
    return rubric


# --- the second clinician ---------------------------------------------------------------------
def _check_note(note: str, *, required: bool) -> str:
    note = (note or "").strip()
    if required and not note:
        raise RubricError("say what the author should change", field="note")
    if not storable(note):
        raise RubricError(f"the note {UNSTORABLE}", field="note")
    if len(note) > MAX_NOTE_CHARS:
        raise RubricError(f"the note is longer than {MAX_NOTE_CHARS} characters", field="note")
    return note


def _check_is_reviewer(rubric: Rubric, actor: User) -> None:
    if actor.pk == rubric.author_id:
        raise RubricError("a second clinician reviews the rubric, not its author")
    if actor.pk != rubric.reviewer_id:
        raise RubricError("only the rubric's assigned reviewer reviews it")


@transaction.atomic
def rubric_accept(
    *, rubric: Rubric, actor: User, note: str = "", request: HttpRequest | None = None
) -> Rubric:
    """The reviewer accepts the version: from now on it is frozen and may be graded.
    Accepting again is a no-op."""
    rubric = _locked(rubric)
    _check_is_reviewer(rubric, actor)
    if rubric.status == Rubric.Status.ACCEPTED:
        return rubric
    if rubric.status != Rubric.Status.IN_REVIEW:
        raise RubricError("only a rubric in review can be accepted")
    _check_usable(rubric)
    now = timezone.now()
    rubric.status = Rubric.Status.ACCEPTED
    rubric.review_note = _check_note(note, required=False)
    rubric.reviewed_at = rubric.updated_at = now
    rubric.save(update_fields=["status", "review_note", "reviewed_at", "updated_at"])
    _audit(rubric, actor, "accepted", request, reviewer_edited=rubric.reviewer_edited)
    return rubric


@transaction.atomic
def rubric_send_back(
    *, rubric: Rubric, actor: User, note: str, request: HttpRequest | None = None
) -> Rubric:
    """The reviewer returns the version to its author, saying why."""
    rubric = _locked(rubric)
    _check_is_reviewer(rubric, actor)
    if rubric.status == Rubric.Status.SENT_BACK:
        return rubric
    if rubric.status != Rubric.Status.IN_REVIEW:
        raise RubricError("only a rubric in review can be sent back")
    now = timezone.now()
    rubric.status = Rubric.Status.SENT_BACK
    rubric.review_note = _check_note(note, required=True)
    rubric.reviewed_at = rubric.updated_at = now
    rubric.save(update_fields=["status", "review_note", "reviewed_at", "updated_at"])
    _audit(rubric, actor, "sent_back", request)
    return rubric
