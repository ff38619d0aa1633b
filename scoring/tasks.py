"""Celery tasks: thin wrappers that take ids. Job state lives in ScoringRun/ScoringBatch."""

import logging
import os
import sys
from typing import Any

from celery import Task, shared_task
from celery.signals import worker_process_init
from django.conf import settings
from django.db import InterfaceError, OperationalError

from medalign_site.logs import redact_exception
from scoring import services

logger = logging.getLogger(__name__)

# Database hiccups and dropped connections are worth retrying; anything else fails the batch.
TRANSIENT = (OperationalError, InterfaceError, ConnectionError, TimeoutError)


def _describe(exc: BaseException) -> str:
    # Shown to researchers: the error type only, redacted like the logs (a message can quote the
    # response or reference text a metric choked on).
    return redact_exception(exc)[:500]


class BatchTask(Task):
    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        # Only transient errors reach here unrecorded: their retries are exhausted.
        if isinstance(exc, TRANSIENT):
            batch_id = args[0] if args else kwargs.get("batch_id")
            services.scoring_batch_fail(batch_id=batch_id, error=_describe(exc))


@shared_task(
    base=BatchTask,
    bind=True,
    autoretry_for=TRANSIENT,
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=5,
    acks_late=True,
)
def score_batch(self: Task, batch_id: int) -> int:
    try:
        return services.scoring_batch_execute(batch_id=batch_id)
    except TRANSIENT:
        raise  # retried with backoff
    except Exception as exc:
        services.scoring_batch_fail(batch_id=batch_id, error=_describe(exc))
        raise


@worker_process_init.connect
def _configure_worker_process(**_: Any) -> None:
    # Runs in each prefork child after fork, before any model is loaded (models load lazily on the
    # first batch and stay cached in this process: scoring.metrics.base). Torch is told its thread
    # count through the environment so that lexical-only workers never import it; left to itself
    # in a pool child it can settle on fewer threads than the cores it is given.
    threads = str(settings.TORCH_NUM_THREADS or os.cpu_count() or 1)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(threads))
    if settings.SCORING_IMPORT_AT_START:
        # A model-queue worker can pay the libraries' import (seconds) when its process starts
        # rather than in its first batch. Weights still load lazily, on the first batch.
        import torch

        torch.set_num_threads(int(threads))
        import bert_score.utils  # noqa: F401
        import transformers  # noqa: F401

        from scoring.metrics.bertscore import BertScoreBackend  # noqa: F401 - the import is the point
        from scoring.metrics.comet import import_comet

        import_comet()
        logger.info("scoring libraries imported")


@shared_task(acks_late=True)
def compute_report(report_id: int) -> None:
    # Failures are recorded on the report itself (status failed, with the reason).
    services.report_compute(report_id=report_id)


# Generation runs (issue 14): imported here so that Celery's autodiscovery registers the task.
from scoring.generation.tasks import generation_batch  # noqa: E402

__all__ = ["compute_report", "generation_batch", "score_batch"]
