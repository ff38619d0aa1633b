"""Celery tasks of the run machinery: the base every batch task uses, and the sweep.

A kind's batch task is a thin wrapper (``scoring.runs.tasks.score_batch`` is the model)::

    @shared_task(name="myapp.tasks.do_batch", run_kind="mykind", **BATCH_TASK_OPTIONS)
    def do_batch(self: BatchTask, batch_id: int) -> int:
        return self.run_batch(batch_id)
"""

import logging
from typing import Any

from celery import Task, shared_task

from scoring.runs import machinery

logger = logging.getLogger(__name__)


class BatchTask(Task):  # type: ignore[misc]  # Celery's Task is untyped
    """Runs one batch of the run kind named ``run_kind`` (an option of the task decorator)."""

    run_kind: str = ""

    def run_batch(self, batch_id: int) -> int:
        # A transient error is retried with backoff (autoretry_for); any other has failed the
        # batch already (machinery.batch_execute).
        kind = machinery.kind_named(self.run_kind)
        return int(kind.execute(batch_id=batch_id, task_id=self.request.id))

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        # Only transient errors reach here unrecorded: their retries are exhausted.
        if isinstance(exc, machinery.TRANSIENT):
            batch_id = args[0] if args else kwargs.get("batch_id")
            machinery.batch_fail(
                kind=machinery.kind_named(self.run_kind),
                batch_id=batch_id,
                error=machinery.describe(exc),
            )


# Late acknowledgement stays: a pool process killed mid-batch gives its message back at once
# (reject_on_worker_lost) and the batch is claimed again by the same task id. A whole worker
# killed keeps its message unacknowledged in the broker for the visibility timeout; the sweep
# (``scoring.runs.sweeper``) does not wait for that.
BATCH_TASK_OPTIONS: dict[str, Any] = {
    "base": BatchTask,
    "bind": True,
    "autoretry_for": machinery.TRANSIENT,
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": 5,
    "acks_late": True,
    "reject_on_worker_lost": True,
}


# The sweep as a task, for an operator (``celery -A medalign_site call scoring.runs.sweep``):
# the workers sweep by themselves on a timer (scoring.runs.sweeper). Not acknowledged late: a
# sweep lost with its worker needs no second copy.
@shared_task(name="scoring.runs.sweep", acks_late=False, ignore_result=True)  # type: ignore[untyped-decorator]
def sweep_runs() -> str:
    return machinery.runs_sweep().summary()


@shared_task(name="scoring.tasks.score_batch", run_kind="scoring", **BATCH_TASK_OPTIONS)  # type: ignore[untyped-decorator]
def score_batch(self: BatchTask, batch_id: int) -> int:
    return self.run_batch(batch_id)
