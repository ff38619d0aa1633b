"""Scoring runs: a dataset's responses scored with some metrics, on the shared run machinery.

A run is split into batches of response ids under one metric configuration, one Celery task
each (``scoring.runs.tasks.score_batch``), taking only the batch id. Scores are unique per
(response, metric configuration): a batch first drops the responses that already have a score,
and inserts with ``ignore_conflicts``, so a re-run computes nothing twice and a batch executed
again (re-queued by the sweep, redelivered by the broker) cannot duplicate anything.
"""

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.functions import Length

from review.models import AuditEvent, Dataset, ModelResponse, User
from review.services.audit import audit_record
from scoring.llm.records import record_text
from scoring.metrics import MetricUnavailable, Pair, Scored, backend_class
from scoring.models import MetricConfig, MetricScore, ScoringBatch, ScoringRun
from scoring.runs import machinery
from scoring.runs.metric_configs import (
    METRIC_LABELS,
    PRESETS,
    ScoringError,
    backend_for,
    backend_options,
    metric_config_get_or_create,
    preset_missing,
    preset_missing_message,
)
from scoring.runs.tasks import score_batch


def _queue_for(backend_name: str) -> str:
    kind = backend_class(backend_name).kind
    return settings.SCORING_MODEL_QUEUE if kind == "model" else settings.SCORING_LEXICAL_QUEUE


def _batch_queue(batch: ScoringBatch) -> str:
    return _queue_for(batch.config.backend)


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
    overrides: dict[str, dict[str, Any] | None] = {}
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
        options = overrides.get(name)
        if options is None:  # not in a preset, or one that takes this server's settings for it
            options = backend_options(name)
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
    machinery.run_start(SCORING, run, batches, enqueue=enqueue)
    return run


def _scorable_responses(dataset: Dataset) -> QuerySet[ModelResponse]:
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
        done |= (covered or {}).get(config.pk, set())  # already in an open batch
        ids = [i for i in responses if i not in done]
        for start in range(0, len(ids), size):
            batches.append(ScoringBatch(run=run, config=config, item_ids=ids[start : start + size]))
    return ScoringBatch.objects.bulk_create(batches)


def _replan(run: ScoringRun, open_batches: list[ScoringBatch]) -> list[ScoringBatch]:
    covered: dict[int, set[int]] = {}
    for batch in open_batches:
        covered.setdefault(batch.config_id, set()).update(batch.item_ids)
    return _plan_batches(run, list(run.configs.all()), settings.SCORING_BATCH_SIZE, covered=covered)


def scoring_run_resume(*, run: ScoringRun, enqueue: bool = True) -> ScoringRun:
    """Finish a failed or interrupted run: only what is still missing is scored
    (``machinery.run_resume``)."""
    return machinery.run_resume(kind=SCORING, run=run, enqueue=enqueue)


def _pairs_for(
    responses: list[ModelResponse], aggregate: str, *, records: bool = False
) -> tuple[list[Pair], list[int]]:
    """One Pair per (response, reference) to score; ``owner[i]`` is the response of pair i.

    ``records``: each pair carries its patient's serialized record (a backend that reads it:
    the LLM jury), read once per patient per worker process (``record_text``'s cache)."""
    pairs: list[Pair] = []
    owner: list[int] = []
    for response in responses:
        patient = response.instruction.patient if records else None
        record = record_text(patient) if patient is not None else None
        references = sorted(
            response.instruction.references.all(), key=lambda r: (r.annotator_order, r.annotator)
        )
        if aggregate == "first":
            references = references[:1]
        for reference in references:
            pairs.append(
                Pair(response.instruction.question, response.text, reference.text, record=record)
            )
            owner.append(response.pk)
    return pairs, owner


def scoring_batch_execute(*, batch_id: int, task_id: str | None = None) -> int:
    """Score one batch: what is missing only, written once. Returns the number of new scores.

    ``task_id``: the Celery task running it (``machinery.batch_claim``); None inline.
    """
    return machinery.batch_execute(
        kind=SCORING, batch_id=batch_id, task_id=task_id, work=_score_batch
    )


def _score_batch(batch: ScoringBatch) -> int:
    config = MetricConfig.objects.get(pk=batch.config_id)
    already = set(
        MetricScore.objects.filter(config=config, response_id__in=batch.item_ids).values_list(
            "response_id", flat=True
        )
    )
    todo = [i for i in batch.item_ids if i not in already]
    if not todo:
        return 0
    aggregate = config.identity.get("reference_aggregate", "first")
    backend = backend_for(config.backend, config.identity.get("backend_options"))
    responses = list(
        ModelResponse.objects.filter(pk__in=todo)
        .select_related("instruction__patient" if backend.reads_record else "instruction")
        .prefetch_related("instruction__references")
    )
    pairs, owner = _pairs_for(responses, aggregate, records=backend.reads_record)
    scored = backend.score_detailed(pairs) if pairs else []
    scores = _aggregate(config, backend.primary, owner, pairs, scored, aggregate)
    with transaction.atomic():
        MetricScore.objects.bulk_create(scores, ignore_conflicts=True)
    return len(scores)


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


def _scores_produced(run: ScoringRun) -> int:
    # Scores of the run's configurations on its dataset's scorable responses, whichever run
    # wrote them: a re-run reuses what exists.
    return (
        MetricScore.objects.filter(
            config__in=run.configs.all(),
            response__instruction__dataset_id=run.dataset_id,
            response__instruction__references__isnull=False,
        )
        .distinct()
        .count()
    )


def scoring_batch_fail(*, batch_id: int, error: str) -> None:
    """Record a batch that failed for good and fail the run once nothing else is open."""
    machinery.batch_fail(kind=SCORING, batch_id=batch_id, error=error)


SCORING: machinery.RunKind[ScoringRun, ScoringBatch] = machinery.register(
    machinery.RunKind(
        name="scoring",
        run_model=ScoringRun,
        batch_model=ScoringBatch,
        task=score_batch,
        execute=scoring_batch_execute,
        replan=_replan,
        queue_for=_batch_queue,
        produced=_scores_produced,
        produced_name="scored",
    )
)
