"""Generation runs: a dataset's instructions answered by a model at one or more context lengths.

A run is split into batches of instruction ids at one context length, one Celery task each
(``scoring.generation.tasks.generation_batch``, taking the batch id), on the ``gpu`` queue for a
local model (loaded once per worker process) and the ``cpu`` queue for an endpoint (the work is
waiting on the server).

Runs and batches are the shared run machinery's (``scoring.runs``): this module plans the
batches (``_plan_batches``, ``_replan``), names their queue (``_queue_for``), does one batch's
work (``_generate_batch``) and registers the kind (``GENERATION``); claiming, heartbeats, the
sweep that re-queues a dead worker's batch, finishing, failing and resuming are the machinery's.
A batch's work (``scoring.generation.work.generate_responses``) writes each response as soon as
it is generated, unique per (instruction, model name ``<label>@<context length>``), so a run is
idempotent and resumable: a killed worker's batch is re-queued by the sweep (or Resume) and
writes only what is missing, and a run ends with exactly one response per instruction × model ×
context length.

The responses are candidates: clinicians rank them only once an admin adds them to a round
(``review.services.studies``); ``generation_metadata`` carries their provenance and
``base_model``, so the context-length analysis pairs the lengths of one model by itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from review.models import AuditEvent, Dataset, Instruction, ModelResponse, User
from review.services.audit import audit_record
from scoring.generation.names import MODEL_LABEL_MAX, response_model_name, run_response_names
from scoring.generation.tasks import generation_batch
from scoring.generation.work import GenerationJob, generate_responses
from scoring.llm.backends import (
    GenerationBackend,
    GenerationError,
    GenerationParams,
    HashProgress,
    backend_from_spec,
)
from scoring.llm.prompts import (
    HELM_TEMPLATE,
    TRUNCATION_POLICIES,
    PromptError,
    PromptTemplate,
)
from scoring.llm.record_text import SERIALIZATION_VERSION
from scoring.models import GenerationBatch, GenerationEndpoint, GenerationRun, GenerationTemplate
from scoring.runs import machinery

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


def no_model_reason() -> str:
    """Why ``model_choices()`` is empty, for an operator: where local folders are looked for
    and what is there, and that no endpoint is allowlisted."""
    root = Path(settings.GENERATION_MODEL_DIR)
    if not root.is_dir():
        where = f"GENERATION_MODEL_DIR ({root}) does not exist"
    else:
        folders = sorted(p.name for p in root.iterdir() if p.is_dir())
        where = (
            f"GENERATION_MODEL_DIR ({root}) has no model folder (a folder holding config.json)"
            + (f"; these folders lack config.json: {', '.join(folders[:10])}" if folders else "")
        )
    disabled = GenerationEndpoint.objects.filter(enabled=False).count()
    endpoints = "no endpoint is allowlisted (Admin › Generation endpoints)" + (
        f"; {disabled} endpoint{'s are' if disabled != 1 else ' is'} there but disabled"
        if disabled
        else ""
    )
    return f"No model is available: {where}, and {endpoints}."


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


def job_for(
    run: GenerationRun, context_length: int, *, identity: dict[str, Any] | None = None
) -> GenerationJob:
    """What a batch of ``run`` at ``context_length`` generates with; ``identity``: the model's
    as the worker verified it (``_verified_identity``), else as the run records it."""
    return GenerationJob(
        backend_spec=run.backend_spec,
        model_identity=identity if identity is not None else run.model_identity,
        label=run.label,
        context_length=context_length,
        policy=run.truncation_policy,
        template=PromptTemplate(run.template_text, name=run.template_version.split("@")[0]),
        params=GenerationParams(**run.params),
        run_id=run.pk,
    )


def _generate_batch(batch: GenerationBatch) -> int:
    run = GenerationRun.objects.select_related("dataset").get(pk=batch.run_id)
    backend = backend_from_spec(run.backend_spec)
    job = job_for(run, batch.context_length, identity=_verified_identity(run, backend))
    return generate_responses(job=job, instruction_ids=batch.item_ids, backend=backend)


def generation_batch_execute(*, batch_id: int, task_id: str | None = None) -> int:
    """Generate one batch: what is missing only, written once (``machinery.batch_execute``).

    ``task_id``: the Celery task running it (``machinery.batch_claim``); None inline."""
    return machinery.batch_execute(
        kind=GENERATION, batch_id=batch_id, task_id=task_id, work=_generate_batch
    )


def describe(exc: BaseException) -> str:
    """An error as researchers see it on a batch and its run: the app's own messages as they are
    (they name the model, the endpoint or the template, never patient text), anything else by
    its type only (``machinery.describe``)."""
    if isinstance(exc, GenerationError | PromptError | GenerationRunError):
        return str(exc)[:500]
    return machinery.describe(exc)


def _responses_produced(run: GenerationRun) -> int:
    names = run_response_names(run.label, run.context_lengths)
    return ModelResponse.objects.filter(
        instruction__dataset_id=run.dataset_id,
        model_name__in=names,
        instruction__patient__isnull=False,
    ).count()


GENERATION: machinery.RunKind[GenerationRun, GenerationBatch] = machinery.register(
    machinery.RunKind(
        name="generation",
        run_model=GenerationRun,
        batch_model=GenerationBatch,
        task=generation_batch,
        execute=generation_batch_execute,
        replan=_replan,
        queue_for=_queue_for,
        produced=_responses_produced,
        produced_name="generated",
        describe_error=describe,
        phase=lambda run: _phase(run),  # defined below, with the hashing it reports
    )
)


# --- the model's identity: cheap in the request, hashed on the worker ---------------------------

# What must stay the same for the responses of one run to come from one model. ``weights_files``
# (names, sizes, modification times) is what the web request records; the worker's first batch
# adds ``weights_sha256``.
_SAME_FILES = ("weights_files", "config_sha256", "tokenizer_sha256")
_SAME_WEIGHTS = ("weights_sha256", "config_sha256", "tokenizer_sha256")


def _changed(recorded: dict[str, Any], now: dict[str, Any], keys: Iterable[str]) -> list[str]:
    return [k for k in keys if k in recorded and recorded[k] != now.get(k)]


def _verified_identity(run: GenerationRun, backend: GenerationBackend) -> dict[str, Any]:
    """The run's model identity with the weights' sha256, checked against the model folder now.

    Hashing a real model's weights takes minutes, so it happens here, on the worker, and not in
    the web request that created the run (``file_sha256`` caches per file size and modification
    time, so a worker process hashes once). The first batch records the hash on the run; every
    batch checks that the folder still holds what the run recorded and fails with the reason if
    it does not: all responses of a run come from one set of weights.
    """
    if backend.kind != "transformers":
        return dict(run.model_identity)  # an endpoint: its identity costs nothing to take
    try:
        now = backend.identity(progress=_hashing_reporter(run.pk))
    except OSError as exc:
        raise GenerationRunError(
            f"{run.label}: cannot read the model folder: {exc.strerror}"
        ) from None
    finally:
        cache.delete(hashing_key(run.pk))
    with transaction.atomic():
        recorded = GenerationRun.objects.select_for_update().get(pk=run.pk).model_identity
        hashed = bool(recorded.get("weights_sha256"))
        changed = _changed(recorded, now, _SAME_WEIGHTS if hashed else _SAME_FILES)
        if changed:
            raise GenerationRunError(
                f"the model folder {Path(str(run.backend_spec.get('path'))).name} changed since "
                f"this run "
                f"{'began' if hashed else 'was created'} ({', '.join(changed)} differ): its "
                "responses would not all come from one model. Start a new run."
            )
        if not hashed:
            # The request could not tell, without the hash, whether responses already named
            # like this run's are this model's: now it can, before any response is written.
            names = run_response_names(run.label, run.context_lengths)
            clash = _label_clash(run.dataset, names, now, run_id=run.pk)
            if clash is not None:
                raise GenerationRunError(
                    _clash_message(clash, run.dataset, "start a new run with another label")
                )
            GenerationRun.objects.filter(pk=run.pk).update(model_identity=now)
            return now
    return dict(recorded)


# --- what the run page says while the worker hashes ---------------------------------------------


def hashing_key(run_id: int) -> str:
    """The shared cache's entry for a run's weights being hashed: [bytes done, bytes in all]."""
    return f"generation:hashing:{run_id}"


def _hashing_reporter(run_id: int) -> HashProgress:
    last = [0.0]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 1 or done >= total:  # at most once a second
            last[0] = now
            cache.set(hashing_key(run_id), [done, total], 3600)

    return report


def _size(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"  # pragma: no cover - the loop returns


def _phase(run: GenerationRun) -> str:
    """While a local model's weights have no hash yet: what the worker does before the first
    response (and how far it is, from the shared cache)."""
    if run.backend_spec.get("kind") != "transformers":
        return ""
    identity = (
        GenerationRun.objects.filter(pk=run.pk).values_list("model_identity", flat=True).first()
    )
    if not isinstance(identity, dict) or identity.get("weights_sha256"):
        return ""
    found = cache.get(hashing_key(run.pk))
    if isinstance(found, list) and len(found) == 2 and found[1]:
        done, total = int(found[0]), int(found[1])
        return (
            f"Checking the model: a worker is hashing its weights, {_size(done)} of "
            f"{_size(total)} ({round(100 * done / total)}%). The responses follow."
        )
    files = identity.get("weights_files") or {}
    size = sum(int(v[0]) for v in files.values() if isinstance(v, list) and v)
    return (
        f"Checking the model: the first batch's worker loads its tokenizer and hashes its "
        f"weights ({_size(size)}) before the first response."
    )


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
    """The model's identity as the web request takes it: without hashing a local model's
    weights nor loading its tokenizer (``quick_identity``); the worker hashes them
    (``_verified_identity``)."""
    try:
        return backend.quick_identity()
    except (GenerationError, OSError) as exc:
        raise GenerationRunError(str(exc)) from None


def _identity_key(identity: dict[str, Any] | None) -> tuple[str, str, str]:
    """What makes two generations the same model: the weights, or the endpoint and model name
    (not library versions, nor the folder's name)."""
    identity = identity or {}
    if identity.get("weights_sha256"):
        return ("weights", str(identity["weights_sha256"]), "")
    return ("endpoint", str(identity.get("endpoint") or ""), str(identity.get("model") or ""))


def _same_files(theirs: dict[str, Any], mine: dict[str, Any]) -> bool:
    """The folder holds the very files those responses recorded (names, sizes, modification
    times, config and tokenizer): the same weights, told without reading them."""
    return all(theirs.get(k) is not None and theirs.get(k) == mine.get(k) for k in _SAME_FILES)


def _label_clash(
    dataset: Dataset, names: list[str], identity: dict[str, Any], *, run_id: int | None = None
) -> str | None:
    """A response name of ``names`` that already names another model's responses in
    ``dataset`` (other than run ``run_id``'s own), or None.

    With a local model's weights not hashed yet (the web request), only what is certain
    without reading them counts: responses imported (no identity), from an endpoint, or of a
    folder whose files differ but might hold the same weights are left to the worker, which
    asks again with the hash (``_verified_identity``) before the first response."""
    # The run's own responses are skipped here, not in SQL: an exclude() on a JSON key would
    # also drop the imported responses, which have no such key.
    seen = [
        (name, theirs)
        for name, theirs, by_run in ModelResponse.objects.filter(
            instruction__dataset=dataset, model_name__in=names
        )
        .values_list(
            "model_name",
            "generation_metadata__generation__model",
            "generation_metadata__generation__run",
        )
        .distinct()
        if run_id is None or by_run != run_id
    ]
    local_unhashed = identity.get("backend") == "transformers" and not identity.get(
        "weights_sha256"
    )
    mine = _identity_key(identity)
    for name, theirs in seen:
        if not isinstance(theirs, dict):
            return str(name)
        if local_unhashed:
            if not theirs.get("weights_sha256"):
                return str(name)  # an endpoint's responses
            if not _same_files(theirs, identity):
                continue  # the worker decides, with the hash
        elif _identity_key(theirs) != mine:
            return str(name)
    return None


# --- templates on real data: an admin's approval ------------------------------------------------


class TemplateNeedsApproval(GenerationRunError):
    """A template that must be approved by an admin before it runs on this dataset."""


def template_check(
    *, dataset: Dataset, template: PromptTemplate, actor: User | None, by_operator: bool = False
) -> None:
    """Refuse a template that may not run on ``dataset``, asking an admin to approve it.

    On synthetic data any template runs, and HELM's everywhere. On any other dataset a template
    runs once an admin approved it (``GenerationTemplate``): a researcher sees per-instruction
    token counts and finish reasons, which a template can make depend on the record. An
    operator's command on the server (``by_operator``) can read the database anyway. The request
    is written in its own transaction, so it stays when the run is refused.
    """
    if dataset.is_synthetic or template.text == HELM_TEMPLATE or by_operator:
        return
    approved = GenerationTemplate.objects.filter(
        sha256=template.sha256, approved_at__isnull=False
    ).exists()
    if approved:
        return
    with transaction.atomic():
        GenerationTemplate.objects.get_or_create(
            sha256=template.sha256,
            defaults={"name": template.name[:80], "text": template.text, "requested_by": actor},
        )
    raise TemplateNeedsApproval(
        f"{dataset.name} is not synthetic, and template {template.version} is not approved for "
        "it: a template can make what a run shows per instruction (its tokens, how it ended) "
        "depend on the record. An admin has been asked to approve it (Admin: Generation "
        "templates); start the run again once it is approved, or use HELM's template, which "
        "needs no approval."
    )


def _clash_message(clash: str, dataset: Dataset, then: str) -> str:
    return (
        f"{clash!r} already names other responses in {dataset.name} (imported, or generated "
        f"by other weights or another endpoint): {then}"
    )


@transaction.atomic
def generation_template_approve(
    *, template: GenerationTemplate, admin: User, request: HttpRequest | None = None
) -> GenerationTemplate:
    """An admin approves a template for data that is not synthetic (audited); another admin
    than the one who asked for it."""
    template = GenerationTemplate.objects.select_for_update().get(pk=template.pk)
    if template.requested_by_id is not None and template.requested_by_id == admin.pk:
        raise GenerationRunError("another admin approves a template you asked for")
    if template.approved_at is None:
        template.approved_by = admin
        template.approved_at = timezone.now()
        template.save(update_fields=["approved_by", "approved_at"])
        audit_record(
            action=AuditEvent.Action.ADMIN_CHANGED,
            actor=admin,
            request=request,
            obj=template,
            details={
                "model": "scoring.GenerationTemplate",
                "change": "approved for data that is not synthetic",
                "sha256": template.sha256,
                "text": template.text[:TEMPLATE_AUDIT_CHARS],
            },
        )
    return template


# Templates are the researcher's own text, never patient text: the audit keeps them whole up to
# this many characters (and their sha256 always).
TEMPLATE_AUDIT_CHARS = 20_000


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
    by_operator: bool = False,
) -> GenerationRun:
    """Plan a run and queue its batches once committed; ``GenerationRunError`` says what is wrong
    (nothing is created then). A template not allowed on the dataset (``template_check``) is
    refused, and an admin asked to approve it; ``by_operator`` for the ``generate`` command.

    ``model`` is a ``model_choices()`` key. An endpoint must still be allowlisted (checked here,
    before anything is planned, and again before every request). ``label`` names the model in
    the responses (``<label>@<length>``; default: the folder or served model name); a label that
    already names another model's responses in this dataset is refused, so two models never
    share a name and an instruction's response is never skipped as if it were done.
    """
    try:
        template = PromptTemplate(
            template_text if template_text is not None else PromptTemplate().text,
            name=template_name or "custom",
        )
    except PromptError as exc:
        raise GenerationRunError(str(exc)) from None
    template_check(dataset=dataset, template=template, actor=actor, by_operator=by_operator)
    return _run_create(
        dataset=dataset,
        model=model,
        context_lengths=context_lengths,
        policy=policy,
        template=template,
        params=params,
        label=label,
        actor=actor,
        batch_size=batch_size,
        enqueue=enqueue,
    )


@transaction.atomic
def _run_create(
    *,
    dataset: Dataset,
    model: str,
    context_lengths: Iterable[int],
    policy: str,
    template: PromptTemplate,
    params: GenerationParams | None,
    label: str,
    actor: User | None,
    batch_size: int | None,
    enqueue: bool,
) -> GenerationRun:
    choice = model_choice(model)
    lengths = _context_lengths(context_lengths)
    if policy not in TRUNCATION_POLICIES:
        raise GenerationRunError(f"unknown truncation policy {policy!r}; choose recent or bm25")
    params = params or GenerationParams()
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
        # The files only: loading the tokenizer (importing transformers) is the worker's.
        backend.check_tokenizer()
    except GenerationError as exc:
        raise GenerationRunError(str(exc)) from None
    limit = backend.max_positions()
    if limit is not None and lengths[-1] > limit[0]:
        raise GenerationRunError(
            f"context length {lengths[-1]:,} is more than {label} can hold: "
            f"{limit[0]:,} positions ({limit[1]}). Choose lengths up to {limit[0]:,}."
        )
    identity = _identity(backend)
    names = run_response_names(label, lengths)
    clash = _label_clash(dataset, names, identity)
    if clash is not None:
        raise GenerationRunError(_clash_message(clash, dataset, "choose another label"))
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
            # The template itself: what the model was asked about every record.
            "template_sha256": template.sha256,
            "template_text": template.text[:TEMPLATE_AUDIT_CHARS],
        },
    )
    machinery.run_start(GENERATION, run, batches, enqueue=enqueue)
    return run


def generation_run_resume(*, run: GenerationRun, enqueue: bool = True) -> GenerationRun:
    """Finish a failed or interrupted run: only the missing responses are generated
    (``machinery.run_resume``)."""
    return machinery.run_resume(kind=GENERATION, run=run, enqueue=enqueue)
