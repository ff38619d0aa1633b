"""Server CPU per annotation for the Label Studio baseline, from /proc via psutil.

Run with a Python that has psutil (e.g. the project's .venv/bin/python). Samples every --interval
seconds (0.2) from --delay until --seconds have passed (or SIGINT/SIGTERM), by process:

  gunicorn    the master in $LS_BENCH_DIR/gunicorn.pid and its workers. A worker that exits in
              the window is counted through the master's reaped-children counters (its whole
              life) minus its reading at the window start.
  postgres    backends of database --db (process title "postgres: <user> <db> ..."). LS 1.23 sets
              no CONN_MAX_AGE, so Django opens a new connection (a new backend) per request and
              most backends live well under one sampling interval. So this is counted as the
              gunicorn group is: backends that end in the window through the postmaster's
              reaped-children counters, minus their reading at the start; backends of other
              databases seen ending in the window are subtracted with their last reading. Backends
              of other databases that are never seen (shorter than --interval) cannot be told
              apart: the "postgres, other DBs seen" line and the sampled-only lower bound show how
              much that matters; on a quiet machine it is ~0. Background processes (checkpointer,
              walwriter, autovacuum, ...) are reported separately, not in the total.
  locust      processes whose command line mentions locust (the load generator).
  machine     all CPUs (from /proc/stat), and what is left for everything else.

Completed annotations in the window: count of task_completion rows (psql) at start and end,
so the figure is server CPU (gunicorn + ls_bench backends) per annotation stored.

  .venv/bin/python tests/load/label_studio/cpu.py --delay 10 --seconds 45
"""

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil

BENCH_DIR = os.environ.get("LS_BENCH_DIR", "/tmp/ls-bench")

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument(
    "--pidfile",
    default=os.path.join(BENCH_DIR, "gunicorn.pid"),
    help="gunicorn master pidfile (default: $LS_BENCH_DIR/gunicorn.pid)",
)
p.add_argument("--db", default=os.environ.get("POSTGRE_NAME", "ls_bench"))
p.add_argument("--interval", type=float, default=0.2)
p.add_argument(
    "--delay", type=float, default=0.0, help="seconds to wait before the window starts (warm-up)"
)
p.add_argument("--seconds", type=float, default=0.0, help="window length; 0 = until SIGINT/SIGTERM")
p.add_argument("--no-count", action="store_true", help="do not count annotations with psql")
args = p.parse_args()

stop = False


def _stop(*_):
    global stop
    stop = True


signal.signal(signal.SIGINT, _stop)
signal.signal(signal.SIGTERM, _stop)


def count_annotations() -> int | None:
    if args.no_count:
        return None
    try:
        out = subprocess.run(
            [
                "psql",
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-d",
                args.db,
                "-Atc",
                "select count(*) from task_completion where was_cancelled = false",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return int(out.stdout.strip())
    except Exception as e:  # best effort: report without a count rather than abort
        print(f"cpu.py: cannot count annotations: {e}", file=sys.stderr)
        return None


def own(t) -> float:
    return t.user + t.system


def reaped(t) -> float:
    return t.children_user + t.children_system


def find_postmaster() -> psutil.Process:
    for proc in psutil.process_iter(["name", "ppid"]):
        if proc.info["name"] in ("postgres", "postmaster"):
            try:
                if psutil.Process(proc.info["ppid"]).name() not in ("postgres", "postmaster"):
                    return proc
            except psutil.Error:
                continue
    sys.exit("cpu.py: no postmaster found")


def machine_busy() -> float:
    t = psutil.cpu_times()
    return (
        t.user
        + t.nice
        + t.system
        + getattr(t, "irq", 0)
        + getattr(t, "softirq", 0)
        + getattr(t, "steal", 0)
    )


if args.delay:
    time.sleep(args.delay)

with open(args.pidfile) as _f:
    master = psutil.Process(int(_f.read().strip()))
postmaster = find_postmaster()
me = os.getpid()
n0 = count_annotations()
time.sleep(0.3)  # let the postmaster reap psql's backend before the baseline

# per pid: group, reading at first sight (0 if born in the window), last reading
base: dict[int, float] = {}
last: dict[int, float] = {}
group: dict[int, str] = {}
procs: dict[int, psutil.Process] = {}


def classify(proc: psutil.Process) -> str | None:
    try:
        if proc.pid == me:
            return "cpu.py"
        ppid = proc.ppid()
        if ppid == master.pid:
            return "gunicorn worker"
        if ppid == postmaster.pid:
            # client backend: "postgres: [<cluster>: ]<user> <db> <host>(<port>)|[local] <state>";
            # anything else (checkpointer, walwriter, autovacuum worker <db>, ...) is background
            parts = " ".join(proc.cmdline()).split()
            if parts and parts[0] == "postgres:":
                parts = parts[1:]
            if parts and parts[0].endswith(":"):
                parts = parts[1:]
            if len(parts) >= 3 and ("(" in parts[2] or parts[2] == "[local]"):
                return f"postgres {args.db}" if parts[1] == args.db else "postgres, other DBs"
            return "postgres background"
        cmd = " ".join(proc.cmdline())
        if "locust" in cmd and "cpu.py" not in cmd:
            return "locust"
    except psutil.Error:
        return None
    return None


def sample(first: bool) -> float:
    now = time.time()
    for proc in psutil.process_iter():
        pid = proc.pid
        if pid in (master.pid, postmaster.pid):
            continue
        if pid not in group:
            g = classify(proc)
            if g is None:
                continue
            try:
                t = own(proc.cpu_times())
                born = proc.create_time()
            except psutil.Error:
                continue
            group[pid], procs[pid] = g, proc
            base[pid] = t if (first or born < t0_wall) else 0.0
            last[pid] = t
        else:
            with contextlib.suppress(psutil.Error):  # gone: keep its last reading
                last[pid] = own(procs[pid].cpu_times())
    return now


t0_wall = time.time()
m0, pm0 = master.cpu_times(), postmaster.cpu_times()
busy0 = machine_busy()
sample(first=True)
t_start = time.monotonic()
while not stop and (args.seconds <= 0 or time.monotonic() - t_start < args.seconds):
    time.sleep(args.interval)
    sample(first=False)
m1, pm1 = master.cpu_times(), postmaster.cpu_times()
busy1 = machine_busy()
alive = {pid for pid in group if psutil.pid_exists(pid) and procs[pid].is_running()}
wall = time.monotonic() - t_start
n1 = count_annotations()

tot: dict[str, float] = {}
gone_base: dict[str, float] = {}
gone_last: dict[str, float] = {}
seen: dict[str, int] = {}
for pid, g in group.items():
    seen[g] = seen.get(g, 0) + 1
    if pid in alive:
        tot[g] = tot.get(g, 0.0) + last[pid] - base[pid]
    else:
        gone_base[g] = gone_base.get(g, 0.0) + base[pid]
        gone_last[g] = gone_last.get(g, 0.0) + last[pid] - base[pid]

gunicorn_master = own(m1) - own(m0)
gunicorn_reaped = reaped(m1) - reaped(m0)
gunicorn = (
    gunicorn_master
    + tot.get("gunicorn worker", 0.0)
    + gunicorn_reaped
    - gone_base.get("gunicorn worker", 0.0)
)

pg_db, pg_other = f"postgres {args.db}", "postgres, other DBs"
pm_reaped = reaped(pm1) - reaped(pm0)
pg_sampled = tot.get(pg_db, 0.0) + gone_last.get(pg_db, 0.0)
pg = (
    tot.get(pg_db, 0.0)
    + pm_reaped
    - gone_base.get(pg_db, 0.0)
    - gone_base.get(pg_other, 0.0)
    - gone_last.get(pg_other, 0.0)
    - gone_base.get("postgres background", 0.0)
    - gone_last.get("postgres background", 0.0)
)
pg_bg = (
    tot.get("postgres background", 0.0)
    + gone_last.get("postgres background", 0.0)
    + own(pm1)
    - own(pm0)
)
pg_other_seen = tot.get(pg_other, 0.0) + gone_last.get(pg_other, 0.0)
locust = tot.get("locust", 0.0) + gone_last.get("locust", 0.0)
cpupy = tot.get("cpu.py", 0.0)
machine = busy1 - busy0
other = machine - gunicorn - pg - pg_bg - pg_other_seen - locust - cpupy

ann = (n1 - n0) if (n0 is not None and n1 is not None) else None
print(
    f"window {wall:.1f} s, sampled every {args.interval} s; annotations stored in window: {ann}"
    + (f" ({ann / wall:.1f}/s)" if ann else "")
)
rows = [
    (
        "gunicorn (master+workers, incl. reaped)",
        gunicorn,
        f"master {gunicorn_master:.2f} + workers {tot.get('gunicorn worker', 0.0):.2f} + reaped {gunicorn_reaped:.2f}"
        f" - reaped workers' start readings {gone_base.get('gunicorn worker', 0.0):.2f}; {seen.get('gunicorn worker', 0)} workers seen",
    ),
    (
        f"postgres backends of {args.db}",
        pg,
        f"postmaster reaped {pm_reaped:.2f} + live {tot.get(pg_db, 0.0):.2f} - corrections; {seen.get(pg_db, 0)} backends seen;"
        f" sampled-only lower bound {pg_sampled:.2f}",
    ),
    ("SERVER TOTAL (gunicorn + postgres)", gunicorn + pg, ""),
    ("postgres background + postmaster", pg_bg, "not in total"),
    ("postgres, other DBs seen", pg_other_seen, f"{seen.get(pg_other, 0)} backends; not in total"),
    ("locust", locust, f"{seen.get('locust', 0)} processes"),
    ("cpu.py itself", cpupy, ""),
    ("everything else on the machine", other, ""),
    ("machine (all CPUs)", machine, f"{psutil.cpu_count()} CPUs"),
]
print(f"{'group':44s} {'CPU s':>8s} {'cores':>6s} {'ms/annotation':>14s}  detail")
for name, v, detail in rows:
    per = f"{1000 * v / ann:.1f}" if ann else "-"
    print(f"{name:44s} {v:8.2f} {v / wall:6.2f} {per:>14s}  {detail}")
