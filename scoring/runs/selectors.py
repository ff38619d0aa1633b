"""Reads the run pages and commands need: a run's progress, recent runs."""

from dataclasses import dataclass

from django.db.models import Count, QuerySet

from scoring.models import MetricScore, ScoringBatch, ScoringRun


@dataclass(frozen=True)
class RunProgress:
    run_id: int
    status: str
    scored: int
    total: int
    batches_done: int
    batches_running: int  # claimed by a worker (one that died is re-queued by the sweep)
    batches_failed: int
    batches_total: int
    error: str
    unavailable: dict[str, str]

    @property
    def percent(self) -> int:
        return 100 if self.total == 0 else min(100, round(100 * self.scored / self.total))

    def as_dict(self) -> dict[str, object]:
        return {
            "run": self.run_id,
            "status": self.status,
            "scored": self.scored,
            "total": self.total,
            "percent": self.percent,
            "batches_done": self.batches_done,
            "batches_running": self.batches_running,
            "batches_failed": self.batches_failed,
            "batches_total": self.batches_total,
            "error": self.error,
            "unavailable": self.unavailable,
        }


def run_progress(run: ScoringRun) -> RunProgress:
    """Progress counted from the scores that exist, so it is right after any crash or resume."""
    run.refresh_from_db(fields=["status", "error", "unavailable", "total"])
    scored = (
        MetricScore.objects.filter(
            config__in=run.configs.all(),
            response__instruction__dataset_id=run.dataset_id,
            response__instruction__references__isnull=False,
        )
        .distinct()
        .count()
    )
    batches = {
        row["status"]: row["n"]
        for row in run.batches.values("status").annotate(n=Count("id")).order_by()
    }
    return RunProgress(
        run_id=run.pk,
        status=run.status,
        scored=scored,
        total=run.total,
        batches_done=batches.get(ScoringBatch.Status.DONE, 0),
        batches_running=batches.get(ScoringBatch.Status.RUNNING, 0),
        batches_failed=batches.get(ScoringBatch.Status.FAILED, 0),
        batches_total=sum(batches.values()),
        error=run.error,
        unavailable=run.unavailable,
    )


def runs_recent(limit: int = 50) -> QuerySet[ScoringRun]:
    return ScoringRun.objects.select_related("dataset", "created_by").prefetch_related("configs")[
        :limit
    ]
