"""The report's Celery task: a thin wrapper taking the report id."""

from celery import shared_task

from scoring.reports import compute


# The name it was registered under in scoring/tasks.py: queued messages still find it.
@shared_task(name="scoring.tasks.compute_report", acks_late=True)  # type: ignore[untyped-decorator]
def compute_report(report_id: int) -> None:
    # Failures are recorded on the report itself (status failed, with the reason).
    compute.report_compute(report_id=report_id)
