"""Generation runs: a dataset's instructions answered by a model at one or more context lengths.

A run is split into batches of instruction ids at one context length, one Celery task each
(``scoring.generation.tasks.generation_batch``, taking the batch id), on the ``gpu`` queue for a
local model (loaded once per worker process) and the ``cpu`` queue for an endpoint (the work is
waiting on the server).

Run machinery: the shared ``scoring/runs/`` package (claim, heartbeat, sweep, a registry of run
kinds) was not on main when this was written, so the run-and-batch state changes below follow
the scoring run's pattern (``scoring.services``: ``_start``/``_maybe_finish``/``_finish``/resume)
in the smallest form, behind the same names the shared machinery uses (``run_start``,
``batch_execute``, ``batch_fail``, ``run_maybe_finish``, ``run_resume``). Moving onto it:
``GenerationRun``/``GenerationBatch`` take ``RunBase``/``BatchBase`` (their fields here are the
same), the section "run machinery" below is deleted in favour of ``machinery.*`` with a
registered ``RunKind`` (work ``_generate_batch``, replan ``_replan``, queue ``_queue_for``), and
the task takes ``BATCH_TASK_OPTIONS``.
A batch's work (``scoring.generation.work.generate_responses``) writes each response as soon as
it is generated, unique per (instruction, model name ``<label>@<context length>``), so a run is
idempotent and resumable: a killed worker's batch is re-queued by the sweep (or Resume) and
writes only what is missing, and a run ends with exactly one response per instruction × model ×
context length.

The responses join the dataset as ordinary responses: blinded for clinicians, assignable,
scored, in reports; ``generation_metadata`` carries their provenance and ``base_model``, so
the context-length analysis pairs the lengths of one model by itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from medalign_site.logs import redact_exception
from review.models import AuditEvent, Dataset, Instruction, ModelResponse, User
from review.services.audit import audit_record
from scoring.generation.backends import (
    GenerationBackend,
    GenerationError,
    GenerationParams,
    backend_from_spec,
)
from scoring.generation.prompts import TRUNCATION_POLICIES, PromptError, PromptTemplate
from scoring.generation.record_text import SERIALIZATION_VERSION
from scoring.generation.work import (
    MODEL_LABEL_MAX,
    GenerationJob,
    generate_responses,
    response_model_name,
)
from scoring.models import GenerationBatch, GenerationEndpoint, GenerationRun

MAX_CONTEXT_LENGTH = 1 << 20


class GenerationRunError(Exception):
    """A generation request that cannot be carried out, with a message for the user."""


# --- which models a researcher can pick ---------------------------------------------------------


@dataclass(frozen=True)
class ModelChoice:
    key: str  # "local:<folder>" or "endpoint:<id>"
    label: str
    spec: dict[str, Any]
    description: str


def model_choices() -> list[ModelChoice]:
    """Local model folders under ``GENERATION_MODEL_DIR`` and the admin's enabled endpoints.

    Researchers pick from these only: no path or URL is ever typed into a form."""
    out: list[ModelChoice] = []
    root = Path(settings.GENERATION_MODEL_DIR)
    if root.is_dir():
        for folder in sorted(p for p in root.iterdir() if (p / "config.json").is_file()):
            out.append(
                ModelChoice(
                    key=f"local:{folder.name}",
                    label=folder.name,
                    spec={"kind": "transformers", "path": str(folder)},
                    description=f"local model folder {folder.name} (transformers, this server)",
                )
            )
    for endpoint in GenerationEndpoint.objects.filter(enabled=True).order_by("url"):
        out.append(
            ModelChoice(
                key=f"endpoint:{endpoint.pk}",
                label=endpoint.label or endpoint.model,
                spec={
                    "kind": "openai-http",
                    "endpoint": endpoint.url,
                    "model": endpoint.model,
                    "tokenizer_path": endpoint.tokenizer_path,
                    "timeout": endpoint.timeout_seconds,
                },
                description=f"{endpoint.model} at {endpoint.url} (allowlisted endpoint)",
            )
        )
    return out


def model_choice(key: str) -> ModelChoice:
    for choice in model_choices():
        if choice.key == key:
            return choice
    raise GenerationRunError(
        f"unknown model {key!r}: choose a folder under GENERATION_MODEL_DIR "
        "(local:<folder>) or an allowlisted endpoint (endpoint:<id>)"
    )


# --- planning -----------------------------------------------------------------------------------


def _queue_for(batch: GenerationBatch) -> str:
    kind = batch.run.backend_spec.get("kind")
    return (
        settings.SCORING_MODEL_QUEUE if kind == "transformers" else settings.SCORING_LEXICAL_QUEUE
    )


def _instructions(dataset: Dataset) -> QuerySet[Instruction]:
    # Only instructions whose record is loaded: a prompt needs the record.
    return Instruction.objects.filter(dataset=dataset, patient__isnull=False)


def _plan_batches(
    run: GenerationRun, size: int, *, covered: dict[int, set[int]] | None = None
) -> list[GenerationBatch]:
    """Batches of the instructions that have no response yet, per context length.

    Instructions are ordered by record (patient), so a batch reuses one serialized record."""
    ids = list(
        _instructions(run.dataset)
        .order_by("patient_id", "instruction_id")
        .values_list("pk", flat=True)
    )
    batches = []
    for length in run.context_lengths:
        name = response_model_name(run.label, length)
        done = set(
            ModelResponse.objects.filter(instruction_id__in=ids, model_name=name).values_list(
                "instruction_id", flat=True
            )
        )
        done |= (covered or {}).get(length, set())  # already in an open batch
        todo = [i for i in ids if i not in done]
        for start in range(0, len(todo), size):
            batches.append(
                GenerationBatch(run=run, context_length=length, item_ids=todo[start : start + size])
            )
    return GenerationBatch.objects.bulk_create(batches)


def _replan(run: GenerationRun, open_batches: list[GenerationBatch]) -> list[GenerationBatch]:
    covered: dict[int, set[int]] = {}
    for batch in open_batches:
        covered.setdefault(batch.context_length, set()).update(batch.item_ids)
    return _plan_batches(run, settings.GENERATION_BATCH_SIZE, covered=covered)


# --- the batch ----------------------------------------------------------------------------------


def job_for(run: GenerationRun, context_length: int) -> GenerationJob:
    return GenerationJob(
        backend_spec=run.backend_spec,
        model_identity=run.model_identity,
        label=run.label,
        context_length=context_length,
        policy=run.truncation_policy,
        template=PromptTemplate(run.template_text, name=run.template_version.split("@")[0]),
        params=GenerationParams(**run.params),
        run_id=run.pk,
    )


def _generate_batch(batch: GenerationBatch) -> int:
    run = GenerationRun.objects.select_related("dataset").get(pk=batch.run_id)
    return generate_responses(
        job=job_for(run, batch.context_length), instruction_ids=batch.item_ids
    )


def generation_batch_execute(*, batch_id: int, task_id: str | None = None) -> int:
    """Generate one batch: what is missing only, written once."""
    return batch_execute(batch_id=batch_id, work=_generate_batch)


# --- run machinery (until scoring/runs is on main; see the module docstring) --------------------


def run_start(run: GenerationRun, batches: list[GenerationBatch], *, enqueue: bool) -> None:
    """Queue the batches once the run is committed; a run with nothing to do is done at once."""
    if not batches:
        _run_finish(run)
    elif enqueue:
        transaction.on_commit(lambda: batches_enqueue(batches))


def batches_enqueue(batches: Iterable[GenerationBatch]) -> None:
    from scoring.generation.tasks import generation_batch

    for batch in batches:
        generation_batch.apply_async(args=[batch.pk], queue=_queue_for(batch))


def batch_execute(*, batch_id: int, work: Any) -> int:
    """Run ``work`` (idempotent) on a pending batch, mark it done, and maybe finish the run."""
    batch = GenerationBatch.objects.select_related("run").filter(pk=batch_id).first()
    if batch is None or batch.status == GenerationBatch.Status.DONE:
        return 0  # done already, or re-planned by a resume while this task waited
    run = batch.run
    if run.status == GenerationRun.Status.PENDING:
        GenerationRun.objects.filter(pk=run.pk, status=GenerationRun.Status.PENDING).update(
            status=GenerationRun.Status.RUNNING, started_at=timezone.now()
        )
    started = time.perf_counter()
    created = int(work(batch))
    GenerationBatch.objects.filter(pk=batch.pk).update(
        status=GenerationBatch.Status.DONE,
        attempts=batch.attempts + 1,
        seconds=time.perf_counter() - started,
        error="",
    )
    run_maybe_finish(run.pk)
    return created


def batch_fail(*, batch_id: int, error: str) -> None:
    """Record a batch that failed for good and fail the run once nothing else is pending."""
    batch = GenerationBatch.objects.filter(pk=batch_id).first()
    if batch is None:
        return
    GenerationBatch.objects.filter(pk=batch_id).exclude(status=GenerationBatch.Status.DONE).update(
        status=GenerationBatch.Status.FAILED, error=error[:2000], attempts=batch.attempts + 1
    )
    run_maybe_finish(batch.run_id)


def describe(exc: BaseException) -> str:
    """An error as researchers see it: redacted like the logs (the type, and the app's own
    messages, which quote no patient text)."""
    if isinstance(exc, GenerationError | PromptError | GenerationRunError):
        return str(exc)[:500]
    return redact_exception(exc)[:500]


def _run_finish(run: GenerationRun) -> None:
    run.status = GenerationRun.Status.DONE
    run.finished_at = timezone.now()
    if run.started_at is None:
        run.started_at = run.finished_at
    run.save(update_fields=["status", "finished_at", "started_at"])


def run_maybe_finish(run_id: int) -> None:
    with transaction.atomic():
        run = GenerationRun.objects.select_for_update().get(pk=run_id)
        if run.status in (GenerationRun.Status.DONE, GenerationRun.Status.FAILED):
            return
        counts = run.batches.aggregate(
            pending=Count("id", filter=Q(status=GenerationBatch.Status.PENDING)),
            failed=Count("id", filter=Q(status=GenerationBatch.Status.FAILED)),
        )
        if counts["pending"]:
            return
        if counts["failed"]:
            errors = list(
                run.batches.filter(status=GenerationBatch.Status.FAILED)
                .values_list("error", flat=True)
                .distinct()[:3]
            )
            run.status = GenerationRun.Status.FAILED
            run.error = f"{counts['failed']} batch(es) failed: " + " | ".join(errors)
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "error", "finished_at"])
            return
        _run_finish(run)


@transaction.atomic
def run_resume(*, run: GenerationRun, enqueue: bool = True) -> GenerationRun:
    """Failed batches are planned again, pending ones queued again as they are (a copy of a task
    that still runs finds its responses there and writes nothing), the rest planned anew."""
    run = GenerationRun.objects.select_for_update().get(pk=run.pk)
    run.batches.filter(status=GenerationBatch.Status.FAILED).delete()
    pending = list(run.batches.filter(status=GenerationBatch.Status.PENDING))
    run.status = GenerationRun.Status.PENDING
    run.error = ""
    run.finished_at = None
    run.save(update_fields=["status", "error", "finished_at"])
    run_start(run, pending + _replan(run, pending), enqueue=enqueue)
    return run


# --- runs ---------------------------------------------------------------------------------------


def _context_lengths(values: Iterable[int]) -> list[int]:
    lengths = sorted(set(int(v) for v in values))
    if not lengths:
        raise GenerationRunError("choose at least one context length")
    bad = [v for v in lengths if not 1 <= v <= MAX_CONTEXT_LENGTH]
    if bad:
        raise GenerationRunError(f"context lengths must be from 1 to {MAX_CONTEXT_LENGTH:,}")
    return lengths


def _identity(backend: GenerationBackend) -> dict[str, Any]:
    try:
        return backend.identity()
    except (GenerationError, OSError) as exc:
        raise GenerationRunError(str(exc)) from None


def _identity_key(identity: dict[str, Any] | None) -> tuple[str, str, str]:
    """What makes two generations the same model: the weights, or the endpoint and model name
    (not library versions, nor the folder's name)."""
    identity = identity or {}
    if identity.get("weights_sha256"):
        return ("weights", str(identity["weights_sha256"]), "")
    return ("endpoint", str(identity.get("endpoint") or ""), str(identity.get("model") or ""))


def _label_clash(dataset: Dataset, names: list[str], identity: dict[str, Any]) -> str | None:
    mine = _identity_key(identity)
    seen = (
        ModelResponse.objects.filter(instruction__dataset=dataset, model_name__in=names)
        .values_list("model_name", "generation_metadata__generation__model")
        .distinct()
    )
    for name, theirs in seen:
        if not isinstance(theirs, dict) or _identity_key(theirs) != mine:
            return str(name)
    return None


@transaction.atomic
def generation_run_create(
    *,
    dataset: Dataset,
    model: str,
    context_lengths: Iterable[int],
    policy: str = "recent",
    template_text: str | None = None,
    template_name: str = "",
    params: GenerationParams | None = None,
    label: str = "",
    actor: User | None = None,
    batch_size: int | None = None,
    enqueue: bool = True,
) -> GenerationRun:
    """Plan a run and queue its batches once committed; ``GenerationRunError`` says what is wrong
    (nothing is created then).

    ``model`` is a ``model_choices()`` key. An endpoint must still be allowlisted (checked here,
    before anything is planned, and again before every request). ``label`` names the model in
    the responses (``<label>@<length>``; default: the folder or served model name); a label that
    already names another model's responses in this dataset is refused, so two models never
    share a name and an instruction's response is never skipped as if it were done.
    """
    choice = model_choice(model)
    lengths = _context_lengths(context_lengths)
    if policy not in TRUNCATION_POLICIES:
        raise GenerationRunError(f"unknown truncation policy {policy!r}; choose recent or bm25")
    params = params or GenerationParams()
    try:
        template = PromptTemplate(
            template_text if template_text is not None else PromptTemplate().text,
            name=template_name or "custom",
        )
    except PromptError as exc:
        raise GenerationRunError(str(exc)) from None
    too_short = [n for n in lengths if n <= params.max_new_tokens]
    if too_short:
        raise GenerationRunError(
            f"context length {too_short[0]} leaves no room for the prompt after "
            f"{params.max_new_tokens} new tokens"
        )
    label = (label.strip() or choice.label)[:MODEL_LABEL_MAX]
    if "@" in label or not label:
        raise GenerationRunError("a model label cannot be empty or contain '@'")
    try:
        backend = backend_from_spec(choice.spec)
        backend.tokenizer()
    except GenerationError as exc:
        raise GenerationRunError(str(exc)) from None
    identity = _identity(backend)
    clash = _label_clash(dataset, [response_model_name(label, n) for n in lengths], identity)
    if clash is not None:
        raise GenerationRunError(
            f"{clash!r} already names other responses in {dataset.name} (imported, or generated "
            "by other weights or another endpoint): choose another label"
        )
    run = GenerationRun.objects.create(
        dataset=dataset,
        created_by=actor,
        backend_spec=choice.spec,
        model_key=choice.key,
        model_identity=identity,
        label=label,
        context_lengths=lengths,
        truncation_policy=policy,
        template_text=template.text,
        template_version=template.version,
        serialization_version=SERIALIZATION_VERSION,
        params=params.as_dict(),
    )
    run.total = _instructions(dataset).count() * len(lengths)
    run.save(update_fields=["total"])
    batches = _plan_batches(run, batch_size or settings.GENERATION_BATCH_SIZE)
    audit_record(
        action=AuditEvent.Action.SCORING_STARTED,  # runs of every kind share the action
        actor=actor,
        obj=run,
        details={
            "kind": "generation",
            "dataset": dataset.name,
            "model": choice.key,
            "label": label,
            "context_lengths": lengths,
            "truncation_policy": policy,
            "template_version": template.version,
        },
    )
    run_start(run, batches, enqueue=enqueue)
    return run


def generation_run_resume(*, run: GenerationRun, enqueue: bool = True) -> GenerationRun:
    """Finish a failed or interrupted run: only the missing responses are generated."""
    return run_resume(run=run, enqueue=enqueue)


# --- reads --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GenerationProgress:
    run_id: int
    status: str
    generated: int
    total: int
    batches_done: int
    batches_failed: int
    batches_total: int
    error: str

    @property
    def percent(self) -> int:
        return 100 if self.total == 0 else min(100, round(100 * self.generated / self.total))

    def as_dict(self) -> dict[str, object]:
        return {
            "run": self.run_id,
            "status": self.status,
            "generated": self.generated,
            "total": self.total,
            "percent": self.percent,
            "batches_done": self.batches_done,
            "batches_failed": self.batches_failed,
            "batches_total": self.batches_total,
            "error": self.error,
        }


def generation_progress(run: GenerationRun) -> GenerationProgress:
    """Progress counted from the responses that exist, so it is right after any crash or resume."""
    run.refresh_from_db(fields=["status", "error", "total"])
    names = [response_model_name(run.label, n) for n in run.context_lengths]
    generated = ModelResponse.objects.filter(
        instruction__dataset_id=run.dataset_id,
        model_name__in=names,
        instruction__patient__isnull=False,
    ).count()
    batches = {
        row["status"]: row["n"]
        for row in run.batches.values("status").annotate(n=Count("id")).order_by()
    }
    return GenerationProgress(
        run_id=run.pk,
        status=run.status,
        generated=generated,
        total=run.total,
        batches_done=batches.get(GenerationBatch.Status.DONE, 0),
        batches_failed=batches.get(GenerationBatch.Status.FAILED, 0),
        batches_total=sum(batches.values()),
        error=run.error,
    )


def generation_responses(run: GenerationRun, limit: int = 200) -> QuerySet[ModelResponse]:
    """The run's responses with their provenance, for the run page (no text is shown there)."""
    names = [response_model_name(run.label, n) for n in run.context_lengths]
    return (
        ModelResponse.objects.filter(instruction__dataset_id=run.dataset_id, model_name__in=names)
        .select_related("instruction")
        .only(
            "id",
            "model_name",
            "context_length",
            "truncation_policy",
            "names_own_model",
            "generation_metadata",
            "instruction__instruction_id",
        )
        .order_by("instruction__instruction_id", "context_length")[:limit]
    )


def generation_runs_recent(limit: int = 50) -> QuerySet[GenerationRun]:
    return GenerationRun.objects.select_related("dataset", "created_by")[:limit]
