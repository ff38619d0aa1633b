"""The grading batch task: a thin wrapper on the run machinery's ``BatchTask``, taking the batch
id (registered with Celery by ``scoring.tasks``)."""

from celery import shared_task

from scoring.runs.tasks import BATCH_TASK_OPTIONS, BatchTask


@shared_task(name="scoring.grading.batch", run_kind="grading", **BATCH_TASK_OPTIONS)  # type: ignore[untyped-decorator]
def grading_batch(self: BatchTask, batch_id: int) -> int:
    return self.run_batch(batch_id)
