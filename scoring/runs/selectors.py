"""Reads the run pages and commands need: a run's progress (any kind), recent scoring runs."""

from dataclasses import dataclass, field

from django.db.models import Count, QuerySet

from scoring.models import ScoringRun
from scoring.models.runs import BatchBase, RunBase
from scoring.runs import machinery


@dataclass(frozen=True)
class RunProgress:
    """Where a run of any kind stands. ``produced`` counts its results that exist (scores,
    responses); the JSON also names them as the kind does (``scored``, ``generated``)."""

    run_id: int
    kind: str
    status: str
    produced: int
    total: int
    batches_done: int
    batches_running: int  # claimed by a worker (one that died is re-queued by the sweep)
    batches_failed: int
    batches_total: int
    error: str
    unavailable: dict[str, str] = field(default_factory=dict)  # scoring: metric -> reason
    phase: str = ""  # what the run is doing before results appear (RunKind.phase)

    @property
    def percent(self) -> int:
        return 100 if self.total == 0 else min(100, round(100 * self.produced / self.total))

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "run": self.run_id,
            "kind": self.kind,
            "status": self.status,
            "produced": self.produced,
            "total": self.total,
            "percent": self.percent,
            "batches_done": self.batches_done,
            "batches_running": self.batches_running,
            "batches_failed": self.batches_failed,
            "batches_total": self.batches_total,
            "error": self.error,
            "unavailable": self.unavailable,
            "phase": self.phase,
        }
        named = machinery.kind_named(self.kind).produced_name
        if named:
            out[named] = self.produced
        return out


def run_progress(run: RunBase) -> RunProgress:
    """Progress counted from the results that exist (the kind's ``produced``), so it is right
    after any crash or resume."""
    kind = machinery.kind_of(run)
    scoring = isinstance(run, ScoringRun)  # only scoring runs record unavailable metrics
    run.refresh_from_db(fields=["status", "error", "total", *(["unavailable"] if scoring else [])])
    batches = {
        row["status"]: row["n"]
        for row in kind.batch_model._default_manager.filter(run_id=run.pk)
        .values("status")
        .annotate(n=Count("id"))
        .order_by()
    }
    return RunProgress(
        run_id=run.pk,
        kind=kind.name,
        status=run.status,
        produced=kind.produced(run),
        total=run.total,
        batches_done=batches.get(BatchBase.Status.DONE, 0),
        batches_running=batches.get(BatchBase.Status.RUNNING, 0),
        batches_failed=batches.get(BatchBase.Status.FAILED, 0),
        batches_total=sum(batches.values()),
        error=run.error,
        unavailable=run.unavailable if isinstance(run, ScoringRun) else {},
        phase=kind.phase(run) if run.status in (run.Status.PENDING, run.Status.RUNNING) else "",
    )


def runs_recent(limit: int = 50) -> QuerySet[ScoringRun]:
    return ScoringRun.objects.select_related("dataset", "created_by").prefetch_related("configs")[
        :limit
    ]
