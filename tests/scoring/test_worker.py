"""A real Celery worker process: end-to-end scoring, and a worker killed mid-run.

The worker runs on the configured broker (Redis in CI, kombu's filesystem broker locally) and the
test database, on a queue of its own so parallel test processes never share tasks.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from scoring.models import MetricScore, ScoringBatch, ScoringRun
from scoring.runs import scoring as scoring_runs
from scoring.runs.selectors import run_progress
from tests.scoring.scoring_data import make_scoring_dataset

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

LEXICAL = ["rougeL", "bleu", "chrf"]


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


# Heartbeats every second, a batch taken for dead after 4 s without one, a sweep every second
# in each worker (production: 30 s, 120 s, 60 s). A worker only slow to write a heartbeat would
# have its batch run twice, which writes nothing twice: the tests below would still pass.
FAST_RUNS = {
    "RUN_HEARTBEAT_INTERVAL": "1",
    "RUN_HEARTBEAT_TIMEOUT": "4",
    "RUN_SWEEP_INTERVAL": "1",
}


class Worker:
    def __init__(self, queue: str, log: Path) -> None:
        self.queue = queue
        self.log = log
        self.proc: subprocess.Popen | None = None

    def _args(self) -> list[str]:
        return [
            "worker",
            "-Q",
            self.queue,
            "--concurrency",
            "1",
            "--pool",
            "prefork",
            "--loglevel",
            "INFO",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
        ]

    def start(self) -> None:
        env = {
            **os.environ,
            **FAST_RUNS,
            "DATABASE_URL": _database_url(),
            "DJANGO_SETTINGS_MODULE": "medalign_site.settings",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "medalign_site", *self._args()],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def worker(settings, tmp_path) -> Iterator[Worker]:
    from medalign_site.celery import set_always_eager

    set_always_eager(False)
    queue = f"test-{uuid.uuid4().hex[:10]}"
    settings.SCORING_LEXICAL_QUEUE = queue
    settings.SCORING_MODEL_QUEUE = queue
    w = Worker(queue, tmp_path / "worker.log")
    w.start()
    yield w
    w.stop()


def wait_for(predicate, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise AssertionError(f"timed out waiting for {what}; worker log:\n{tail}")


def exactly_one_score_each(run: ScoringRun) -> None:
    pairs = list(MetricScore.objects.values_list("response_id", "config_id"))
    assert len(pairs) == len(set(pairs)), "duplicate scores"
    assert len(pairs) == run.total, f"{len(pairs)} scores for {run.total} expected"


def test_a_real_worker_scores_a_run_end_to_end(worker: Worker) -> None:
    dataset = make_scoring_dataset()
    run = scoring_runs.scoring_run_create(dataset=dataset, metrics=LEXICAL, batch_size=5)
    wait_for(lambda: run_progress(run).status == ScoringRun.Status.DONE, 90, "the run", worker.log)
    run.refresh_from_db()
    exactly_one_score_each(run)
    assert run.started_at is not None and run.finished_at is not None


def test_a_whole_worker_killed_mid_run_heals_without_resume(worker: Worker) -> None:
    if connection.vendor == "sqlite":
        pytest.skip(
            "SIGKILL of a SQLite writer leaves the test database's WAL unusable to the next "
            "process; this drill runs on PostgreSQL (CI, DATABASE_URL)"
        )
    dataset = make_scoring_dataset(n_instructions=40)
    run = scoring_runs.scoring_run_create(dataset=dataset, metrics=LEXICAL, batch_size=1)
    wait_for(lambda: MetricScore.objects.count() >= 15, 90, "the first scores", worker.log)
    worker.kill()  # SIGKILL the whole worker (main process and pool child)
    killed_at = MetricScore.objects.count()
    assert killed_at < run.total, "the run finished before the kill: make it longer"
    worker.start()
    # Nobody resumes: the batch the dead worker held stays unacknowledged in the broker (an
    # hour on Redis, for ever on the filesystem broker); the restarted worker's sweep re-queues
    # it (or re-sends a batch whose message died before it was claimed).
    wait_for(
        lambda: run_progress(run).status == ScoringRun.Status.DONE,
        120,
        "the run to heal by itself",
        worker.log,
    )
    run.refresh_from_db()
    exactly_one_score_each(run)
    assert not run.batches.exclude(status=ScoringBatch.Status.DONE).exists()
    # The kill can land between batches (the worker held none): then nothing needed healing.
    # A batch tried more than once was re-queued, and only the sweep does that.
    if run.batches.filter(attempts__gt=1).exists():
        assert "run sweep: " in worker.log.read_text(errors="replace"), "healed, not by the sweep?"


def test_a_worker_killed_mid_run_resumes_to_exactly_one_score_each(worker: Worker) -> None:
    if connection.vendor == "sqlite":
        pytest.skip(
            "SIGKILL of a SQLite writer leaves the test database's WAL unusable to the next "
            "process; this drill runs on PostgreSQL (CI, DATABASE_URL)"
        )
    dataset = make_scoring_dataset(n_instructions=40)
    run = scoring_runs.scoring_run_create(dataset=dataset, metrics=LEXICAL, batch_size=1)
    wait_for(lambda: MetricScore.objects.count() >= 15, 90, "the first scores", worker.log)
    worker.kill()  # SIGKILL the whole worker (main process and pool child)
    killed_at = MetricScore.objects.count()
    assert killed_at < run.total, "the run finished before the kill: make it longer"
    worker.start()
    # Messages the dead worker held may or may not come back (that depends on the broker);
    # resuming re-plans exactly what is missing, and duplicates are impossible either way.
    scoring_runs.scoring_run_resume(run=run)
    wait_for(
        lambda: run_progress(run).status == ScoringRun.Status.DONE,
        120,
        "the resumed run",
        worker.log,
    )
    run.refresh_from_db()
    exactly_one_score_each(run)
    assert MetricScore.objects.count() > killed_at


def test_the_workers_own_log_lines_are_redacted_like_the_webs(worker: Worker) -> None:
    # A task whose exception message quotes what it was given: Celery's "Task … raised
    # unexpected: ValueError('…')" line and its traceback carried the message.
    from medalign_site.celery import app

    secret = "xylophonitis-of-the-left-ventricle"
    app.send_task("scoring.tasks.compute_report", args=[secret], queue=worker.queue)
    wait_for(
        lambda: "raised unexpected" in worker.log.read_text(errors="replace"),
        60,
        "the task's failure to be logged",
        worker.log,
    )
    logged = worker.log.read_text(errors="replace")
    assert secret not in logged
    assert "<message redacted" in logged
