"""Load test: 50 clinicians on gunicorn + PostgreSQL, a Celery worker on Redis; nothing lost.

    /tmp/venv1/bin/python -m tests.load.run                 # 50 users, 60 s (the target run)
    /tmp/venv1/bin/python -m tests.load.run --users 10 --run-time 20 --small   # quick form

Creates a fresh PostgreSQL database, migrates, loads the demo (the 52,000-event record
included), creates approved clinicians with TOTP and assignments (through the services), signs
them in with server-side sessions, serves the app with gunicorn (DEBUG off) on a free loopback
port, starts a Celery worker on Redis and a lexical scoring run beside the load, and runs locust
headless. Prints requests/s and p50/p95/p99 per endpoint and the error count, then checks the
database: every submission present exactly once with all its judgements as sent, no duplicate
judgements, one review per assignment, the scoring run done with one score per response and
metric. Exits 1 if p95 >= --p95-ms on any endpoint, any request failed, or anything is missing.
"""

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.load import harness
from tests.load.harness import log

LEXICAL = ["rougeL", "bleu", "chrf"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--spawn-rate", type=float, default=10)
    parser.add_argument("--run-time", type=int, default=60, help="seconds (bounded: max 600)")
    parser.add_argument("--per-user", type=int, default=5, help="assignments per clinician")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
    parser.add_argument("--p95-ms", type=float, default=300)
    parser.add_argument("--think", default="1,3", help="min,max seconds between requests")
    parser.add_argument("--database", default="medalign_load")
    parser.add_argument("--redis-db", type=int, default=7)
    parser.add_argument("--small", action="store_true", help="small demo records (quick form)")
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args(argv)
    args.run_time = max(5, min(args.run_time, 600))

    work = Path(tempfile.mkdtemp(prefix="medalign-load-"))
    database_url = harness.fresh_database(args.database)
    broker = f"redis://127.0.0.1:6379/{args.redis_db}"
    env = harness.app_env(database_url, broker, work / "data")
    procs = harness.Processes(work / "logs")
    (work / "logs").mkdir(exist_ok=True)
    log(f"database {args.database}, broker {broker}, logs in {procs.log_dir}")
    try:
        t0 = time.monotonic()
        harness.manage(env, "migrate", "--noinput", "-v", "0")
        harness.manage(env, "collectstatic", "--noinput", "-v", "0")
        demo = ["load_demo", "--no-progress"] + (["--small"] if args.small else [])
        harness.manage(env, *demo)
        log(f"database ready in {time.monotonic() - t0:.0f} s")
        harness.configure_django(env)
        setup = _setup_accounts(args, work)
        run_id = _start_scoring()

        port = harness.free_port()
        host = f"http://127.0.0.1:{port}"
        procs.start(
            "gunicorn", harness.gunicorn_args(port, workers=args.workers, threads=args.threads), env
        )
        procs.start("celery", harness.celery_args(concurrency=1), env)
        if not harness.wait_until(lambda: harness.http_ok(host + "/healthz"), timeout=60):
            log("gunicorn did not come up:\n" + procs.tail("gunicorn"))
            return 1
        # The worker's start-up (it imports the metric libraries) and the lexical run take both
        # cores for a while: let them finish so the figures measure the web tier under load.
        t1 = time.monotonic()
        harness.wait_until(lambda: "ready." in procs.tail("celery", 200), timeout=120)
        _wait_scoring(run_id, timeout=180)
        log(f"worker up and scoring run {run_id} finished in {time.monotonic() - t1:.0f} s")
        log(f"gunicorn up on {host}; running locust: {args.users} users for {args.run_time} s")
        stats = _run_locust(args, host, env, setup, work)
        ok = _report(stats, args.p95_ms)
        ok &= _check_database(setup, work / "results.json")
        ok &= _check_scoring(run_id)
        log("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        procs.stop_all()
        subprocess.run(
            ["redis-cli", "-h", "127.0.0.1", "-p", "6379", "-n", str(args.redis_db), "flushdb"],
            capture_output=True,
            timeout=10,
        )
        if not args.keep_db:
            from django.db import connections

            connections.close_all()
            harness.drop_database(args.database)


def _setup_accounts(args: argparse.Namespace, work: Path) -> dict:
    from django.conf import settings
    from django.db.models import Count
    from django.middleware.csrf import _get_new_csrf_string
    from django.test import Client

    from review.models import Assignment, Dataset, Instruction, Role
    from review.services.assignments import assignments_create
    from tests import factories

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # set-up only
    dataset = Dataset.objects.get(name="demo")
    clinicians = [
        factories.make_user(
            f"load{i:02d}@example.edu", roles=[Role.CLINICIAN], full_name=f"Load {i}"
        )
        for i in range(args.users)
    ]
    instructions = list(Instruction.objects.filter(dataset=dataset, patient__isnull=False))
    biggest = (
        Instruction.objects.filter(dataset=dataset, patient__isnull=False)
        .annotate(n=Count("patient__events"))
        .order_by("-n")
        .values_list("patient_id", flat=True)
        .first()
    )
    big = [i for i in instructions if i.patient_id == biggest]
    # The largest record first, to as many clinicians as overlap allows; then everything else.
    assignments_create(
        instructions=big[:1], clinicians=clinicians, overlap=min(20, len(clinicians)), actor=None
    )
    # Existing assignments (the demo's own) count towards the overlap: top up beyond them.
    existing = (
        Assignment.objects.filter(instruction__in=instructions)
        .values("instruction")
        .annotate(n=Count("id"))
        .order_by("-n")
        .values_list("n", flat=True)
        .first()
        or 0
    )
    wanted = -(-args.users * args.per_user // max(1, len(instructions)))
    overlap = max(1, min(20, existing + wanted))
    assignments_create(
        instructions=instructions, clinicians=clinicians, overlap=overlap, actor=None
    )
    accounts = []
    for user in clinicians:
        client = Client()
        client.force_login(user)
        factories.record_second_factor(client, user)  # signed in with TOTP
        ids = list(
            Assignment.objects.filter(clinician=user)
            .order_by("id")
            .values_list("instruction_id", flat=True)
        )
        big_first = sorted(ids, key=lambda i: (0 if i in {b.pk for b in big} else 1, i))
        accounts.append(
            {
                "user": user.pk,
                "session": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "csrf": _get_new_csrf_string(),
                "instructions": big_first[: args.per_user + 1],
            }
        )
    path = work / "accounts.json"
    path.write_text(json.dumps(accounts))
    n_assign = Assignment.objects.filter(clinician__in=clinicians).count()
    log(
        f"{len(clinicians)} clinicians, {n_assign} assignments "
        f"({sum(len(a['instructions']) for a in accounts)} to be worked through; "
        f"largest record: {len(big)} instruction(s) on patient {biggest})"
    )
    return {"accounts": path, "clinicians": [u.pk for u in clinicians]}


def _start_scoring() -> int:
    from review.models import Dataset
    from scoring.services import scoring_run_create

    run = scoring_run_create(
        dataset=Dataset.objects.get(name="demo"), metrics=LEXICAL, batch_size=8
    )
    log(f"scoring run {run.pk} queued ({run.total} scores to compute: {', '.join(LEXICAL)})")
    return run.pk


def _run_locust(
    args: argparse.Namespace, host: str, env: dict, setup: dict, work: Path
) -> list[dict]:
    prefix = work / "locust"
    locust_env = {
        **env,
        "LOAD_ACCOUNTS": str(setup["accounts"]),
        "LOAD_RESULTS": str(work / "results.json"),
        "LOAD_THINK": args.think,
    }
    cmd = [
        str(harness.BIN / "locust"),
        "-f",
        str(harness.ROOT / "tests" / "load" / "locustfile.py"),
        "--headless",
        "--host",
        host,
        "--users",
        str(args.users),
        "--spawn-rate",
        str(args.spawn_rate),
        "--run-time",
        f"{args.run_time}s",
        "--stop-timeout",
        "10",
        "--csv",
        str(prefix),
        "--only-summary",
        "--loglevel",
        "WARNING",
    ]
    subprocess.run(cmd, cwd=harness.ROOT, env=locust_env, timeout=args.run_time + 120, check=False)
    with open(f"{prefix}_stats.csv") as fh:
        return list(csv.DictReader(fh))


def _report(rows: list[dict], p95_limit: float) -> bool:
    ok = True
    print()
    print(
        f"{'endpoint':<22}{'requests':>9}{'errors':>8}{'req/s':>8}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}"
    )
    for row in rows:
        name = "ALL" if row["Name"] == "Aggregated" else f"{row['Type']} {row['Name']}"
        count, errors = int(row["Request Count"]), int(row["Failure Count"])
        p95 = float(row["95%"] if row["95%"] != "N/A" else 0)
        miss = p95 >= p95_limit or errors
        ok &= not miss
        print(
            f"{name:<22}{count:>9}{errors:>8}{float(row['Requests/s']):>8.1f}"
            f"{row['50%']:>8}{row['95%']:>8}{row['99%']:>8}" + ("   <-- MISSED" if miss else "")
        )
    print()
    log(
        f"target: p95 < {p95_limit:.0f} ms on every endpoint and no errors: {'met' if ok else 'MISSED'}"
    )
    return ok


def _check_database(setup: dict, results_path: Path) -> bool:
    from django.db.models import Count

    from review.models import Assignment, ResponseJudgement, Review

    submitted = json.loads(results_path.read_text()) if results_path.exists() else []
    problems = []
    clinicians = setup["clinicians"]
    dup_reviews = (
        Review.objects.values("assignment").annotate(n=Count("id")).filter(n__gt=1).count()
    )
    dup_judgements = (
        ResponseJudgement.objects.values("review", "response")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    if dup_reviews:
        problems.append(f"{dup_reviews} assignment(s) with more than one review")
    if dup_judgements:
        problems.append(f"{dup_judgements} duplicated judgement(s)")
    for item in submitted:
        review = Review.objects.filter(pk=item["review"]).first()
        if review is None:
            problems.append(f"review {item['review']}: missing")
            continue
        if review.status != Review.Status.SUBMITTED:
            problems.append(f"review {review.pk}: status {review.status}, expected submitted")
        judgements = {j.response_id: j for j in review.judgements.all()}
        if set(map(int, item["ranks"])) != set(judgements) or len(judgements) != len(
            review.shown_order
        ):
            problems.append(f"review {review.pk}: judgements {sorted(judgements)} != sent")
            continue
        for rid, rank in item["ranks"].items():
            j = judgements[int(rid)]
            if j.rank != rank or j.is_correct != item["correct"][rid]:
                problems.append(
                    f"review {review.pk}: response {rid} stored {j.rank}/{j.is_correct}"
                )
    db_submitted = Review.objects.filter(
        status=Review.Status.SUBMITTED, assignment__clinician__in=clinicians
    ).count()
    incomplete = (
        ResponseJudgement.objects.filter(
            review__status=Review.Status.SUBMITTED, review__cannot_assess=""
        )
        .filter(rank__isnull=True)
        .count()
    )
    if db_submitted != len(submitted):
        problems.append(
            f"{db_submitted} submitted reviews in the database, {len(submitted)} acknowledged"
        )
    if incomplete:
        problems.append(f"{incomplete} judgement(s) of submitted reviews without a rank")
    reviews = Review.objects.filter(assignment__clinician__in=clinicians).count()
    assignments = Assignment.objects.filter(clinician__in=clinicians).count()
    log(
        f"database: {len(submitted)} submissions acknowledged, {db_submitted} submitted in the "
        f"database, {reviews} reviews started for {assignments} assignments, "
        f"{dup_reviews} duplicate reviews, {dup_judgements} duplicate judgements"
    )
    for problem in problems[:20]:
        log(f"LOST/DUPLICATED: {problem}")
    if not submitted:
        problems.append("no submission at all")
        log("no submission was made: the load did not reach the submit step")
    return not problems


def _wait_scoring(run_id: int, *, timeout: float) -> None:
    from scoring.models import ScoringRun

    harness.wait_until(
        lambda: (
            ScoringRun.objects.get(pk=run_id).status
            in (ScoringRun.Status.DONE, ScoringRun.Status.FAILED)
        ),
        timeout=timeout,
    )


def _check_scoring(run_id: int) -> bool:
    from scoring.models import ScoringRun
    from tests.faults.checks import scores_exactly_once

    deadline = time.monotonic() + 120
    run = ScoringRun.objects.get(pk=run_id)
    while (
        run.status not in (ScoringRun.Status.DONE, ScoringRun.Status.FAILED)
        and time.monotonic() < deadline
    ):
        time.sleep(1)
        run.refresh_from_db()
    ok, message = scores_exactly_once(run)
    log(f"scoring run {run.pk}: {run.status}; {message}")
    return ok and run.status == ScoringRun.Status.DONE


if __name__ == "__main__":
    sys.exit(main())
