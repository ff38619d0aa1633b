"""The annotation target in one run: this app against Label Studio, alternating.

    .venv/bin/python -m tests.load.compare_label_studio            # 2 rounds, ~5 min
    .venv/bin/python -m tests.load.compare_label_studio --rounds 3

Each round runs this app's closed-loop benchmark (``python -m tests.load.run --closed-loop
--dataset medalign303 --reuse-dataset --client fast``: 50 users, no think time, gunicorn 4x4,
60 s, measured over 45 s) and then Label Studio 1.23.2 under the same load
(``tests/load/label_studio/``: a fresh copy of its 303-task database, its own gunicorn 4x4,
the same locust client, users and window). Alternating, so that a host whose speed drifts
moves both. Prints each run, then this app's completed annotations/s against Label Studio's
(mean over mean, and the lowest pairing: this app's slowest run against Label Studio's
fastest) with the targets: >= 13x, p95 < 300 ms on every endpoint, 0 errors, every
acknowledged submission stored once (the runner's database check). Exits 1 if a target is
missed, 2 if Label Studio is not installed (its README has the commands).

``--database`` and ``--redis-db`` are this app's (the runner's options); Label Studio's database
is ``$LS_DB`` (default ls_bench, its template ``${LS_DB}_tpl``) and its port ``$LS_PORT``
(default 8765), as in its README, so that several people can run this on one host.

``--tasks`` (default 3030) is this app's pool: a task goes to at most 20 clinicians, and
303 tasks x 20 run out inside a minute at this app's speed (see the runner's --help); at
170 annotations/s some users ran out of 1515.
"""

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.load import harness
from tests.load.harness import log

LS = harness.ROOT / "tests" / "load" / "label_studio"
TARGET_RATIO = 13.0
TARGET_P95_MS = 300.0


@dataclass
class Result:
    name: str
    per_second: float
    cpu_ms: float  # server CPU per annotation (gunicorn + PostgreSQL)
    p95_ms: float  # worst endpoint
    errors: int
    stored_once: bool
    ran_out: bool = False  # this app: a user ran out of assignments inside the window


LS_DB = os.environ.get("LS_DB", "ls_bench")
LS_PORT = os.environ.get("LS_PORT", "8765")


def _ours(tasks: int, log_path: Path, *, database: str, redis_db: int) -> Result:
    cmd = [
        sys.executable,
        "-m",
        "tests.load.run",
        "--closed-loop",
        "--dataset",
        "medalign303",
        "--tasks",
        str(tasks),
        "--reuse-dataset",
        "--client",
        "fast",
        *("--database", database, "--redis-db", str(redis_db)),
    ]
    with log_path.open("w") as fh:
        subprocess.run(cmd, cwd=harness.ROOT, stdout=fh, stderr=subprocess.STDOUT)
    text = log_path.read_text()
    rate = re.search(r"completed annotations/s\s+([\d.]+)", text)
    cpu = re.search(r"server CPU per annotation\s+([\d.]+) ms", text)
    # The runner's own table ("POST autosave", one space; req/s with a decimal), not locust's.
    rows = re.findall(
        r"^(?:POST|GET) \S.*?\s+(\d+)\s+(\d+)\s+\d+\.\d\s+\d+\s+(\d+)\s+\d+(?:\s+<-- MISSED)?$",
        text,
        re.M,
    )
    if not (rate and cpu) or len(rows) != 3:  # review page, autosave, submit
        raise RuntimeError(f"this app's run printed no complete figures: see {log_path}")
    return Result(
        name="this app",
        per_second=float(rate.group(1)),
        cpu_ms=float(cpu.group(1)),
        p95_ms=max(float(p95) for _n, _e, p95 in rows),
        errors=sum(int(e) for _n, e, _p in rows),
        # The runner's database check logs LOST/DUPLICATED for each problem it finds.
        stored_once=bool(re.search(r"\] database: \d+ submissions acknowledged", text))
        and "LOST/DUPLICATED" not in text
        and "no submission was made" not in text,
        ran_out="ran out of assignments before the window ended" in text,
    )


def _label_studio(work: Path, tag: str) -> Result:
    env = {**os.environ, "LS_BENCH_DIR": str(work)}
    subprocess.run([str(LS / "stop.sh")], env=env, capture_output=True)
    subprocess.run([str(LS / "reset_db.sh")], env=env, check=True, capture_output=True)
    subprocess.run([str(LS / "serve.sh"), "--daemon"], env=env, check=True)
    try:
        subprocess.run([str(LS / "wait_ready.sh")], env=env, check=True, capture_output=True)
        cpu_out = work / f"{tag}_cpu.txt"
        with cpu_out.open("w") as fh:
            meter = subprocess.Popen(
                [
                    *(sys.executable, str(LS / "cpu.py"), "--db", LS_DB),
                    *("--delay", "10", "--seconds", "45"),
                ],
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
            )
            subprocess.run(
                [
                    str(harness.BIN / "locust"),
                    "-f",
                    str(LS / "locustfile.py"),
                    "--headless",
                    *("-u", "50", "-r", "50", "-t", "60s"),
                    *("--host", f"http://127.0.0.1:{LS_PORT}"),
                    *("--csv", str(work / tag), "--only-summary"),
                ],
                env={**env, "LS_BENCH_RESULTS": str(work / f"{tag}_results.json")},
                cwd=harness.ROOT,
                capture_output=True,
                check=False,  # locust exits 1 when a request failed: counted below instead
            )
            meter.wait(timeout=120)
    finally:
        subprocess.run([str(LS / "stop.sh")], env=env, capture_output=True)
    text = cpu_out.read_text()
    rate = re.search(r"annotations stored in window: \d+ \(([\d.]+)/s\)", text)
    cpu = re.search(r"SERVER TOTAL \(gunicorn \+ postgres\)\s+[\d.]+\s+[\d.]+\s+([\d.]+)", text)
    if not (rate and cpu):
        raise RuntimeError(f"Label Studio's CPU meter printed no figures: see {cpu_out}")
    with open(work / f"{tag}_stats.csv") as fh:
        rows = [r for r in csv.DictReader(fh) if r["Name"] != "Aggregated"]
    counts = subprocess.run(
        [
            *("psql", "-h", harness.PG["host"], "-p", harness.PG["port"]),
            *("-U", harness.PG["user"], "-d", LS_DB, "-Atc"),
            "select count(*) = count(distinct (task_id, completed_by_id)) from task_completion",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    return Result(
        name="Label Studio 1.23.2",
        per_second=float(rate.group(1)),
        cpu_ms=float(cpu.group(1)),
        p95_ms=max(float(r["95%"]) for r in rows),
        errors=sum(int(r["Failure Count"]) for r in rows),
        stored_once=counts == "t",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=3030, help="this app's pool (see above)")
    parser.add_argument("--database", default="medalign_load", help="this app's (the runner's)")
    parser.add_argument("--redis-db", type=int, default=7, help="this app's (the runner's)")
    parser.add_argument(
        "--work", type=Path, default=Path(os.environ.get("LS_BENCH_DIR", "/tmp/ls-bench"))
    )
    args = parser.parse_args(argv)
    ls_venv = Path(os.environ.get("LS_VENV", "/tmp/lsvenv"))
    if not (ls_venv / "bin" / "gunicorn").exists() or not harness.database_exists(f"{LS_DB}_tpl"):
        print(
            f"Label Studio is not set up ({ls_venv}, database {LS_DB}_tpl): "
            f"see {LS / 'README.md'}, 'Install and set-up (once)'",
            file=sys.stderr,
        )
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    ours: list[Result] = []
    theirs: list[Result] = []
    for n in range(1, args.rounds + 1):
        ours.append(
            _ours(
                args.tasks,
                args.work / f"medalign_round{n}.log",
                database=args.database,
                redis_db=args.redis_db,
            )
        )
        log(f"round {n}: this app {ours[-1].per_second:.1f}/s")
        theirs.append(_label_studio(args.work, f"ls_round{n}"))
        log(f"round {n}: Label Studio {theirs[-1].per_second:.1f}/s")
    print()
    print(
        f"{'run':<26}{'annotations/s':>14}{'CPU ms/annotation':>19}{'p95 ms':>9}{'errors':>8}  stored once"
    )
    for a, b in zip(ours, theirs, strict=True):
        for r in (a, b):
            print(
                f"{r.name:<26}{r.per_second:>14.1f}{r.cpu_ms:>19.1f}{r.p95_ms:>9.0f}{r.errors:>8}"
                f"  {'yes' if r.stored_once else 'NO'}"
                + ("  (a user ran out of assignments: raise --tasks)" if r.ran_out else "")
            )
    mean_ratio = statistics.mean(r.per_second for r in ours) / statistics.mean(
        r.per_second for r in theirs
    )
    low_ratio = min(r.per_second for r in ours) / max(r.per_second for r in theirs)
    p95 = max(r.p95_ms for r in ours)
    errors = sum(r.errors for r in ours)
    stored = all(r.stored_once for r in ours)
    print()
    checks = [
        (
            f"annotations/s: {mean_ratio:.1f}x Label Studio (lowest pairing {low_ratio:.1f}x)",
            f">= {TARGET_RATIO:.0f}x",
            mean_ratio >= TARGET_RATIO,
        ),
        (
            f"p95, worst endpoint of any run: {p95:.0f} ms",
            f"< {TARGET_P95_MS:.0f} ms",
            p95 < TARGET_P95_MS,
        ),
        (f"errors: {errors}", "0", errors == 0),
        (f"every acknowledged submission stored once: {'yes' if stored else 'NO'}", "yes", stored),
    ]
    for text, target, ok in checks:
        print(f"  {text:<64} target {target:<9} {'met' if ok else 'MISSED'}")
    return 0 if all(ok for _t, _g, ok in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
