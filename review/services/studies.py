"""Studies and their response sets: every change an admin makes, each one audited step.

The rules (``review.models.studies``):
- responses join a study only here: an import's, a completed generation run's, or one
  model's; never a failed or unfinished generation run's (``register_candidate_check``:
  ``scoring.generation.study`` checks every response's run);
- once an instruction has a review in a study, its response set never changes: a change that
  would touch a started instruction is refused whole, naming how many have started, since a
  model that joins only some instructions would confound the comparison of models;
- a retired candidate never joins; retiring keeps its scores.
"""

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import F, Max
from django.http import HttpRequest
from django.utils import timezone

from review.models import AuditEvent, Dataset, ModelResponse, Study, StudyResponse, User
from review.selectors.studies import study_current, study_started_instruction_ids

from .audit import audit_record


class StudyError(Exception):
    """A change to a study that would break its design; the message is for the admin."""


# Checks another app adds for responses it produced (``scoring.generation`` refuses the output
# of a failed or unfinished generation run): each returns a refusal for the admin, or "".
CandidateCheck = Callable[[list[ModelResponse]], str]
_CANDIDATE_CHECKS: list[CandidateCheck] = []


def register_candidate_check(check: CandidateCheck) -> CandidateCheck:
    if check not in _CANDIDATE_CHECKS:
        _CANDIDATE_CHECKS.append(check)
    return check


@dataclass
class StudyChange:
    """What a change did: responses added or removed, per model, and instructions covered."""

    study: Study
    added: int = 0
    removed: int = 0
    already: int = 0
    per_model: dict[str, int] = field(default_factory=dict)
    instructions: int = 0


def study_first_round(*, dataset: Dataset, actor: User | None = None) -> Study:
    """The dataset's latest round, creating "Round 1" if it has none."""
    study = study_current(dataset)
    if study is not None:
        return study
    study, created = Study.objects.get_or_create(
        dataset=dataset, round=1, defaults={"name": "Round 1", "created_by": actor}
    )
    if created:
        audit_record(
            action=AuditEvent.Action.STUDY_CHANGED,
            actor=actor,
            obj=study,
            details={"change": "created", "dataset": dataset.name, "round": 1},
        )
    return study


@transaction.atomic
def study_create(
    *,
    dataset: Dataset,
    name: str,
    actor: User,
    description: str = "",
    copy_responses_from: Study | None = None,
    request: HttpRequest | None = None,
) -> Study:
    """A new round of ``dataset``, empty or with another study's response set as its start."""
    name = name.strip()
    if not name:
        raise StudyError("Name the study (e.g. 'Round 2: with the new model').")
    if copy_responses_from is not None and copy_responses_from.dataset_id != dataset.pk:
        raise StudyError("A study can only start from a study of the same dataset.")
    Dataset.objects.select_for_update().get(pk=dataset.pk)  # one new round at a time
    last = Study.objects.filter(dataset=dataset).aggregate(m=Max("round"))["m"] or 0
    study = Study.objects.create(
        dataset=dataset, round=last + 1, name=name[:120], description=description, created_by=actor
    )
    copied = 0
    if copy_responses_from is not None:
        rows = StudyResponse.objects.filter(study=copy_responses_from).exclude(
            response__retired_at__isnull=False
        )
        copied = len(
            StudyResponse.objects.bulk_create(
                [
                    StudyResponse(
                        study=study,
                        instruction_id=r.instruction_id,
                        response_id=r.response_id,
                        added_by=actor,
                        source=f"copied from {copy_responses_from.name}",
                    )
                    for r in rows
                ],
                batch_size=2000,
            )
        )
    audit_record(
        action=AuditEvent.Action.STUDY_CHANGED,
        actor=actor,
        request=request,
        obj=study,
        details={
            "change": "created",
            "dataset": dataset.name,
            "round": study.round,
            "copied_from": copy_responses_from.pk if copy_responses_from else None,
            "responses": copied,
        },
    )
    return study


def _refuse_started(study: Study, instruction_ids: set[int], verb: str) -> None:
    started = study_started_instruction_ids(study) & instruction_ids
    if started:
        raise StudyError(
            f"{len(started)} of the {len(instruction_ids)} instructions this would {verb} have "
            f"reviews in {study.name}: a started instruction's response set never changes. "
            "Create a new round for the new set, with its own assignments."
        )


def _lock_for_set_change(study: Study) -> None:
    """Lock the study's row for a change to its response set, as a new version of the row.

    Starting a review serialises with this: on PostgreSQL it holds the row FOR SHARE while it
    reads the set, in one statement whose snapshot was taken before it waited for this lock
    (review.services.reviews). A lock alone would let a start that waited for this change go on
    with the set as it was before it, and freeze a review without the responses added here. A
    new row version is what such a start sees change, and it then reads the set again.
    """
    if not Study.objects.filter(pk=study.pk).update(created_at=F("created_at")):
        raise Study.DoesNotExist


@transaction.atomic
def study_add_responses(
    *,
    study: Study,
    responses: Iterable[ModelResponse],
    source: str,
    actor: User | None,
    request: HttpRequest | None = None,
) -> StudyChange:
    """Add ``responses`` (of the study's dataset, none retired) to the study's response set.

    All or nothing: refused if any response is retired, of another dataset, or for an
    instruction whose reviews in this study have started. Responses already in the set are
    counted, not added twice."""
    _lock_for_set_change(study)
    chosen = list(responses)
    change = StudyChange(study=study)
    if not chosen:
        return change
    wrong = [r for r in chosen if r.instruction.dataset_id != study.dataset_id]
    if wrong:
        raise StudyError(f"{len(wrong)} responses belong to another dataset than {study}.")
    retired = [r for r in chosen if r.retired_at is not None]
    if retired:
        raise StudyError(
            f"{len(retired)} of these responses were retired ({retired[0].model_name}…): "
            "a retired candidate never joins a study."
        )
    for check in _CANDIDATE_CHECKS:
        refusal = check(chosen)
        if refusal:
            raise StudyError(refusal)
    _refuse_started(study, {r.instruction_id for r in chosen}, "change")
    present = set(
        StudyResponse.objects.filter(study=study, response__in=chosen).values_list(
            "response_id", flat=True
        )
    )
    new = [r for r in chosen if r.pk not in present]
    StudyResponse.objects.bulk_create(
        [
            StudyResponse(
                study=study,
                instruction_id=r.instruction_id,
                response=r,
                added_by=actor,
                source=source[:200],
            )
            for r in new
        ],
        batch_size=2000,
    )
    change.added = len(new)
    change.already = len(present)
    change.per_model = dict(Counter(r.model_name for r in new))
    change.instructions = len({r.instruction_id for r in chosen})
    audit_record(
        action=AuditEvent.Action.STUDY_CHANGED,
        actor=actor,
        request=request,
        obj=study,
        details={
            "change": "responses added",
            "source": source[:200],
            "added": change.added,
            "already": change.already,
            "per_model": change.per_model,
            "instructions": change.instructions,
        },
    )
    return change


@transaction.atomic
def study_remove_model(
    *, study: Study, model_name: str, actor: User, request: HttpRequest | None = None
) -> StudyChange:
    """Take one model's responses out of a study nobody has started on those instructions."""
    _lock_for_set_change(study)
    rows = StudyResponse.objects.filter(study=study, response__model_name=model_name)
    _refuse_started(study, set(rows.values_list("instruction_id", flat=True)), "change")
    removed, _ = rows.delete()
    change = StudyChange(study=study, removed=removed, per_model={model_name: removed})
    audit_record(
        action=AuditEvent.Action.STUDY_CHANGED,
        actor=actor,
        request=request,
        obj=study,
        details={"change": "model removed", "model": model_name, "removed": removed},
    )
    return change


@transaction.atomic
def responses_retire(
    *, responses: Iterable[ModelResponse], actor: User, request: HttpRequest | None = None
) -> int:
    """Retire candidates: they never join a study; their scores stay. A response in a study is
    part of that study's design and is refused (take it out of the study first, if no review
    has started)."""
    chosen = [r for r in responses if r.retired_at is None]
    in_study = StudyResponse.objects.filter(response__in=chosen)
    if in_study.exists():
        n = in_study.values("response_id").distinct().count()
        raise StudyError(
            f"{n} of these responses are in a study's response set: only candidates can be retired."
        )
    ids = [r.pk for r in chosen]
    ModelResponse.objects.filter(pk__in=ids).update(retired_at=timezone.now(), retired_by=actor)
    audit_record(
        action=AuditEvent.Action.STUDY_CHANGED,
        actor=actor,
        request=request,
        details={
            "change": "candidates retired",
            "responses": len(ids),
            "per_model": dict(Counter(r.model_name for r in chosen)),
        },
    )
    return len(ids)
