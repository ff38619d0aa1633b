"""The run-and-batch machinery every kind of run shares: claim, heartbeat, finish, fail, resume,
and the sweep that re-queues a batch whose worker died.

Every state change of a batch is one conditional UPDATE (``... WHERE status = 'running' AND
attempts = N``), so two workers, two sweeps, or a worker and a sweep can never both make it: the
one whose UPDATE matched a row acts, the others see 0 rows and do nothing. The attempt number is
the claim's fencing token: a worker that was given up for dead (and whose batch was re-queued)
can no longer finish, fail or heartbeat the batch, only write results the kind's ``execute``
already keys so that nothing is written twice.

Clocks: heartbeats and the sweep's cutoff use each host's clock (``timezone.now()``); hosts are
expected to keep time with NTP, whose skew (milliseconds) is far below the timeout (minutes).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connections, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from medalign_site.logs import redact_exception
from scoring.models.runs import BatchBase, RunBase

logger = logging.getLogger(__name__)

# Database hiccups and dropped connections are worth retrying; anything else fails the batch.
TRANSIENT = (OperationalError, InterfaceError, ConnectionError, TimeoutError)

R = TypeVar("R", bound=RunBase)
B = TypeVar("B", bound=BatchBase)

PENDING = BatchBase.Status.PENDING
RUNNING = BatchBase.Status.RUNNING
DONE = BatchBase.Status.DONE
FAILED = BatchBase.Status.FAILED
OPEN = (PENDING, RUNNING)


def describe(exc: BaseException) -> str:
    """An error as researchers see it on a batch or run: the type only, redacted like the logs
    (a message can quote the response or reference text a metric choked on)."""
    return redact_exception(exc)[:500]


@dataclass(frozen=True)
class RunKind(Generic[R, B]):
    """What the machinery needs to know about one kind of run (``register`` it once).

    ``execute(batch_id=, task_id=)`` runs one batch, normally by calling ``batch_execute`` with
    the kind's work function. ``replan(run, open_batches)`` creates (saves) the batches a
    resumed run still needs besides its open ones. ``queue_for(batch)`` names the Celery queue
    of a batch's task. ``produced(run)`` counts the run's results that exist (its progress).
    ``task`` is the Celery task that takes the batch id
    (``scoring.runs.tasks``). ``describe_error(exc)`` is what a failed batch and its run
    record; the default (``describe``) keeps the type only, and a kind may show the messages
    of its own exceptions that it knows quote no record or response text.
    """

    name: str
    run_model: type[R]
    batch_model: type[B]
    task: Any  # a celery Task (untyped)
    execute: Callable[..., int]
    replan: Callable[[R, list[B]], list[B]]
    queue_for: Callable[[B], str]
    # How many of the run's results exist (scores, responses): its progress, counted from what
    # is there rather than from batches, so it is right after any crash or resume.
    produced: Callable[[R], int]
    produced_name: str = ""  # the count's name in the progress JSON besides "produced"
    describe_error: Callable[[BaseException], str] = describe
    # What the run is doing before its results appear, in a sentence ("" when nothing to say):
    # a generation run's worker hashing the model's weights.
    phase: Callable[[R], str] = lambda run: ""


_KINDS: dict[str, RunKind[Any, Any]] = {}


def register(kind: RunKind[R, B]) -> RunKind[R, B]:
    """Make a kind known to the sweep and to ``kind_named`` (idempotent per name)."""
    _KINDS[kind.name] = kind
    return kind


def kinds() -> list[RunKind[Any, Any]]:
    return list(_KINDS.values())


def kind_of(run: RunBase) -> RunKind[Any, Any]:
    """The registered kind whose run model ``run`` is."""
    for kind in _KINDS.values():
        if isinstance(run, kind.run_model):
            return kind
    raise LookupError(f"no run kind for {type(run).__name__}")


def kind_named(name: str) -> RunKind[Any, Any]:
    try:
        return _KINDS[name]
    except KeyError:
        raise LookupError(f"no run kind {name!r}; registered: {', '.join(_KINDS)}") from None


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _pid_is_dead(claimed_by: str) -> bool:
    """True only when ``claimed_by`` names a process on this host that no longer exists."""
    host, _, pid = claimed_by.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another host (hosts have distinct names, as Celery's node names assume)
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # exists, another user's
    return False


# --- enqueueing ---------------------------------------------------------------------------------


def batches_enqueue(kind: RunKind[Any, B], batches: Iterable[B]) -> None:
    """Send one task per batch to its queue, recording where and when (the sweep re-queues
    to the same queue, whatever the sweeping process's own settings say)."""
    for batch in batches:
        queue = kind.queue_for(batch)
        kind.batch_model._default_manager.filter(pk=batch.pk).update(
            queue=queue, queued_at=timezone.now()
        )
        kind.task.apply_async(args=[batch.pk], queue=queue)


def run_start(kind: RunKind[R, B], run: R, batches: list[B], *, enqueue: bool) -> None:
    """Queue the batches once the run is committed; a run with nothing to do is done at once."""
    if not batches:
        _run_finish(run)
    elif enqueue:
        transaction.on_commit(lambda: batches_enqueue(kind, batches))


# --- one batch, on a worker ---------------------------------------------------------------------


@dataclass(frozen=True)
class Claim(Generic[B]):
    """A worker's hold on a batch; ``attempt`` fences every later write."""

    kind: RunKind[Any, B]
    batch: B
    attempt: int


def batch_claim(*, kind: RunKind[Any, B], batch_id: int, task_id: str | None) -> Claim[B] | None:
    """Take a batch for this worker, or None when it is not this task's to run.

    A pending batch is taken by whoever asks first. A running one is taken again only by the
    same task message delivered again (``reject_on_worker_lost`` after its pool process died)
    when its claimant is known to be over: this process (a retry), a process of this host that
    no longer exists, or a heartbeat older than the timeout. A message copy that finds its
    batch done, failed, running elsewhere, or planned away by a resume does nothing.
    """
    model = kind.batch_model
    row = model._default_manager.filter(pk=batch_id).values(
        "status", "task_id", "attempts", "claimed_by"
    )
    current = row.first()
    if current is None:
        return None
    now = timezone.now()
    mine = model._default_manager.filter(pk=batch_id, attempts=current["attempts"])
    if current["status"] == PENDING:
        mine = mine.filter(status=PENDING)
    elif current["status"] == RUNNING and task_id and current["task_id"] == task_id:
        stale = now - timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT)
        lost = (
            # this process ran it before: a retry whose release the database refused
            current["claimed_by"] == worker_name()
            or _pid_is_dead(current["claimed_by"])
            or model._default_manager.filter(pk=batch_id, heartbeat_at__lt=stale).exists()
        )
        if not lost:
            return None
        if current["attempts"] >= settings.RUN_MAX_ATTEMPTS:
            _fail_exhausted(kind, batch_id, current["attempts"], current["claimed_by"])
            return None
        mine = mine.filter(status=RUNNING, task_id=task_id)
    else:
        return None
    updated = mine.update(
        status=RUNNING,
        attempts=current["attempts"] + 1,
        task_id=task_id or "",
        claimed_by=worker_name(),
        claimed_at=now,
        heartbeat_at=now,
        error="",
    )
    if not updated:
        return None  # someone else's UPDATE came first
    batch = model._default_manager.select_related("run").get(pk=batch_id)
    kind.run_model._default_manager.filter(pk=batch.run_id, status=RunBase.Status.PENDING).update(
        status=RunBase.Status.RUNNING, started_at=now
    )
    return Claim(kind=kind, batch=batch, attempt=current["attempts"] + 1)


class Heartbeat:
    """Writes the claim's ``heartbeat_at`` every ``RUN_HEARTBEAT_INTERVAL`` seconds from a
    thread while the batch works.

    A thread, not a write between items: a kind's work can be one long call (a model scoring a
    whole batch, a model generating a long answer) during which nothing else runs. The thread
    has its own database connection (Django's are per thread) and closes it when it stops.
    A failed write is logged and tried again next time: the timeout spans several intervals.
    """

    def __init__(self, claim: Claim[Any]) -> None:
        self.claim = claim
        self.interval = float(settings.RUN_HEARTBEAT_INTERVAL)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"heartbeat-{claim.kind.name}-{claim.batch.pk}", daemon=True
        )

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        claim = self.claim
        try:
            while not self._stop.wait(self.interval):
                try:
                    beat = claim.kind.batch_model._default_manager.filter(
                        pk=claim.batch.pk, status=RUNNING, attempts=claim.attempt
                    ).update(heartbeat_at=timezone.now())
                except Exception as exc:
                    logger.warning(
                        "heartbeat of %s batch %s not written: %s",
                        claim.kind.name,
                        claim.batch.pk,
                        describe(exc),
                    )
                    continue
                if not beat:
                    # Re-queued by a sweep (this worker looked dead) or finished elsewhere: the
                    # work goes on, but its results are keyed, and its end will change nothing.
                    logger.warning(
                        "%s batch %s is no longer this worker's (attempt %s)",
                        claim.kind.name,
                        claim.batch.pk,
                        claim.attempt,
                    )
                    return
        finally:
            connections.close_all()  # this thread's connections only


def batch_execute(
    *,
    kind: RunKind[Any, B],
    batch_id: int,
    task_id: str | None,
    work: Callable[[B], int],
) -> int:
    """Claim a batch, ``work`` on it under a heartbeat, and finish it; returns ``work``'s count.

    ``work`` must be idempotent: it checks what exists and writes only what is missing, keyed
    so that a concurrent copy (a worker given up for dead that was only slow) cannot write twice.
    Transient errors release the claim for Celery's retry; any other error fails the batch
    (still this claim's) with the kind's ``describe_error`` (by default the error's type only),
    and is raised again.
    """
    claim = batch_claim(kind=kind, batch_id=batch_id, task_id=task_id)
    if claim is None:
        return 0
    started = time.perf_counter()
    try:
        with Heartbeat(claim):
            created = work(claim.batch)
    except TRANSIENT:
        _release(claim)
        raise
    except Exception as exc:
        failed = claim.kind.batch_model._default_manager.filter(
            pk=claim.batch.pk, status=RUNNING, attempts=claim.attempt
        ).update(status=FAILED, error=claim.kind.describe_error(exc))
        if failed:
            run_maybe_finish(claim.kind, claim.batch.run_id)
        raise
    batch_finish(claim, seconds=time.perf_counter() - started)
    return created


def _release(claim: Claim[Any]) -> None:
    # Back to pending for Celery's retry (a new claim, counted). The database may be what
    # failed: then the retry, the same task id, takes the batch back as its own.
    try:
        claim.kind.batch_model._default_manager.filter(
            pk=claim.batch.pk, status=RUNNING, attempts=claim.attempt
        ).update(status=PENDING, task_id="", claimed_by="", heartbeat_at=None)
    except TRANSIENT as exc:
        logger.warning("could not release %s batch %s: %s", claim.kind.name, claim.batch.pk, exc)


def batch_finish(claim: Claim[Any], *, seconds: float) -> bool:
    """Mark the claimed batch done (only if it is still this claim's) and maybe the run."""
    done = claim.kind.batch_model._default_manager.filter(
        pk=claim.batch.pk, status=RUNNING, attempts=claim.attempt
    ).update(status=DONE, seconds=seconds, error="", heartbeat_at=timezone.now())
    run_maybe_finish(claim.kind, claim.batch.run_id)
    return bool(done)


def batch_fail(*, kind: RunKind[Any, Any], batch_id: int, error: str) -> None:
    """Record a batch that failed for good and fail the run once nothing else is open.

    A batch already done stays done (a late copy of its task cannot undo it).
    """
    batch = kind.batch_model._default_manager.filter(pk=batch_id).values("run_id").first()
    if batch is None:
        return
    kind.batch_model._default_manager.filter(pk=batch_id).exclude(status=DONE).update(
        status=FAILED, error=error[:2000]
    )
    run_maybe_finish(kind, batch["run_id"])


def _fail_exhausted(kind: RunKind[Any, Any], batch_id: int, attempts: int, claimed_by: str) -> bool:
    model = kind.batch_model._default_manager
    failed = model.filter(pk=batch_id, status=RUNNING, attempts=attempts).update(
        status=FAILED,
        error=(
            f"gave up after {attempts} attempts: the worker running this batch died each "
            f"time (last {claimed_by or 'unknown'}); the batch may be what kills it "
            "(memory?). Resume the run to try again."
        )[:2000],
    )
    if failed:
        run_maybe_finish(kind, model.values_list("run_id", flat=True).get(pk=batch_id))
    return bool(failed)


# --- runs ---------------------------------------------------------------------------------------


def _run_finish(run: RunBase) -> None:
    run.status = RunBase.Status.DONE
    run.finished_at = timezone.now()
    if run.started_at is None:
        run.started_at = run.finished_at
    run.save(update_fields=["status", "finished_at", "started_at"])


def run_maybe_finish(kind: RunKind[Any, Any], run_id: int) -> None:
    """Done when every batch is done; failed when none is open and some failed."""
    with transaction.atomic():
        run = kind.run_model._default_manager.select_for_update().get(pk=run_id)
        if run.status in (RunBase.Status.DONE, RunBase.Status.FAILED):
            return
        batches = kind.batch_model._default_manager.filter(run_id=run_id)
        counts = batches.aggregate(
            open=Count("id", filter=Q(status__in=OPEN)),
            failed=Count("id", filter=Q(status=FAILED)),
        )
        if counts["open"]:
            return
        if counts["failed"]:
            errors = list(
                batches.filter(status=FAILED).values_list("error", flat=True).distinct()[:3]
            )
            run.status = RunBase.Status.FAILED
            run.error = f"{counts['failed']} batch(es) failed: " + " | ".join(errors)
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "error", "finished_at"])
            return
        _run_finish(run)


@transaction.atomic
def run_resume(*, kind: RunKind[R, B], run: R, enqueue: bool = True) -> R:
    """Finish a failed or interrupted run: only what is still missing is planned again.

    Failed batches are planned again; pending ones are queued again as they are (a copy of a
    task that is still queued finds its batch taken or done and does nothing); running ones
    are left to their worker, or to the sweep if it died.
    """
    run = kind.run_model._default_manager.select_for_update().get(pk=run.pk)
    batches = kind.batch_model._default_manager.filter(run_id=run.pk)
    batches.filter(status=FAILED).delete()
    open_batches = list(batches.filter(status__in=OPEN))
    running = any(b.status == RUNNING for b in open_batches)
    run.status = RunBase.Status.RUNNING if running else RunBase.Status.PENDING
    run.error = ""
    run.finished_at = None
    run.save(update_fields=["status", "error", "finished_at"])
    pending = [b for b in open_batches if b.status == PENDING]
    new = kind.replan(run, open_batches)
    if running and not (pending or new):
        return run  # only running batches remain: the last one to end finishes the run
    run_start(kind, run, pending + new, enqueue=enqueue)
    return run


# --- the sweep ----------------------------------------------------------------------------------


@dataclass
class SweepResult:
    requeued: list[tuple[str, int]] = field(default_factory=list)  # (kind, batch id)
    resent: list[tuple[str, int]] = field(default_factory=list)  # pending, message likely lost
    failed: list[tuple[str, int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.requeued or self.resent or self.failed)

    def summary(self) -> str:
        return (
            f"re-queued {len(self.requeued)} batch(es) whose worker died, re-sent "
            f"{len(self.resent)} stalled pending batch(es), failed {len(self.failed)}"
        )


# A stalled run's pending batches re-sent per sweep: a message lost before its batch was claimed
# is found among the oldest; a run that only waits behind others gets a few cheap duplicates.
RESEND_PER_RUN = 10


def runs_sweep(*, now: datetime | None = None) -> SweepResult:
    """Re-queue every running batch whose heartbeat is older than ``RUN_HEARTBEAT_TIMEOUT``
    (its worker died: killed, out of memory, host gone), once; fail it instead after
    ``RUN_MAX_ATTEMPTS`` attempts. Also re-send the pending batches of a run that has had no
    activity for the timeout: their task message may have died with a worker that had received
    it but not yet claimed the batch.

    Safe to run anywhere, any number of times at once: each change is a conditional UPDATE.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT)
    result = SweepResult()
    for kind in kinds():
        _sweep_running(kind, now, cutoff, result)
        _sweep_stalled(kind, now, cutoff, result)
    if result:
        logger.info("run sweep: %s", result.summary())
    return result


def _sweep_running(
    kind: RunKind[Any, Any], now: datetime, cutoff: datetime, result: SweepResult
) -> None:
    model = kind.batch_model
    for row in _stale_batches(kind, cutoff):
        if row["attempts"] >= settings.RUN_MAX_ATTEMPTS:
            if _fail_exhausted(kind, row["pk"], row["attempts"], row["claimed_by"]):
                result.failed.append((kind.name, row["pk"]))
            continue
        # The same conditions as the SELECT, and the attempt read: a worker that claimed the batch
        # again, or heartbeat in the meantime, or another sweep that came first, leaves 0 rows.
        requeued = model._default_manager.filter(
            pk=row["pk"], status=RUNNING, attempts=row["attempts"], heartbeat_at__lt=cutoff
        ).update(status=PENDING, task_id="", claimed_by="", heartbeat_at=None, queued_at=now)
        if requeued:
            logger.warning(
                "%s batch %s: no heartbeat from %s since before %s; re-queued (attempt %s done)",
                kind.name,
                row["pk"],
                row["claimed_by"],
                cutoff.isoformat(),
                row["attempts"],
            )
            _send(kind, row["pk"])
            result.requeued.append((kind.name, row["pk"]))


def _stale_batches(kind: RunKind[Any, Any], cutoff: datetime) -> list[dict[str, Any]]:
    return list(
        kind.batch_model._default_manager.filter(status=RUNNING, heartbeat_at__lt=cutoff).values(
            "pk", "attempts", "claimed_by"
        )
    )


def _sweep_stalled(
    kind: RunKind[Any, Any], now: datetime, cutoff: datetime, result: SweepResult
) -> None:
    """Pending batches of open runs where nothing has happened since the cutoff: no batch
    claimed, heartbeating, finished (its last heartbeat) or (re)sent."""
    model = kind.batch_model
    runs = (
        model._default_manager.filter(
            run__status__in=[RunBase.Status.PENDING, RunBase.Status.RUNNING]
        )
        .values("run_id")
        .annotate(
            pending=Count("id", filter=Q(status=PENDING)),
            running=Count("id", filter=Q(status=RUNNING)),
            claimed=Max("claimed_at"),
            beat=Max("heartbeat_at"),
            queued=Max("queued_at"),
        )
        .filter(pending__gt=0, running=0)
        .order_by()
    )
    for row in runs:
        last = max((t for t in (row["claimed"], row["beat"], row["queued"]) if t), default=None)
        if last is None or last >= cutoff:
            continue
        oldest = model._default_manager.filter(
            run_id=row["run_id"], status=PENDING, queued_at__lt=cutoff
        ).order_by("queued_at", "pk")[:RESEND_PER_RUN]
        for batch_id, queued_at in oldest.values_list("pk", "queued_at"):
            resent = model._default_manager.filter(
                pk=batch_id, status=PENDING, queued_at=queued_at
            ).update(queued_at=now)
            if resent:
                _send(kind, batch_id)
                result.resent.append((kind.name, batch_id))


def _send(kind: RunKind[Any, Any], batch_id: int) -> None:
    """Send a batch's task again to the queue it was sent to before."""
    row = kind.batch_model._default_manager.filter(pk=batch_id).values("queue").first()
    if row is None:
        return
    queue = row["queue"] or None
    try:
        kind.task.apply_async(args=[batch_id], queue=queue)
    except Exception as exc:
        # The broker is away: the batch is pending without a message, and its run shows no
        # activity, so a later sweep sends it again.
        logger.warning("could not re-queue %s batch %s: %s", kind.name, batch_id, exc)
