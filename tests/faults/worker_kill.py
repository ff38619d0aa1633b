"""Fault drill: the Celery worker is SIGKILLed mid scoring run and restarted.

    /tmp/venv1/bin/python -m tests.faults.worker_kill            # lexical metrics, ~1 min
    /tmp/venv1/bin/python -m tests.faults.worker_kill --short    # CI form
    /tmp/venv1/bin/python -m tests.faults.worker_kill --bertscore

Two kills, each while batches are being scored:
1. the pool child only (what the OOM killer usually picks): with ``acks_late`` and
   ``reject_on_worker_lost`` the batch goes back to the queue and the run finishes by itself;
2. the whole worker (main process and child, as a host crash would): the batch it held stays
   unacknowledged in Redis until the visibility timeout (an hour), so the run stalls; the
   documented recovery, ``scoring_run_resume`` (``manage.py score --resume RUN``), re-plans what
   is missing.
Then it checks exactly one score per response and metric configuration. Exits 1 otherwise.
"""

import argparse
import os
import signal
import subprocess
import sys
import time

from tests.faults.common import prepare, scoring_dataset
from tests.load import harness
from tests.load.harness import log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="fewer responses (CI)")
    parser.add_argument("--bertscore", action="store_true", help="add BERTScore (MiniLM)")
    parser.add_argument("--database", default="medalign_fault_worker")
    parser.add_argument("--redis-db", type=int, default=8)
    args = parser.parse_args(argv)
    broker = f"redis://127.0.0.1:6379/{args.redis_db}"
    env, work = prepare(args.database, broker)
    procs = harness.Processes(work / "logs")
    try:
        return _drill(args, env, procs)
    finally:
        procs.stop_all()
        subprocess.run(
            ["redis-cli", "-h", "127.0.0.1", "-n", str(args.redis_db), "flushdb"],
            capture_output=True,
            timeout=10,
        )
        from django.db import connections

        connections.close_all()
        harness.drop_database(args.database)


def _drill(args: argparse.Namespace, env: dict, procs: harness.Processes) -> int:
    from scoring.models import ScoringRun
    from scoring.selectors import run_progress
    from scoring.services import scoring_run_create, scoring_run_resume
    from tests.faults.checks import scores_exactly_once

    n = 60 if args.short else 200
    dataset = scoring_dataset("fault-worker", instructions=n, words=400 if args.short else 600)
    metrics = ["rougeL", "bleu", "chrf"] + (["bertscore"] if args.bertscore else [])
    worker_env = {**env, "SCORING_MODEL_QUEUE": "cpu"}  # one worker takes every queue here
    procs.start("celery", harness.celery_args(concurrency=1, queues="cpu,gpu"), worker_env)
    time.sleep(2)
    run = scoring_run_create(dataset=dataset, metrics=metrics, batch_size=8)
    log(f"scoring run {run.pk}: {run.total} scores ({', '.join(metrics)}), batches of 8")

    def progress() -> tuple[int, int, str]:
        p = run_progress(run)
        return p.scored, p.total, p.status

    def wait_for(fraction: float, timeout: float) -> bool:
        return harness.wait_until(
            lambda: progress()[0] >= fraction * run.total, timeout=timeout, interval=0.1
        )

    # --- kill 1: the pool child --------------------------------------------------------------
    if not wait_for(0.15, 180):
        log("no progress: is the worker running?\n" + procs.tail("celery"))
        return 1
    child = _pool_child(procs.procs["celery"].pid)
    scored = progress()[0]
    os.kill(child, signal.SIGKILL)
    log(f"SIGKILLed the pool child {child} at {scored}/{run.total} scores")
    if not wait_for(0.45, 180):
        log("FAIL: no progress after the child was killed\n" + procs.tail("celery"))
        return 1
    log(f"the worker replaced its child and carried on: {progress()[0]}/{run.total}")

    # --- kill 2: the whole worker -------------------------------------------------------------
    scored = progress()[0]
    procs.kill("celery", signal.SIGKILL)
    log(f"SIGKILLed the whole worker (main process and child) at {scored}/{run.total} scores")
    procs.start("celery2", harness.celery_args(concurrency=1, queues="cpu,gpu"), worker_env)
    log("restarted the worker")
    stall = 20 if args.short else 60
    finished = harness.wait_until(lambda: progress()[2] == ScoringRun.Status.DONE, timeout=stall)
    if finished:
        log("the run finished by itself after the restart")
    else:
        scored, total, status = progress()
        log(
            f"the run stalled at {scored}/{total} ({status}): the killed worker's batch is "
            "unacknowledged in Redis until the visibility timeout. Recovery: scoring_run_resume "
            f"(manage.py score --dataset {dataset.name} --resume {run.pk})"
        )
        scoring_run_resume(run=run)
        finished = harness.wait_until(lambda: progress()[2] == ScoringRun.Status.DONE, timeout=300)
    scored, total, status = progress()
    run.refresh_from_db()
    ok, message = scores_exactly_once(run)
    log(f"run {run.pk}: {status}, {scored}/{total} scored; {message}")
    failed = run.batches.filter(status="failed").count()
    if failed:
        log(f"{failed} batch(es) failed: {run.error}")
    ok = ok and finished and status == ScoringRun.Status.DONE and scored == total
    log("PASS" if ok else "FAIL")
    return 0 if ok else 1


def _pool_child(parent: int) -> int:
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(parent)], capture_output=True, text=True, timeout=10
    ).stdout.split()
    if not out:
        raise RuntimeError("the Celery worker has no pool child")
    return int(out[0])


if __name__ == "__main__":
    sys.exit(main())
