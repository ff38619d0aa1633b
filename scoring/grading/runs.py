"""Grading runs: a model grades a dataset's responses against their instructions' rubrics.

The rubric graded is the latest *accepted* version of each instruction's rubric (a version in
review or sent back is never used); every response of such an instruction is graded on every
criterion of that version, one model call per (response, criterion) (``scoring.grading.grader``).

On the shared run machinery (``scoring.runs``): batches of response ids, one Celery task each
(``scoring.grading.tasks.grading_batch``), on the model queue for a local model and the
lexical (CPU) queue for an endpoint (the work is waiting on the server), as generation runs.
A batch writes each response's verdicts as soon as they are made, unique per (grader,
response, criterion), so a batch run again (its worker died, the sweep re-queued it, Resume)
asks the model only what is missing. Progress counts the verdicts that exist.

The grader's identity (``MetricConfig`` of backend ``rubric-grader``) is taken when the run is
created, the local model's weights hashed then (as the LLM jury's judges are); two runs with
the same model, prompt and options share their verdicts.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from review.models import AuditEvent, Criterion, Dataset, ModelResponse, Rubric, User
from review.services.audit import audit_record
from scoring.generation.runs import GenerationRunError, model_choice
from scoring.grading.grader import RubricGrader, RubricItem, conversation_text
from scoring.grading.tasks import grading_batch
from scoring.llm.backends import GenerationError
from scoring.llm.prompts import PromptError
from scoring.llm.records import record_text
from scoring.models import GraderVerdict, GradingBatch, GradingRun, MetricConfig
from scoring.runs import machinery


class GradingRunError(Exception):
    """A grading request that cannot be carried out, with a message for the user."""


# --- what is graded -------------------------------------------------------------------------------


def accepted_rubrics(dataset: Dataset) -> dict[int, Rubric]:
    """``{instruction id: its latest accepted rubric version}`` of the dataset (one query)."""
    out: dict[int, Rubric] = {}
    for rubric in Rubric.objects.filter(
        instruction__dataset=dataset, status=Rubric.Status.ACCEPTED
    ).order_by("instruction_id", "version"):
        out[rubric.instruction_id] = rubric  # the last one wins: the latest version
    return out


def _responses(dataset: Dataset, instruction_ids: list[int]) -> QuerySet[ModelResponse]:
    return ModelResponse.objects.filter(
        instruction__dataset=dataset, instruction_id__in=instruction_ids
    )


def _criteria(rubric_ids: list[int]) -> dict[int, list[Criterion]]:
    out: dict[int, list[Criterion]] = {}
    for criterion in Criterion.objects.filter(rubric_id__in=rubric_ids).order_by(
        "rubric_id", "order", "id"
    ):
        out.setdefault(criterion.rubric_id, []).append(criterion)
    return out


def _queue_for(batch: GradingBatch) -> str:
    kind = batch.run.backend_spec.get("kind")
    return (
        settings.SCORING_MODEL_QUEUE if kind == "transformers" else settings.SCORING_LEXICAL_QUEUE
    )


def _plan_batches(
    run: GradingRun, size: int, *, covered: set[int] | None = None
) -> list[GradingBatch]:
    """Batches of the responses with a criterion still ungraded, ordered by patient (a batch
    serializes each record once)."""
    rubrics = accepted_rubrics(run.dataset)
    criteria = _criteria([r.pk for r in rubrics.values()])
    wanted = {iid: {c.pk for c in criteria.get(r.pk, [])} for iid, r in rubrics.items()}
    done: dict[int, set[int]] = {}
    for response_id, criterion_id in GraderVerdict.objects.filter(
        config_id=run.config_id, response__instruction__dataset=run.dataset
    ).values_list("response_id", "criterion_id"):
        done.setdefault(response_id, set()).add(criterion_id)
    todo = [
        pk
        for pk, iid in _responses(run.dataset, list(rubrics))
        .order_by("instruction__patient_id", "instruction_id", "id")
        .values_list("pk", "instruction_id")
        if wanted[iid] - done.get(pk, set()) and pk not in (covered or set())
    ]
    batches = [
        GradingBatch(run=run, item_ids=todo[start : start + size])
        for start in range(0, len(todo), size)
    ]
    return GradingBatch.objects.bulk_create(batches)


def _replan(run: GradingRun, open_batches: list[GradingBatch]) -> list[GradingBatch]:
    covered = {pk for batch in open_batches for pk in batch.item_ids}
    return _plan_batches(run, settings.GRADING_BATCH_SIZE, covered=covered)


# --- one batch ------------------------------------------------------------------------------------


def grader_for(run: GradingRun) -> RubricGrader:
    return RubricGrader(run.backend_spec, **run.options)


def _grade_batch(batch: GradingBatch) -> int:
    run = GradingRun.objects.select_related("dataset").get(pk=batch.run_id)
    grader = grader_for(run)
    rubrics = accepted_rubrics(run.dataset)
    criteria = _criteria([r.pk for r in rubrics.values()])
    responses = list(
        ModelResponse.objects.filter(pk__in=batch.item_ids)
        .select_related("instruction__patient")
        .order_by("instruction__patient_id", "id")
    )
    done: dict[int, set[int]] = {}
    for response_id, criterion_id in GraderVerdict.objects.filter(
        config_id=run.config_id, response_id__in=batch.item_ids
    ).values_list("response_id", "criterion_id"):
        done.setdefault(response_id, set()).add(criterion_id)
    written = 0
    for response in responses:
        rubric = rubrics.get(response.instruction_id)
        if rubric is None:
            continue  # its rubric was replaced by a version in review since planning
        todo = [c for c in criteria.get(rubric.pk, []) if c.pk not in done.get(response.pk, set())]
        if not todo:
            continue
        patient = response.instruction.patient
        user = grader.user_turn(
            question=response.instruction.question,
            record=record_text(patient) if patient is not None else None,
        )
        conversation = conversation_text(user=user, assistant=response.text)
        verdicts = []
        for criterion in todo:
            item = RubricItem(criterion.text, float(criterion.points), tuple(criterion.tags))
            grade = grader.grade(conversation=conversation, item=item)
            verdicts.append(
                GraderVerdict(
                    config_id=run.config_id,
                    response=response,
                    rubric_id=rubric.pk,
                    criterion=criterion,
                    criteria_met=grade.criteria_met,
                    explanation=grade.explanation,
                    attempts=grade.attempts,
                    prompt_sha256=grade.prompt_sha256,
                    finish_reason=grade.finish_reason[:20],
                )
            )
        # Each response's verdicts as soon as they exist: a batch cut short keeps them.
        GraderVerdict.objects.bulk_create(verdicts, ignore_conflicts=True)
        written += len(verdicts)
    return written


def grading_batch_execute(*, batch_id: int, task_id: str | None = None) -> int:
    """Grade one batch: what is missing only, written once (``machinery.batch_execute``)."""
    return machinery.batch_execute(
        kind=GRADING, batch_id=batch_id, task_id=task_id, work=_grade_batch
    )


def describe(exc: BaseException) -> str:
    """The app's own messages as they are (they name the model or endpoint, never patient
    text); anything else by its type only."""
    if isinstance(exc, GenerationError | PromptError | GradingRunError):
        return str(exc)[:500]
    return machinery.describe(exc)


def _verdicts_produced(run: GradingRun) -> int:
    return GraderVerdict.objects.filter(
        config_id=run.config_id, response__instruction__dataset_id=run.dataset_id
    ).count()


GRADING: machinery.RunKind[GradingRun, GradingBatch] = machinery.register(
    machinery.RunKind(
        name="grading",
        run_model=GradingRun,
        batch_model=GradingBatch,
        task=grading_batch,
        execute=grading_batch_execute,
        replan=_replan,
        queue_for=_queue_for,
        produced=_verdicts_produced,
        produced_name="graded",
        describe_error=describe,
    )
)


# --- runs ---------------------------------------------------------------------------------------


def grader_config_get_or_create(grader: RubricGrader) -> MetricConfig:
    """The grader's identity as a ``MetricConfig`` (backend ``rubric-grader``)."""
    try:
        identity = grader.identity()
    except (GenerationError, OSError) as exc:
        raise GradingRunError(str(exc)) from None
    config, _ = MetricConfig.objects.get_or_create(
        identity_hash=grader.identity_hash(),
        defaults={
            "backend": RubricGrader.name,
            "identity": identity,
            "provenance": grader.provenance(),
            "label": f"Rubric grader ({identity['grader'].get('model', 'model')})"[:100],
        },
    )
    return config


@transaction.atomic
def grading_run_create(
    *,
    dataset: Dataset,
    model: str,
    options: dict[str, Any] | None = None,
    actor: User | None = None,
    batch_size: int | None = None,
    enqueue: bool = True,
) -> GradingRun:
    """Plan a run and queue its batches once committed; ``GradingRunError`` says what is wrong.

    ``model`` is a ``scoring.generation.runs.model_choices()`` key: a local model folder or an
    allowlisted endpoint, the choices generation offers (no path or URL is typed)."""
    try:
        choice = model_choice(model)
        grader = RubricGrader(choice.spec, **(options or {}))
        grader.backend.tokenizer()
    except (GenerationError, GenerationRunError, ValueError) as exc:
        raise GradingRunError(str(exc)) from None
    rubrics = accepted_rubrics(dataset)
    if not rubrics:
        raise GradingRunError(
            f"{dataset.name} has no accepted rubric: a rubric is graded only once a second "
            "clinician has accepted it"
        )
    config = grader_config_get_or_create(grader)
    run = GradingRun.objects.create(
        dataset=dataset,
        created_by=actor,
        config=config,
        model_key=choice.key,
        backend_spec=choice.spec,
        options=grader.options,
    )
    criteria = _criteria([r.pk for r in rubrics.values()])
    per_instruction = {iid: len(criteria.get(r.pk, [])) for iid, r in rubrics.items()}
    run.total = sum(
        per_instruction[iid]
        for iid in _responses(dataset, list(rubrics)).values_list("instruction_id", flat=True)
    )
    run.save(update_fields=["total"])
    batches = _plan_batches(run, batch_size or settings.GRADING_BATCH_SIZE)
    audit_record(
        action=AuditEvent.Action.SCORING_STARTED,  # runs of every kind share the action
        actor=actor,
        obj=run,
        details={
            "kind": "grading",
            "dataset": dataset.name,
            "model": choice.key,
            "prompt": config.identity.get("prompt"),
            "rubrics": len(rubrics),
        },
    )
    machinery.run_start(GRADING, run, batches, enqueue=enqueue)
    return run


def grading_run_resume(*, run: GradingRun, enqueue: bool = True) -> GradingRun:
    """Finish a failed or interrupted run: only what is missing is graded."""
    return machinery.run_resume(kind=GRADING, run=run, enqueue=enqueue)
