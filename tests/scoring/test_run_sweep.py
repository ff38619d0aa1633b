"""Self-healing runs: claims, heartbeats and the sweep that re-queues a batch whose worker died.

These drive the run machinery directly (a "worker" here is a claim nobody heartbeats any more);
``test_worker.py`` kills a real worker and checks a run finishes without anyone resuming it.
"""

import subprocess
import sys
import threading
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from scoring.models import MetricScore, ScoringBatch, ScoringRun
from scoring.runs import machinery
from scoring.runs import scoring as scoring_runs
from scoring.runs.selectors import run_progress
from scoring.runs.tasks import score_batch
from tests.scoring.scoring_data import make_scoring_dataset

pytestmark = pytest.mark.django_db(transaction=True)

SCORING = scoring_runs.SCORING


@pytest.fixture
def sent(monkeypatch) -> list[tuple[int, str | None]]:
    """Messages sent for batch tasks, (batch id, queue), instead of running them inline."""
    out: list[tuple[int, str | None]] = []
    monkeypatch.setattr(
        score_batch,
        "apply_async",
        lambda args, queue=None, **kw: out.append((args[0], queue)),
    )
    return out


def a_run(batch_size: int = 4) -> ScoringRun:
    dataset = make_scoring_dataset()
    return scoring_runs.scoring_run_create(
        dataset=dataset, metrics=["bleu"], batch_size=batch_size, enqueue=False
    )


def claimed_then_abandoned(run: ScoringRun, task_id: str = "task-1") -> machinery.Claim:
    """A batch a worker claimed and then died on: no heartbeat after the claim."""
    batch = run.batches.order_by("pk").first()
    ScoringBatch.objects.filter(pk=batch.pk).update(queue="q-scoring")
    claim = machinery.batch_claim(kind=SCORING, batch_id=batch.pk, task_id=task_id)
    assert claim is not None and claim.attempt == 1
    return claim


def claim_host() -> str:
    return machinery.worker_name().rpartition(":")[0]


def later(seconds_past_timeout: float, settings) -> datetime:
    return timezone.now() + timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT + seconds_past_timeout)


def test_a_stale_batch_is_requeued_once_even_when_two_sweeps_race(settings, sent, monkeypatch):
    run = a_run()
    claim = claimed_then_abandoned(run)
    # Sweep B runs completely between sweep A's SELECT of stale batches and A's UPDATE: both
    # saw the batch stale; only one may re-queue it.
    original = machinery._stale_batches
    inner: list[machinery.SweepResult] = []

    def select_then_let_another_sweep_run(kind, cutoff):
        rows = original(kind, cutoff)
        if not inner:  # sweep A; sweep B's own SELECT (nested here) takes the first branch
            inner.append(machinery.SweepResult())
            inner[0] = machinery.runs_sweep(now=when)
        return rows

    monkeypatch.setattr(machinery, "_stale_batches", select_then_let_another_sweep_run)
    when = later(1, settings)
    outer = machinery.runs_sweep(now=when)
    requeued = inner[0].requeued + outer.requeued
    assert requeued == [("scoring", claim.batch.pk)]
    assert sent == [(claim.batch.pk, "q-scoring")]  # one message, to the batch's own queue
    batch = ScoringBatch.objects.get(pk=claim.batch.pk)
    assert batch.status == ScoringBatch.Status.PENDING and batch.attempts == 1
    assert batch.claimed_by == "" and batch.heartbeat_at is None


@pytest.mark.skipif("connection.vendor == 'sqlite'", reason="concurrent writers: PostgreSQL (CI)")
def test_many_concurrent_sweeps_requeue_a_stale_batch_once(settings, sent):
    run = a_run()
    claim = claimed_then_abandoned(run)
    when = later(1, settings)
    barrier = threading.Barrier(6)
    results: list[machinery.SweepResult] = []

    def sweep() -> None:
        try:
            barrier.wait()
            results.append(machinery.runs_sweep(now=when))
        finally:
            connection.close()

    threads = [threading.Thread(target=sweep) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 6
    assert [r for result in results for r in result.requeued] == [("scoring", claim.batch.pk)]
    assert len(sent) == 1


def test_a_fresh_heartbeat_is_left_alone(settings, sent):
    run = a_run()
    claim = claimed_then_abandoned(run)
    just_inside = timezone.now() + timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT - 5)
    assert not machinery.runs_sweep(now=just_inside)
    assert not machinery.runs_sweep()
    batch = ScoringBatch.objects.get(pk=claim.batch.pk)
    assert batch.status == ScoringBatch.Status.RUNNING and batch.attempts == 1
    assert sent == []
    assert run_progress(run).as_dict()["batches_running"] == 1  # shown on the run page


def test_a_batch_whose_workers_keep_dying_fails_after_the_last_attempt(settings, sent):
    settings.RUN_MAX_ATTEMPTS = 2
    run = a_run(batch_size=100)  # one batch
    claim = claimed_then_abandoned(run, task_id="task-1")
    assert machinery.runs_sweep(now=later(1, settings)).requeued == [("scoring", claim.batch.pk)]
    again = machinery.batch_claim(kind=SCORING, batch_id=claim.batch.pk, task_id="task-2")
    assert again is not None and again.attempt == 2
    result = machinery.runs_sweep(now=later(1, settings))
    assert result.failed == [("scoring", claim.batch.pk)] and result.requeued == []
    batch = ScoringBatch.objects.get(pk=claim.batch.pk)
    assert batch.status == ScoringBatch.Status.FAILED
    assert "gave up after 2 attempts" in batch.error and "died each time" in batch.error
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.FAILED and "gave up after 2 attempts" in run.error
    assert len(sent) == 1  # the first re-queue only


def test_a_worker_given_up_for_dead_can_no_longer_finish_or_heartbeat_its_batch(settings, sent):
    run = a_run()
    first = claimed_then_abandoned(run)
    machinery.runs_sweep(now=later(1, settings))
    second = machinery.batch_claim(kind=SCORING, batch_id=first.batch.pk, task_id="task-2")
    assert second is not None and second.attempt == 2
    assert machinery.batch_finish(first, seconds=1.0) is False
    batch = ScoringBatch.objects.get(pk=first.batch.pk)
    assert batch.status == ScoringBatch.Status.RUNNING and batch.task_id == "task-2"
    assert machinery.batch_finish(second, seconds=1.0) is True


def test_the_same_message_again_takes_back_a_batch_only_when_its_process_died(settings):
    run = a_run()
    claim = claimed_then_abandoned(run, task_id="task-1")
    ScoringBatch.objects.filter(pk=claim.batch.pk).update(claimed_by=f"{claim_host()}:1")
    # A copy of the message while the claimant lives (pid 1 here): nothing happens.
    assert machinery.batch_claim(kind=SCORING, batch_id=claim.batch.pk, task_id="task-1") is None
    # Another task's message for a running batch: nothing happens either.
    assert machinery.batch_claim(kind=SCORING, batch_id=claim.batch.pk, task_id="task-9") is None
    # The pool process died (reject_on_worker_lost gives the message back at once).
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ScoringBatch.objects.filter(pk=claim.batch.pk).update(claimed_by=f"{claim_host()}:{dead.pid}")
    again = machinery.batch_claim(kind=SCORING, batch_id=claim.batch.pk, task_id="task-1")
    assert again is not None and again.attempt == 2
    assert again.batch.claimed_by == machinery.worker_name()


def test_the_heartbeat_thread_beats_while_the_batch_works(settings):
    settings.RUN_HEARTBEAT_INTERVAL = 0.05
    run = a_run(batch_size=100)
    batch = run.batches.get()
    seen: list[object] = []

    def work(b: ScoringBatch) -> int:
        claimed = ScoringBatch.objects.get(pk=b.pk)
        for _ in range(400):  # up to ~20 s on a loaded machine; ends at the first beat
            beat = ScoringBatch.objects.values_list("heartbeat_at", flat=True).get(pk=b.pk)
            if beat != claimed.heartbeat_at:
                seen.append(beat)
                break
            threading.Event().wait(0.05)
        return 0

    machinery.batch_execute(kind=SCORING, batch_id=batch.pk, task_id="task-1", work=work)
    assert seen, "no heartbeat was written while the batch worked"
    done = ScoringBatch.objects.get(pk=batch.pk)
    assert done.status == ScoringBatch.Status.DONE and done.attempts == 1


def test_a_stalled_runs_pending_batch_is_sent_again_once_per_timeout(settings, sent):
    # A worker received the message and died before claiming: the batch is pending, and nothing
    # has happened in its run since.
    run = a_run(batch_size=100)
    batch = run.batches.get()
    old = timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT + 5)
    ScoringBatch.objects.filter(pk=batch.pk).update(queue="q-scoring", queued_at=old)
    first = machinery.runs_sweep()
    assert first.resent == [("scoring", batch.pk)] and sent == [(batch.pk, "q-scoring")]
    assert not machinery.runs_sweep()  # just re-sent: not again before the timeout
    assert len(sent) == 1


def test_a_run_with_work_in_progress_is_not_stalled(settings, sent):
    run = a_run(batch_size=4)  # three batches
    old = timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT + 5)
    run.batches.update(queue="q-scoring", queued_at=old)
    claimed_then_abandoned(run)  # one batch claimed just now, heartbeat fresh
    assert not machinery.runs_sweep()
    assert sent == []


def test_a_requeued_batch_scores_what_is_missing_exactly_once(settings):
    run = a_run(batch_size=100)
    claim = claimed_then_abandoned(run)
    # The dead worker had written some scores before it died.
    scoring_runs._score_batch(claim.batch)
    written = MetricScore.objects.count()
    assert written == 12
    machinery.runs_sweep(now=later(1, settings))  # re-queued: eager Celery runs it here
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.DONE
    assert MetricScore.objects.count() == 12
    assert ScoringBatch.objects.get(pk=claim.batch.pk).attempts == 2


def test_the_sweep_runs_as_a_celery_task_and_says_what_it_did(settings, sent):
    from scoring.runs.tasks import sweep_runs

    run = a_run()
    claimed_then_abandoned(run)
    ScoringBatch.objects.filter(status=ScoringBatch.Status.RUNNING).update(
        heartbeat_at=timezone.now() - timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT + 1)
    )
    summary = sweep_runs.delay().get()
    assert summary.startswith("re-queued 1 batch(es) whose worker died")


def test_an_error_in_the_work_fails_the_batch_and_the_run_without_quoting_data(settings):
    run = a_run(batch_size=100)
    batch = run.batches.get()

    def explode(b: ScoringBatch) -> int:
        raise ValueError("creatinine 1.3 mg/dL for patient 17")  # text a metric choked on

    with pytest.raises(ValueError):
        machinery.batch_execute(kind=SCORING, batch_id=batch.pk, task_id=None, work=explode)
    failed = ScoringBatch.objects.get(pk=batch.pk)
    assert failed.status == ScoringBatch.Status.FAILED
    assert failed.error.startswith("builtins.ValueError: <message redacted")
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.FAILED and "creatinine" not in run.error


def test_a_retry_in_the_same_process_takes_its_batch_back(settings):
    # A transient error whose release the database refused: the retry (same task id) runs in
    # the process that claimed the batch, so it takes it back rather than waiting for the sweep.
    run = a_run()
    claim = claimed_then_abandoned(run, task_id="task-1")
    again = machinery.batch_claim(kind=SCORING, batch_id=claim.batch.pk, task_id="task-1")
    assert again is not None and again.attempt == 2
