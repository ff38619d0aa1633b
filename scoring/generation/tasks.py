"""The generation batch task: a thin wrapper on the run machinery's ``BatchTask``, taking the
batch id (registered with Celery by ``scoring.tasks``).

Its options are every batch task's (``scoring.runs.tasks.BATCH_TASK_OPTIONS``); its name is the
one it had before generation moved onto the shared machinery, so messages queued then still
find it.
"""

from celery import shared_task

from scoring.runs.tasks import BATCH_TASK_OPTIONS, BatchTask


@shared_task(name="scoring.generation.batch", run_kind="generation", **BATCH_TASK_OPTIONS)  # type: ignore[untyped-decorator]
def generation_batch(self: BatchTask, batch_id: int) -> int:
    return self.run_batch(batch_id)
