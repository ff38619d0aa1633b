"""Load test: 50 clinicians on gunicorn + PostgreSQL; nothing lost; throughput and CPU per annotation.

    .venv/bin/python -m tests.load.run                 # browse mode: 50 users, 60 s, think time
    .venv/bin/python -m tests.load.run --users 10 --run-time 20 --small   # quick form
    .venv/bin/python -m tests.load.run --closed-loop --dataset medalign303  # the comparable run

Creates a fresh PostgreSQL database, migrates, loads a data set (``--dataset``: the demo, its
small form, or ``medalign303``: 303 MedAlign-shaped tasks with 6 responses each on 101 records of
3,250-22,750 events plus one of 52,000, about 1.4 million events; ``--record-events`` scales
them), creates approved clinicians
with TOTP and assignments (through the services), signs them in with server-side sessions,
serves the app with gunicorn (DEBUG off) on a free loopback port and runs locust headless.

Two modes:
- browse (default): each clinician opens the queue and works through its assignments with think
  time (review page, excerpt, timeline pages, a search, autosaves, a double-clicked submit), with
  a Celery worker on Redis running a lexical scoring run beside the load;
- ``--closed-loop``: no think time, no worker; each clinician opens a task (review page and
  excerpt), saves the completed annotation (``--drafts`` times) and submits it, then opens the
  next one. Each task goes to 20 clinicians (the most the service allows), ~120 tasks each.

Prints requests/s and p50/p95/p99 per endpoint and the error count; completed annotations/s and
server CPU per annotation (gunicorn master and workers, and the PostgreSQL backends of the test
database, finished processes included), measured over the run after ``--warmup`` seconds; then
checks the database: every acknowledged submission present exactly once with all its judgements
as sent, no duplicate judgements, one review per assignment (and in browse mode the scoring run
done with one score per response and metric). Exits 1 if p95 >= --p95-ms on any endpoint, any
request failed, or anything is missing.
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.load import harness
from tests.load.harness import log

LEXICAL = ["rougeL", "bleu", "chrf"]
DATASETS = ("demo", "demo-small", "medalign303")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--spawn-rate", type=float, default=10)
    parser.add_argument("--run-time", type=int, default=60, help="seconds (bounded: max 600)")
    parser.add_argument("--per-user", type=int, default=5, help="assignments per clinician")
    parser.add_argument(
        "--workers", type=int, default=None, help="gunicorn workers (4 closed-loop, else 3)"
    )
    parser.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
    parser.add_argument("--p95-ms", type=float, default=300)
    parser.add_argument("--think", default="1,3", help="min,max seconds between requests")
    parser.add_argument(
        "--closed-loop",
        action="store_true",
        help="no think time: open a task, submit a completed annotation, next (no Celery worker)",
    )
    parser.add_argument(
        "--drafts", type=int, default=1, help="closed loop: draft saves before each submit"
    )
    parser.add_argument(
        "--client",
        choices=("requests", "fast"),
        default="fast",
        help="closed loop: locust's client, python-requests (HttpUser) or geventhttpclient "
        "(FastHttpUser, a fraction of the CPU per request: the load generator shares the cores)",
    )
    parser.add_argument(
        "--warmup", type=float, default=10, help="seconds after all users started before measuring"
    )
    parser.add_argument("--dataset", choices=DATASETS, default="demo")
    parser.add_argument(
        "--record-events",
        type=int,
        default=13_000,
        help="medalign303: mean events per record (the release's is about 13,000)",
    )
    parser.add_argument(
        "--tasks",
        type=int,
        default=303,
        help="medalign303: instructions on its 101 records (MedAlign's 303 by default). A task "
        "goes to at most 20 clinicians, so 303 tasks hold 6,060 annotations: a closed-loop run "
        "at 90/s uses them up within its minute (a user on a lightly loaded worker first); "
        "--tasks 1515 gives five times the pool on the same records",
    )
    parser.add_argument("--small", action="store_true", help="same as --dataset demo-small")
    parser.add_argument(
        "--reuse-dataset",
        action="store_true",
        help="keep the loaded data set in a template database and copy it on the next run",
    )
    parser.add_argument("--database", default="medalign_load")
    parser.add_argument("--redis-db", type=int, default=7)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args(argv)
    args.run_time = max(5, min(args.run_time, 600))
    if args.small:
        args.dataset = "demo-small"
    if args.workers is None:
        args.workers = 4 if args.closed_loop else 3

    work = Path(tempfile.mkdtemp(prefix="medalign-load-"))
    size = f"_{args.record_events}" if args.dataset == "medalign303" else ""
    if args.dataset == "medalign303" and args.tasks != 303:
        size += f"_t{args.tasks}"
    template = f"{args.database}_tpl_{args.dataset.replace('-', '_')}{size}"
    reused = args.reuse_dataset and harness.database_exists(template)
    database_url = harness.fresh_database(args.database, template=template if reused else None)
    broker = f"redis://127.0.0.1:6379/{args.redis_db}"
    env = harness.app_env(database_url, broker, work / "data")
    procs = harness.Processes(work / "logs")
    (work / "logs").mkdir(exist_ok=True)
    log(f"database {args.database}, broker {broker}, logs in {procs.log_dir}")
    meter = None
    try:
        t0 = time.monotonic()
        harness.manage(env, "migrate", "--noinput", "-v", "0")
        harness.manage(env, "collectstatic", "--noinput", "-v", "0")
        if reused:
            log(f"data set {args.dataset} copied from template database {template}")
            # A template loaded by an older version may lack the excerpts an import now
            # prepares; without them the run would measure first views ranking them.
            harness.manage(env, "prepare_excerpts", "--no-progress")
        else:
            _load_dataset(args.dataset, env, work, args.record_events, args.tasks)
            if args.reuse_dataset:
                harness.copy_database(args.database, template)
        log(f"database ready in {time.monotonic() - t0:.0f} s")
        harness.configure_django(env)
        dataset_name = "demo" if args.dataset.startswith("demo") else args.dataset
        setup = _setup_accounts(args, work, dataset_name)
        run_id = None if args.closed_loop else _start_scoring(dataset_name)

        port = harness.free_port()
        host = f"http://127.0.0.1:{port}"
        gunicorn = procs.start(
            "gunicorn", harness.gunicorn_args(port, workers=args.workers, threads=args.threads), env
        )
        if not args.closed_loop:
            procs.start("celery", harness.celery_args(concurrency=1), env)
        if not harness.wait_until(lambda: harness.http_ok(host + "/healthz"), timeout=60):
            log("gunicorn did not come up:\n" + procs.tail("gunicorn"))
            return 1
        if run_id is not None:
            # The worker's start-up (it imports the metric libraries) and the lexical run take
            # both cores for a while: let them finish so the figures measure the web tier.
            t1 = time.monotonic()
            harness.wait_until(lambda: "ready." in procs.tail("celery", 200), timeout=120)
            _wait_scoring(run_id, timeout=180)
            log(f"worker up and scoring run {run_id} finished in {time.monotonic() - t1:.0f} s")
        meter = harness.CpuMeter(gunicorn_pid=gunicorn.pid, database=args.database)
        mode = "closed loop, no think time" if args.closed_loop else f"think {args.think} s"
        log(
            f"gunicorn {args.workers}x{args.threads} up on {host}; running locust: {args.users} "
            f"users for {args.run_time} s ({mode}); load average {_loadavg()}"
        )
        stats, window = _run_locust(args, host, env, setup, work, meter)
        ok = _report(stats, args.p95_ms)
        _report_throughput(args, window, work / "results.json")
        ok &= _check_database(setup, work / "results.json")
        if run_id is not None:
            ok &= _check_scoring(run_id)
        log("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        if meter is not None:
            meter.stop()
        procs.stop_all()
        subprocess.run(
            ["redis-cli", "-h", "127.0.0.1", "-p", "6379", "-n", str(args.redis_db), "flushdb"],
            capture_output=True,
            timeout=10,
        )
        if not args.keep_db:
            from django.conf import settings

            if settings.configured:  # not when the set-up failed before Django was
                from django.db import connections

                connections.close_all()
            harness.drop_database(args.database)


def _loadavg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _cores() -> int:
    return os.cpu_count() or 1


def _load_dataset(
    name: str, env: dict[str, str], work: Path, record_events: int, tasks: int = 303
) -> None:
    if name in ("demo", "demo-small"):
        # Synthetic data in the run's own database: load_demo runs only with DEBUG on.
        harness.manage(
            {**env, "DEBUG": "true"},
            "load_demo",
            "--no-progress",
            *(["--small"] if name != "demo" else []),
        )
        return
    from review.demo.release import DemoSpec, write_release

    # MedAlign's 303 instructions with clinician answers, 6 model responses each (the demo's six
    # models), three instructions per record. Records of the release's size by default: it
    # averages about 13,000 events per patient (3.6 million over 275) with a long tail; here
    # from a quarter to 1.75 times the mean, and one of four times the mean.
    n_patients = 101
    spec = DemoSpec(
        n_patients=n_patients,
        n_instructions=tasks,
        big_record_events=4 * record_events,
        events_per_patient=record_events // 4,
        events_step=(3 * record_events // 2) // (n_patients - 1),
        seed=303,
    )
    out = work / "release"
    t0 = time.monotonic()
    counts = write_release(out, spec)
    log(
        f"wrote {counts['instructions']} instructions, {counts['responses']} responses, "
        f"{counts['patients']} records, {counts['events']:,} events "
        f"in {time.monotonic() - t0:.0f} s; importing"
    )
    harness.manage(
        env, "import_medalign", str(out), "--dataset", name, "--no-progress", timeout=3 * 3600
    )
    for path in sorted(out.rglob("*"), reverse=True):  # the XML is ~200 MB: not kept
        path.rmdir() if path.is_dir() else path.unlink()


def _setup_accounts(args: argparse.Namespace, work: Path, dataset_name: str) -> dict:
    from django.conf import settings
    from django.db.models import Count
    from django.middleware.csrf import _get_new_csrf_string
    from django.test import Client

    from review.models import Assignment, Dataset, Instruction, Role
    from review.services.assignments import MAX_OVERLAP, assignments_create
    from tests import factories

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # set-up only
    dataset = Dataset.objects.get(name=dataset_name)
    clinicians = [
        factories.make_user(
            f"load{i:02d}@example.edu", roles=[Role.CLINICIAN], full_name=f"Load {i}"
        )
        for i in range(args.users)
    ]
    instructions = list(
        Instruction.objects.filter(dataset=dataset, patient__isnull=False).order_by("id")
    )
    if args.closed_loop:
        # As many clinicians per task as the service allows (assignments already there, like
        # the demo's own, count towards it): 303 tasks x 20 give each of 50 clinicians ~120,
        # far more than a run gets through. Each starts at a different one, so that they spread
        # over the records the way a shared queue would.
        assignments_create(
            instructions=instructions,
            clinicians=clinicians,
            overlap=min(MAX_OVERLAP, _max_overlap(instructions) + len(clinicians)),
            actor=None,
        )
        step = max(1, len(instructions) // max(1, len(clinicians)))
        todo = {}
        for n, user in enumerate(clinicians):
            ids = list(
                Assignment.objects.filter(clinician=user)
                .order_by("instruction_id")
                .values_list("instruction_id", flat=True)
            )
            todo[user.pk] = ids[n * step :] + ids[: n * step]
        big: list = []
        biggest = None
    else:
        biggest = (
            Instruction.objects.filter(dataset=dataset, patient__isnull=False)
            .annotate(n=Count("patient__events"))
            .order_by("-n")
            .values_list("patient_id", flat=True)
            .first()
        )
        big = [i for i in instructions if i.patient_id == biggest]
        # The largest record first, to as many clinicians as overlap allows; then the rest.
        assignments_create(
            instructions=big[:1],
            clinicians=clinicians,
            overlap=min(20, len(clinicians)),
            actor=None,
        )
        # Existing assignments (the demo's own) count towards the overlap: top up beyond them.
        existing = _max_overlap(instructions)
        wanted = -(-args.users * args.per_user // max(1, len(instructions)))
        overlap = max(1, min(20, existing + wanted))
        assignments_create(
            instructions=instructions, clinicians=clinicians, overlap=overlap, actor=None
        )
        big_ids = {b.pk for b in big}
        todo = {}
        for user in clinicians:
            ids = list(
                Assignment.objects.filter(clinician=user)
                .order_by("id")
                .values_list("instruction_id", flat=True)
            )
            ids.sort(key=lambda i: (0 if i in big_ids else 1, i))
            todo[user.pk] = ids[: args.per_user + 1]
    accounts = []
    for user in clinicians:
        client = Client()
        client.force_login(user)
        factories.record_second_factor(client, user)  # signed in with TOTP
        accounts.append(
            {
                "user": user.pk,
                "session": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "csrf": _get_new_csrf_string(),
                "instructions": todo[user.pk],
            }
        )
    path = work / "accounts.json"
    path.write_text(json.dumps(accounts))
    n_assign = Assignment.objects.filter(clinician__in=clinicians).count()
    log(
        f"{len(clinicians)} clinicians, {n_assign} assignments "
        f"({sum(len(a['instructions']) for a in accounts)} to be worked through"
        + (f"; largest record: {len(big)} instruction(s) on patient {biggest})" if big else ")")
    )
    return {"accounts": path, "clinicians": [u.pk for u in clinicians]}


def _max_overlap(instructions: list) -> int:
    from django.db.models import Count

    from review.models import Assignment

    return (
        Assignment.objects.filter(instruction__in=instructions)
        .values("instruction")
        .annotate(n=Count("id"))
        .order_by("-n")
        .values_list("n", flat=True)
        .first()
        or 0
    )


def _start_scoring(dataset_name: str) -> int:
    from review.models import Dataset
    from scoring.runs.scoring import scoring_run_create

    run = scoring_run_create(
        dataset=Dataset.objects.get(name=dataset_name), metrics=LEXICAL, batch_size=8
    )
    log(f"scoring run {run.pk} queued ({run.total} scores to compute: {', '.join(LEXICAL)})")
    return run.pk


def _user_class(args: argparse.Namespace) -> str:
    if not args.closed_loop:
        return "Clinician"
    return "FastClosedLoopClinician" if args.client == "fast" else "ClosedLoopClinician"


def _run_locust(
    args: argparse.Namespace,
    host: str,
    env: dict,
    setup: dict,
    work: Path,
    meter: harness.CpuMeter,
) -> tuple[list[dict], dict]:
    """Run locust; return its stats rows and the measuring window (times and CPU snapshots)."""
    prefix = work / "locust"
    locust_env = {
        **env,
        "LOAD_ACCOUNTS": str(setup["accounts"]),
        "LOAD_RESULTS": str(work / "results.json"),
        "LOAD_THINK": args.think,
        "LOAD_DRAFTS": str(args.drafts),
        "LOAD_SPAWNED": str(work / "spawned.json"),
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
        "30" if args.closed_loop else "10",  # a closed-loop user finishes its annotation
        "--csv",
        str(prefix),
        "--only-summary",
        "--loglevel",
        "WARNING",
        _user_class(args),
    ]
    # Measure from --warmup seconds after every user runs (locust says when) until just before
    # the end of the run, which locust counts from its own start.
    spawned_file = Path(locust_env["LOAD_SPAWNED"])
    proc = subprocess.Popen(cmd, cwd=harness.ROOT, env=locust_env)
    meter.locust_pid = proc.pid
    window: dict = {}
    try:
        if not harness.wait_until(spawned_file.exists, timeout=120, interval=0.1):
            raise RuntimeError("locust did not start its users within 120 s")
        time.sleep(0.2)  # the file is written in one go; let it land
        times = json.loads(spawned_file.read_text())
        end = times["started"] + args.run_time - 1
        begin = min(times["spawned"] + args.warmup, end - 5)
        time.sleep(max(0.0, begin - time.time()))
        window = {"start": meter.snapshot(), "start_time": time.time()}
        time.sleep(max(0.0, end - time.time()))
        window |= {"end": meter.snapshot(), "end_time": time.time()}
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    with open(f"{prefix}_stats.csv") as fh:
        return list(csv.DictReader(fh)), window


def _report_throughput(args: argparse.Namespace, window: dict, results_path: Path) -> None:
    """Completed annotations/s and CPU per annotation, over the measuring window."""
    submitted = json.loads(results_path.read_text()) if results_path.exists() else []
    t0, t1 = window["start_time"], window["end_time"]
    done = sum(1 for item in submitted if t0 <= item.get("t", 0) <= t1)
    a, b = window["start"], window["end"]
    seconds = b["wall"] - a["wall"]
    used = {part: b[part] - a[part] for part in ("gunicorn", "postgres", "locust", "machine")}
    other = used["machine"] - used["gunicorn"] - used["postgres"] - used["locust"]
    per = {part: 1000 * v / done if done else float("nan") for part, v in used.items()}
    server = per["gunicorn"] + per["postgres"]
    print()
    log(
        f"measured over {seconds:.0f} s, from {args.warmup:.0f} s after all {args.users} users "
        f"were started: {done} completed (acknowledged) annotations"
    )
    print(f"  completed annotations/s       {done / seconds:8.1f}")
    print(
        f"  server CPU per annotation     {server:8.1f} ms "
        f"(gunicorn {per['gunicorn']:.1f} + PostgreSQL {per['postgres']:.1f})"
    )
    print(
        f"  CPU used, cores               gunicorn {used['gunicorn'] / seconds:.2f}, PostgreSQL "
        f"{used['postgres'] / seconds:.2f}, locust {used['locust'] / seconds:.2f}, everything "
        f"else on the machine {other / seconds:.2f} (of {_cores()}); load average {_loadavg()}"
    )
    # A closed-loop user that has worked through all its assignments reopens them read-only:
    # its requests still cost CPU but complete no annotation, so the figures above understate
    # throughput once that happens inside the window (each task has at most 20 clinicians).
    exhausted_path = results_path.with_name(results_path.name + ".exhausted")
    exhausted = json.loads(exhausted_path.read_text()) if exhausted_path.exists() else []
    early = sorted(t - t0 for t in exhausted if t <= t1)
    if early:
        print(
            f"  NOTE: {len(early)} user(s) ran out of assignments before the window ended (the "
            f"first {early[0]:+.0f} s from its start) and then reopened submitted reviews; "
            "raise --tasks (or shorten --run-time) for a clean figure"
        )


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
        # The page names responses by per-review handles; the review maps them to responses.
        by_response = {j.response_id: j for j in review.judgements.all()}
        judgements = {
            handle: by_response.get(int(rid))
            for handle, rid in zip(review.handles, review.shown_order, strict=True)
        }
        if set(item["ranks"]) != set(judgements) or len(by_response) != len(review.shown_order):
            problems.append(f"review {review.pk}: judgements {sorted(judgements)} != sent")
            continue
        for handle, rank in item["ranks"].items():
            j = judgements[handle]
            if j is None or j.rank != rank or j.is_correct != item["correct"][handle]:
                problems.append(f"review {review.pk}: response {handle} stored differently")
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
    # Each acknowledged submission was checked above. A submit still in flight when locust
    # stopped may be stored without its answer ever reaching the client: at most one per user.
    unacknowledged = db_submitted - len(submitted)
    if unacknowledged < 0 or unacknowledged > len(clinicians):
        problems.append(
            f"{db_submitted} submitted reviews in the database, {len(submitted)} acknowledged"
        )
    elif unacknowledged:
        log(f"{unacknowledged} submission(s) stored whose answer locust did not wait for (at stop)")
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
