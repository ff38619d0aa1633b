"""Every write the scoring app makes: metric configurations, scoring runs and their batches.

A run is split into batches of response ids, one Celery task each, taking only the batch id.
Scores are unique per (response, metric configuration): a batch first drops the responses that
already have a score, and inserts with ``ignore_conflicts``, so a re-run computes nothing twice
and a batch redelivered after a killed worker cannot duplicate anything.
"""

import hashlib
import json
import logging
import platform
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import django
import numpy
import scipy
from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.db.models.functions import Length
from django.http import HttpRequest
from django.utils import timezone

from medalign_site.logs import redact_exception
from review.models import AuditEvent, Dataset, ModelResponse, User
from review.services.audit import audit_record
from scoring import learned
from scoring.generation.provenance import add_generation_columns
from scoring.metrics import (
    MetricBackend,
    MetricUnavailable,
    Pair,
    Scored,
    backend_class,
    embedding_cache,
    get_backend,
)
from scoring.models import (
    ApiToken,
    CorrelationReport,
    LearnedMetricModel,
    MetricConfig,
    MetricScore,
    ModelVariant,
    ScoringBatch,
    ScoringRun,
)

logger = logging.getLogger(__name__)

METRIC_LABELS = {
    "bertscore": "BERTScore F1",
    "comet": "COMET",
    "rougeL": "ROUGE-L F",
    "bleu": "BLEU",
    "chrf": "chrF++",
    "jury": "LLM jury",
}
# The jury is not a default: it runs only with judges configured (JURY_JUDGES) and asks each
# judge model for every response.
DEFAULT_METRICS = ("bertscore", "comet", "rougeL", "bleu", "chrf")


class ScoringError(Exception):
    """A scoring request that cannot be carried out, with a message for the user."""


def backend_options(name: str) -> dict[str, Any]:
    """Options for a backend from settings (the model choices an operator makes)."""
    if name == "bertscore":
        options: dict[str, Any] = {}
        if settings.BERTSCORE_MODEL:
            options["model"] = settings.BERTSCORE_MODEL
        if settings.BERTSCORE_NUM_LAYERS:
            options["num_layers"] = settings.BERTSCORE_NUM_LAYERS
        return options
    if name == "comet":
        return {"checkpoint": settings.COMET_MODEL or None}
    if name == "jury":
        return {"judges": list(settings.JURY_JUDGES)}
    return {}


def _configure_embedding_cache() -> None:
    embedding_cache.configure(
        directory=settings.SCORING_EMBEDDING_CACHE_DIR
        if settings.SCORING_EMBEDDING_CACHE_MB
        else None,
        max_bytes=settings.SCORING_EMBEDDING_CACHE_MB << 20,
        memory_bytes=settings.SCORING_EMBEDDING_MEMORY_MB << 20,
    )


# Backends are kept per process: a batch reuses the resolved model, hashes and loaded weights
# instead of validating and resolving them again (no per-batch overhead beyond the database).
_BACKENDS: dict[str, MetricBackend] = {}


def backend_for(name: str, options: dict[str, Any] | None = None) -> MetricBackend:
    """The backend ``name`` with ``options`` (default: from settings), cached per process."""
    _configure_embedding_cache()
    options = backend_options(name) if options is None else options
    key = json.dumps([name, options], sort_keys=True, default=str)
    backend = _BACKENDS.get(key)
    if backend is None:
        backend = _BACKENDS[key] = get_backend(name, **options)
    return backend


# --- presets ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preset:
    key: str
    label: str
    description: str
    metrics: dict[str, dict[str, Any]]  # backend name -> options (replacing the settings)
    # model id -> what must be in the local Hugging Face cache for it (COMET loads its encoder's
    # config and tokenizer as well)
    cache_needs: dict[str, tuple[str, ...]]


PRESETS: dict[str, Preset] = {
    "medalign-helm": Preset(
        key="medalign-helm",
        label="MedAlign/HELM",
        description=(
            "The metrics MedAlign's and HELM's code used: BERTScore F1 with "
            "distilbert-base-uncased, COMET Unbabel/wmt22-comet-da, chrF++, ROUGE-L and BLEU."
        ),
        metrics={
            "bertscore": {"model": "distilbert-base-uncased"},
            "comet": {"checkpoint": "Unbabel/wmt22-comet-da"},
            "chrf": {},
            "rougeL": {},
            "bleu": {},
        },
        cache_needs={
            "distilbert-base-uncased": ("distilbert-base-uncased",),
            "Unbabel/wmt22-comet-da": ("Unbabel/wmt22-comet-da", "xlm-roberta-large"),
        },
    )
}


def _in_hf_cache(repo_id: str) -> bool:
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id=repo_id, local_files_only=True)
    except Exception:  # LocalEntryNotFoundError (an OSError), bad id, ...
        return False
    return True


def preset_missing(preset: Preset) -> list[str]:
    """Model ids the preset needs that are not in the local Hugging Face cache."""
    needed = dict.fromkeys(repo for repos in preset.cache_needs.values() for repo in repos)
    return [repo for repo in needed if not _in_hf_cache(repo)]


def preset_missing_message(preset: Preset, missing: list[str]) -> str:
    """What is missing and how to bring it (this server cannot download models)."""
    names = ", ".join(missing)
    return (
        f"The {preset.label} preset needs models that are not in this server's Hugging Face "
        f"cache: {names}. Models cannot be downloaded here: on a machine with internet access "
        f"run `huggingface-cli download <id>` for each of {names}, then copy the "
        "`models--…` folders from its `~/.cache/huggingface/hub` into this server's cache "
        "(`$HF_HOME/hub`, default `~/.cache/huggingface/hub`) and start the run again."
    )


@dataclass(frozen=True)
class MetricStatus:
    name: str
    label: str
    available: bool
    reason: str = ""


def metric_statuses(names: Iterable[str] = DEFAULT_METRICS) -> list[MetricStatus]:
    """Which metrics can run here, and why not (e.g. no COMET checkpoint configured)."""
    out = []
    for name in names:
        try:
            backend_for(name).check_available()
        except (MetricUnavailable, ValueError) as exc:
            out.append(MetricStatus(name, METRIC_LABELS.get(name, name), False, str(exc)))
        else:
            out.append(MetricStatus(name, METRIC_LABELS.get(name, name), True))
    return out


def metric_config_get_or_create(
    *, backend: MetricBackend, aggregate: str, options: dict[str, Any] | None = None
) -> MetricConfig:
    """The stored identity of a backend's configuration plus the reference aggregation, with
    its provenance (``MetricConfig.provenance``) and the options that rebuild the backend in a
    worker (``identity["backend_options"]``, not part of the hash)."""
    identity = {
        **backend.identity(),
        "reference_aggregate": aggregate,
        "backend_options": options if options is not None else backend_options(backend.name),
    }
    identity_hash = hashlib.sha256(
        json.dumps({"backend": backend.identity_hash(), "aggregate": aggregate}).encode()
    ).hexdigest()
    provenance = {**backend.provenance(), "reference_aggregation": aggregate}
    config, created = MetricConfig.objects.get_or_create(
        identity_hash=identity_hash,
        defaults={
            "backend": backend.name,
            "identity": identity,
            "provenance": provenance,
            "label": f"{METRIC_LABELS.get(backend.name, backend.name)} ({aggregate} reference)",
        },
    )
    if not created and not config.provenance:  # a config stored before provenance existed
        config.provenance = provenance
        config.save(update_fields=["provenance"])
    return config


def _queue_for(backend_name: str) -> str:
    kind = backend_class(backend_name).kind
    return settings.SCORING_MODEL_QUEUE if kind == "model" else settings.SCORING_LEXICAL_QUEUE


@transaction.atomic
def scoring_run_create(
    *,
    dataset: Dataset,
    metrics: Iterable[str],
    actor: User | None = None,
    aggregate: str | None = None,
    batch_size: int | None = None,
    enqueue: bool = True,
    preset: str | None = None,
) -> ScoringRun:
    """Create a run for the metrics that can run here and enqueue batches for what is missing.

    Unavailable metrics are recorded on the run with their reason; the others still run.
    A ``preset`` (``PRESETS``) fixes the metrics and their models; it runs only when all its
    models are in the local cache, otherwise ``ScoringError`` says which are missing and how
    to bring them (nothing is created).
    """
    overrides: dict[str, dict[str, Any]] = {}
    if preset is not None:
        chosen = PRESETS.get(preset)
        if chosen is None:
            raise ScoringError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
        missing = preset_missing(chosen)
        if missing:
            raise ScoringError(preset_missing_message(chosen, missing))
        overrides = chosen.metrics
        metrics = list(chosen.metrics)
    names = list(dict.fromkeys(metrics))
    if not names:
        raise ScoringError("choose at least one metric")
    unknown = [n for n in names if n not in METRIC_LABELS]
    if unknown:
        raise ScoringError(
            f"unknown metric(s): {', '.join(unknown)}; choose from {', '.join(METRIC_LABELS)}"
        )
    aggregate = aggregate or settings.SCORING_REFERENCE_AGGREGATE
    run = ScoringRun.objects.create(
        dataset=dataset, metrics=names, created_by=actor, status=ScoringRun.Status.PENDING
    )
    unavailable: dict[str, str] = {}
    configs: list[MetricConfig] = []
    for name in names:
        options = overrides.get(name, backend_options(name))
        try:
            backend = backend_for(name, options)
            backend.check_available()
        except (MetricUnavailable, ValueError) as exc:
            unavailable[name] = str(exc)
            continue
        configs.append(
            metric_config_get_or_create(backend=backend, aggregate=aggregate, options=options)
        )
    run.configs.set(configs)
    run.unavailable = unavailable
    n_responses = _scorable_responses(dataset).count()
    run.total = n_responses * len(configs)
    run.save(update_fields=["unavailable", "total"])
    batches = _plan_batches(run, configs, batch_size or settings.SCORING_BATCH_SIZE)
    audit_record(
        action=AuditEvent.Action.SCORING_STARTED,
        actor=actor,
        obj=run,
        details={"dataset": dataset.name, "metrics": names, "unavailable": sorted(unavailable)},
    )
    _start(run, batches, enqueue=enqueue)
    return run


def _start(run: ScoringRun, batches: list[ScoringBatch], *, enqueue: bool) -> None:
    """Queue the batches once the run is committed; a run with nothing to do is done at once."""
    if not batches:
        _finish(run)
    elif enqueue:
        transaction.on_commit(lambda: _enqueue(batches))


def _scorable_responses(dataset: Dataset):  # noqa: ANN202 - a queryset
    # Responses of instructions that have at least one reference answer.
    return ModelResponse.objects.filter(
        instruction__dataset=dataset, instruction__references__isnull=False
    ).distinct()


def _plan_batches(
    run: ScoringRun,
    configs: list[MetricConfig],
    size: int,
    *,
    covered: dict[int, set[int]] | None = None,
) -> list[ScoringBatch]:
    """Batches of the responses that have no score yet, sorted by length across the whole run.

    Length order keeps the texts of one forward pass alike in length (little padding) for every
    batch, not just within one; reference answers and sources no longer need to travel with their
    responses, since the embedding cache embeds each distinct text once per model.
    """
    responses = list(
        _scorable_responses(run.dataset).order_by(Length("text"), "id").values_list("id", flat=True)
    )
    batches = []
    for config in configs:
        done = set(
            MetricScore.objects.filter(
                config=config, response__instruction__dataset=run.dataset
            ).values_list("response_id", flat=True)
        )
        done |= (covered or {}).get(config.pk, set())  # already in a pending batch
        ids = [i for i in responses if i not in done]
        for start in range(0, len(ids), size):
            batches.append(
                ScoringBatch(run=run, config=config, response_ids=ids[start : start + size])
            )
    return ScoringBatch.objects.bulk_create(batches)


def _enqueue(batches: Iterable[ScoringBatch]) -> None:
    from scoring.tasks import score_batch

    for batch in batches:
        score_batch.apply_async(args=[batch.pk], queue=_queue_for(batch.config.backend))


@transaction.atomic
def scoring_run_resume(*, run: ScoringRun, enqueue: bool = True) -> ScoringRun:
    """Finish a failed or interrupted run: only what is still missing is scored.

    Failed batches are planned again; pending ones are queued again as they are (a copy of a task
    that is still queued or running finds its batch done, or its scores there, and writes
    nothing), so resuming a run that is in fact still going costs little and breaks nothing.
    """
    run = ScoringRun.objects.select_for_update().get(pk=run.pk)
    run.batches.filter(status=ScoringBatch.Status.FAILED).delete()
    pending = list(run.batches.filter(status=ScoringBatch.Status.PENDING).select_related("config"))
    covered: dict[int, set[int]] = {}
    for batch in pending:
        covered.setdefault(batch.config_id, set()).update(batch.response_ids)
    run.status = ScoringRun.Status.PENDING
    run.error = ""
    run.finished_at = None
    run.save(update_fields=["status", "error", "finished_at"])
    batches = pending + _plan_batches(
        run, list(run.configs.all()), settings.SCORING_BATCH_SIZE, covered=covered
    )
    _start(run, batches, enqueue=enqueue)
    return run


def _pairs_for(responses: list[ModelResponse], aggregate: str) -> tuple[list[Pair], list[int]]:
    """One Pair per (response, reference) to score; ``owner[i]`` is the response of pair i."""
    pairs: list[Pair] = []
    owner: list[int] = []
    for response in responses:
        references = sorted(
            response.instruction.references.all(), key=lambda r: (r.annotator_order, r.annotator)
        )
        if aggregate == "first":
            references = references[:1]
        for reference in references:
            pairs.append(Pair(response.instruction.question, response.text, reference.text))
            owner.append(response.pk)
    return pairs, owner


def scoring_batch_execute(*, batch_id: int) -> int:
    """Score one batch: what is missing only, written once. Returns the number of new scores."""
    batch = ScoringBatch.objects.select_related("run", "config").filter(pk=batch_id).first()
    if batch is None or batch.status == ScoringBatch.Status.DONE:
        return 0  # done already, or re-planned by a resume while this task waited
    run = batch.run
    if run.status == ScoringRun.Status.PENDING:
        ScoringRun.objects.filter(pk=run.pk, status=ScoringRun.Status.PENDING).update(
            status=ScoringRun.Status.RUNNING, started_at=timezone.now()
        )
    started = time.perf_counter()
    already = set(
        MetricScore.objects.filter(
            config=batch.config, response_id__in=batch.response_ids
        ).values_list("response_id", flat=True)
    )
    todo = [i for i in batch.response_ids if i not in already]
    created = 0
    if todo:
        aggregate = batch.config.identity.get("reference_aggregate", "first")
        responses = list(
            ModelResponse.objects.filter(pk__in=todo)
            .select_related("instruction")
            .prefetch_related("instruction__references")
        )
        backend = backend_for(batch.config.backend, batch.config.identity.get("backend_options"))
        pairs, owner = _pairs_for(responses, aggregate)
        scored = backend.score_detailed(pairs) if pairs else []
        scores = _aggregate(batch.config, backend.primary, owner, pairs, scored, aggregate)
        with transaction.atomic():
            MetricScore.objects.bulk_create(scores, ignore_conflicts=True)
        created = len(scores)
    ScoringBatch.objects.filter(pk=batch.pk).update(
        status=ScoringBatch.Status.DONE,
        attempts=batch.attempts + 1,
        seconds=time.perf_counter() - started,
        error="",
    )
    _maybe_finish(run.pk)
    return created


def _aggregate(
    config: MetricConfig,
    primary: str,
    owner: list[int],
    pairs: list[Pair],
    scored: list[Scored],
    aggregate: str,
) -> list[MetricScore]:
    by_response: dict[int, list[dict[str, float]]] = {}
    truncated: dict[int, bool] = {}
    for response_id, item in zip(owner, scored, strict=True):
        by_response.setdefault(response_id, []).append(item.values)
        # any pair that went into the aggregate was cut: the score judged part of the text
        truncated[response_id] = truncated.get(response_id, False) or item.truncated
    out = []
    for response_id, per_ref in by_response.items():
        if aggregate == "max":
            chosen = max(per_ref, key=lambda v: v[primary])
        elif aggregate == "mean":
            chosen = {k: sum(v[k] for v in per_ref) / len(per_ref) for k in per_ref[0]}
        else:
            chosen = per_ref[0]
        out.append(
            MetricScore(
                response_id=response_id,
                config=config,
                value=float(chosen[primary]),
                values={k: float(v) for k, v in chosen.items()},
                per_reference=[{k: float(x) for k, x in v.items()} for v in per_ref],
                aggregate=aggregate,
                truncated=truncated[response_id],
            )
        )
    return out


def scoring_batch_fail(*, batch_id: int, error: str) -> None:
    """Record a batch that failed for good (retries exhausted) and fail the run if it is over."""
    batch = ScoringBatch.objects.filter(pk=batch_id).first()
    if batch is None:
        return
    ScoringBatch.objects.filter(pk=batch_id).update(
        status=ScoringBatch.Status.FAILED, error=error[:2000], attempts=batch.attempts + 1
    )
    _maybe_finish(batch.run_id)


def _maybe_finish(run_id: int) -> None:
    with transaction.atomic():
        run = ScoringRun.objects.select_for_update().get(pk=run_id)
        if run.status in (ScoringRun.Status.DONE, ScoringRun.Status.FAILED):
            return
        counts = run.batches.aggregate(
            pending=Count("id", filter=Q(status=ScoringBatch.Status.PENDING)),
            failed=Count("id", filter=Q(status=ScoringBatch.Status.FAILED)),
        )
        if counts["pending"]:
            return
        if counts["failed"]:
            errors = list(
                run.batches.filter(status=ScoringBatch.Status.FAILED)
                .values_list("error", flat=True)
                .distinct()[:3]
            )
            run.status = ScoringRun.Status.FAILED
            run.error = f"{counts['failed']} batch(es) failed: " + " | ".join(errors)
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "error", "finished_at"])
            return
        _finish(run)


def _finish(run: ScoringRun) -> None:
    run.status = ScoringRun.Status.DONE
    run.finished_at = timezone.now()
    if run.started_at is None:
        run.started_at = run.finished_at
    run.save(update_fields=["status", "finished_at", "started_at"])


# --- correlation reports -----------------------------------------------------------------------


REPORT_MAX_RESAMPLES = 100_000
REPORT_TABLES = ("correlation", "leaderboard", "responses", "metrics")


class ReportError(Exception):
    """A report request that cannot be carried out, with a message for the user."""


def _report_parameters(
    *,
    n_resamples: int,
    seed: int | None,
    confidence: float,
    config_ids: list[int] | None,
    exclude_truncated: bool = False,
    learned_metric: bool = False,
) -> dict[str, Any]:
    if not 1 <= int(n_resamples) <= REPORT_MAX_RESAMPLES:
        raise ReportError(f"resamples must be between 1 and {REPORT_MAX_RESAMPLES:,}")
    if not 0.5 <= float(confidence) < 1.0:
        raise ReportError("confidence must be at least 0.5 and below 1")
    if seed is not None and not 0 <= int(seed) < 2**32:
        raise ReportError("seed must be a whole number from 0 to 4294967295")
    # A seed is always recorded, drawn at random when none is given, so any report can be
    # recomputed exactly (same cluster draws) from its parameters.
    return {
        "n_resamples": int(n_resamples),
        "seed": int(seed) if seed is not None else secrets.randbelow(2**31),
        "seed_given": seed is not None,
        "confidence": float(confidence),
        "config_ids": sorted(int(c) for c in config_ids) if config_ids else None,
        "exclude_truncated": bool(exclude_truncated),
        "learned_metric": bool(learned_metric),
    }


@transaction.atomic
def report_create(
    *,
    dataset: Dataset,
    actor: User | None,
    n_resamples: int = 10_000,
    seed: int | None = None,
    confidence: float = 0.95,
    config_ids: list[int] | None = None,
    exclude_truncated: bool = False,
    learned_metric: bool = False,
    title: str = "",
    request: HttpRequest | None = None,
    enqueue: bool = True,
) -> CorrelationReport:
    """A pending report; its computation is queued once the row is committed.

    ``exclude_truncated``: leave out every score whose metric model cut the text.
    ``learned_metric``: add the metric learned from the clinicians' rankings (cross-validated
    by instruction; ``scoring.learned``) as one more row of the correlation table.
    """
    parameters = _report_parameters(
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        config_ids=config_ids,
        exclude_truncated=exclude_truncated,
        learned_metric=learned_metric,
    )
    report = CorrelationReport.objects.create(
        dataset=dataset,
        title=title[:200],
        status=CorrelationReport.Status.PENDING,
        parameters=parameters,
        created_by=actor,
    )
    audit_record(
        action=AuditEvent.Action.REPORT_CREATED,
        actor=actor,
        request=request,
        obj=report,
        details={"dataset": dataset.name, **parameters},
    )
    if enqueue:
        transaction.on_commit(lambda: _enqueue_report(report.pk))
    return report


def _enqueue_report(report_id: int) -> None:
    from scoring.tasks import compute_report

    try:
        compute_report.delay(report_id)
    except Exception as exc:
        # The broker is down: say so on the report rather than leave it pending forever.
        logger.warning("could not queue report %s: %s", report_id, exc)
        CorrelationReport.objects.filter(pk=report_id).update(
            status=CorrelationReport.Status.FAILED,
            error=f"could not queue the computation (task broker unreachable): {exc}"[:2000],
            finished_at=timezone.now(),
        )


def _library_versions() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "django": django.get_version(),
    }


def report_compute(*, report_id: int) -> CorrelationReport:
    """Compute and store a report's results and provenance; failures are kept with the reason.

    A report that is already done is returned unchanged (a redelivered task does nothing).
    """
    from scoring.analysis import compute_results, response_rows
    from scoring.analysis import metric_provenance as analysis_provenance
    from scoring.selectors import report_inputs

    with transaction.atomic():
        report = (
            CorrelationReport.objects.select_for_update()
            .select_related("dataset")
            .get(pk=report_id)
        )
        if report.status == CorrelationReport.Status.DONE:
            return report
        report.status = CorrelationReport.Status.RUNNING
        report.error = ""
        report.save(update_fields=["status", "error"])
    try:
        params = report.parameters
        inputs = report_inputs(
            dataset=report.dataset,
            config_ids=params.get("config_ids"),
            exclude_truncated=bool(params.get("exclude_truncated", False)),
        )
        if len(inputs.table) == 0:
            raise ReportError(
                "no submitted reviews to analyse on this dataset yet (reviews marked "
                "'cannot assess' are left out)"
            )
        labels = {m["key"]: m["label"] for m in inputs.metrics}
        excluded = bool(params.get("exclude_truncated", False))
        metric_provenance = [
            {
                "key": m["key"],
                "label": m["label"],
                "config_id": m["config_id"],
                "backend": m["backend"],
                "identity_hash": m["identity_hash"],
                **analysis_provenance(m["identity"], m.get("provenance")),
                # Responses in this report whose score judged a cut text, and whether the
                # report left those scores out.
                "n_truncated": int(
                    numpy.unique(inputs.table.response[inputs.truncated[m["key"]]]).shape[0]
                ),
                "truncated_excluded": excluded,
            }
            for m in inputs.metrics
        ]
        scores = dict(inputs.scores)
        learned_fit = None
        if params.get("learned_metric"):
            learned_fit = _learned_metric_fit(inputs)
            scores[learned.LEARNED_KEY] = learned_fit["oof"]
            labels[learned.LEARNED_KEY] = learned.LEARNED_LABEL
            metric_provenance.append(learned_fit["provenance_row"])
        results = compute_results(inputs.table, scores, params, labels, variants=inputs.variants)
        results["learned_metric"] = learned_fit["info"] if learned_fit else None
        results["metric_provenance"] = metric_provenance
        results["responses"] = response_rows(
            inputs.table,
            scores,
            clinician_pseudonym=inputs.clinician_pseudonym,
            instruction_code=inputs.instruction_code,
            error_tags=inputs.error_tags,
            simulated_review_ids=inputs.simulated_review_ids,
            truncated=inputs.truncated,
        )
        # Each response's generation provenance (context length, model identity, versions,
        # prompt sha256…): ids, hashes and numbers only.
        add_generation_columns(results["responses"])
        n_simulated = len(inputs.simulated_review_ids)
        provenance = {
            "dataset": {
                "id": report.dataset.pk,
                "name": report.dataset.name,
                "version": report.dataset.updated_at.isoformat(),
                "is_synthetic": report.dataset.is_synthetic,
            },
            "metric_configs": inputs.metrics,
            "model_variants": {
                name: {"base_model": base, "context_length": length}
                for name, (base, length) in sorted(inputs.variants.items())
            },
            "review_ids": inputs.review_ids,
            "simulated_review_ids": inputs.simulated_review_ids,
            "counts": {
                **results["counts"],
                "reviews_real": len(inputs.review_ids) - n_simulated,
                "reviews_simulated": n_simulated,
                "reviews_cannot_assess_excluded": inputs.n_cannot_assess,
                # Responses that named a model were shown to clinicians with those words masked.
                "responses_masked": ModelResponse.objects.filter(
                    instruction__dataset=report.dataset, names_own_model=True
                ).count(),
            },
            "library_versions": _library_versions(),
            "report_created_at": report.created_at.isoformat(),
            "computed_at": timezone.now().isoformat(),
            "method": "scoring.analysis.compute_results (see the Method page)",
        }
    except Exception as exc:
        logger.exception("report %s failed", report_id)
        # Shown to researchers: the type only, redacted like the logs (medalign_site.logs).
        CorrelationReport.objects.filter(pk=report_id).update(
            status=CorrelationReport.Status.FAILED,
            # The app's own ReportError messages are written for researchers and quote no data.
            error=(str(exc) if isinstance(exc, ReportError) else redact_exception(exc))[:2000],
            finished_at=timezone.now(),
        )
        report.refresh_from_db()
        return report
    report.results = results
    report.provenance = provenance
    report.status = CorrelationReport.Status.DONE
    report.finished_at = timezone.now()
    with transaction.atomic():
        report.save(update_fields=["results", "provenance", "status", "finished_at"])
        if learned_fit is not None:
            _learned_metric_store(report=report, fit=learned_fit)
    return report


def _learned_metric_fit(inputs: Any) -> dict[str, Any]:
    """Cross-validated scores of the learned metric, and the model fitted on every review."""
    from scoring.metrics.base import file_sha256
    from scoring.selectors import learned_texts

    started = time.perf_counter()
    questions, responses, references = learned_texts(table=inputs.table)
    unique = sorted(set(questions) | set(responses) | set(references))
    index = {text: k for k, text in enumerate(unique)}
    emb = learned.embed_texts(unique)

    def rows(texts: list[str]) -> numpy.ndarray:
        return emb[[index[t] for t in texts]]

    features, names = learned.build_features(
        inputs.scores,
        numpy.array([len(t.split()) for t in responses], dtype=float),
        rows(questions),
        rows(responses),
        rows(references),
    )
    embed_s = time.perf_counter() - started
    oof, info = learned.cross_validated_scores(inputs.table, features)
    started = time.perf_counter()
    final, n_pairs = learned.fit_ranker(inputs.table, features, numpy.arange(len(inputs.table)))
    path = learned.minilm_path()
    provenance = {
        "method": info["method"],
        "cv": info["cv"],
        "c": info["c"],
        "embedding_model": learned.EMBEDDING_MODEL_ID,
        "embedding_weights_sha256": file_sha256(path / "model.safetensors"),
        "embedding_pooling": "mean over tokens, L2-normalised",
        "embedding_max_tokens": learned.EMBEDDING_MAX_TOKENS,
        "feature_metrics": [
            {"key": m["key"], "config_id": m["config_id"], "identity_hash": m["identity_hash"]}
            for m in inputs.metrics
        ],
        "versions": learned.versions(),
        "n_reviews": info["n_reviews"],
        "n_pairs": n_pairs,
    }
    info = {
        **info,
        "folds": [{k: v for k, v in f.items() if k != "test_instructions"} for f in info["folds"]],
        "n_reviews_final_model": info["n_reviews"],
        "n_pairs_final_model": n_pairs,
        "embedding_seconds": embed_s,
        "final_fit_seconds": time.perf_counter() - started,
        "feature_names": names[:8] + ([f"... {len(names) - 8} more"] if len(names) > 8 else []),
    }
    return {
        "oof": oof,
        "info": info,
        "model": final,
        "names": names,
        "provenance": provenance,
        "provenance_row": {
            "key": learned.LEARNED_KEY,
            "label": learned.LEARNED_LABEL,
            "config_id": None,
            "backend": "learned",
            "identity_hash": None,
            "model": f"pairwise logistic regression + {learned.EMBEDDING_MODEL_ID}",
            "weights_sha256": provenance["embedding_weights_sha256"],
            "tokenizer": "MiniLM word pieces (max 256)",
            "library_versions": provenance["versions"],
            "n_truncated": 0,
            "truncated_excluded": False,
        },
    }


def _learned_metric_store(*, report: CorrelationReport, fit: dict[str, Any]) -> None:
    model = LearnedMetricModel.objects.create(
        dataset=report.dataset,
        report=report,
        feature_names=fit["names"],
        parameters=fit["model"].as_dict(),
        provenance=fit["provenance"],
        n_reviews=fit["provenance"]["n_reviews"],
        n_pairs=fit["provenance"]["n_pairs"],
    )
    report.results["learned_metric"]["stored_model_id"] = model.pk
    report.save(update_fields=["results"])


def report_export_record(
    *,
    report: CorrelationReport,
    table: str,
    fmt: str,
    channel: str,
    actor: User | None,
    rows: int,
    request: HttpRequest | None = None,
) -> None:
    """Audit one export (page download, API or command line) before any row leaves."""
    audit_record(
        action=AuditEvent.Action.EXPORT,
        actor=actor,
        request=request,
        obj=report,
        details={
            "report": report.pk,
            "dataset": report.dataset.name,
            "table": table,
            "format": fmt,
            "channel": channel,
            "rows": rows,
        },
    )


@transaction.atomic
def model_variant_set(
    *, dataset: Dataset, model_name: str, base_model: str, context_length: int | None
) -> ModelVariant:
    """Declare that ``model_name`` is ``base_model`` at ``context_length`` on ``dataset``."""
    variant, _ = ModelVariant.objects.update_or_create(
        dataset=dataset,
        model_name=model_name,
        defaults={"base_model": base_model, "context_length": context_length},
    )
    return variant


API_TOKEN_PREFIX = "mar_"  # noqa: S105 - a label, not a secret


def api_token_create(*, user: User, name: str) -> tuple[ApiToken, str]:
    """A new read-only API token; returns it with the key, which is never stored or shown again."""
    key = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=(name.strip() or "API token")[:100],
        prefix=key[:12],
        key_hash=hashlib.sha256(key.encode()).hexdigest(),
    )
    audit_record(
        action=AuditEvent.Action.API_TOKEN_CREATED,
        actor=user,
        obj=token,
        details={"name": token.name, "prefix": token.prefix},
    )
    return token, key


def api_token_revoke(*, token: ApiToken) -> None:
    if token.revoked_at is None:
        revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if revoked:
            audit_record(
                action=AuditEvent.Action.API_TOKEN_REVOKED,
                actor=token.user,
                obj=token,
                details={"prefix": token.prefix},
            )


def api_token_touch(*, token: ApiToken) -> None:
    # One write a minute at most: an API client polling in a loop should not write every call.
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
