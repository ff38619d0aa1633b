"""The generation batch task: a thin wrapper taking the batch id (registered by scoring.tasks).

Options as the scoring batch's (``scoring.tasks.score_batch``): late acknowledgement, so a killed
worker's batch is delivered again; transient database and connection errors retried with
backoff; anything else recorded on the batch and the run, redacted. Its name is fixed so queued
messages still find it when the code moves onto the shared run machinery.
"""

from typing import Any

from celery import Task, shared_task
from django.db import InterfaceError, OperationalError

# As scoring.tasks.TRANSIENT (not imported: scoring.tasks imports this module): database hiccups
# and dropped connections are retried; an endpoint's own retries happen inside the backend.
TRANSIENT = (OperationalError, InterfaceError, ConnectionError, TimeoutError)


class GenerationBatchTask(Task):  # type: ignore[misc]  # Celery's Task is untyped
    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        # Only transient errors reach here unrecorded: their retries are exhausted.
        if isinstance(exc, TRANSIENT):
            from scoring.generation import runs

            batch_id = args[0] if args else kwargs.get("batch_id")
            runs.batch_fail(batch_id=batch_id, error=runs.describe(exc))


@shared_task(  # type: ignore[untyped-decorator]
    name="scoring.generation.batch",
    base=GenerationBatchTask,
    bind=True,
    autoretry_for=TRANSIENT,
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=5,
    acks_late=True,
)
def generation_batch(self: Task, batch_id: int) -> int:
    from scoring.generation import runs

    try:
        return runs.generation_batch_execute(batch_id=batch_id, task_id=self.request.id)
    except TRANSIENT:
        raise  # retried with backoff
    except Exception as exc:
        runs.batch_fail(batch_id=batch_id, error=runs.describe(exc))
        raise
