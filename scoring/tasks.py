"""Celery tasks: thin wrappers that take ids. Job state lives in the models.

The run tasks (a scoring batch, the run sweep) live in ``scoring.runs.tasks``, the report's in
``scoring.reports.tasks``; importing them here is what registers them with Celery's
autodiscovery. Their registered names are fixed (``name=``), so messages queued before they
moved still find them. What stays here is per worker process: the libraries' set-up.
"""

import logging
import os
import sys
from typing import Any

from celery.signals import worker_process_init
from django.conf import settings

from scoring.generation.tasks import generation_batch
from scoring.grading.tasks import grading_batch
from scoring.reports.tasks import compute_report
from scoring.runs.tasks import score_batch, sweep_runs

logger = logging.getLogger(__name__)

__all__ = ["compute_report", "generation_batch", "grading_batch", "score_batch", "sweep_runs"]


@worker_process_init.connect
def _configure_worker_process(**_: Any) -> None:
    # Runs in each prefork child after fork, before any model is loaded (models load lazily on the
    # first batch and stay cached in this process: scoring.weights). Torch is told its thread
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
