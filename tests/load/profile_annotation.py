"""Profile one clinician annotation, endpoint by endpoint: Python CPU by area, SQL per request.

    .venv/bin/python -m tests.load.run --closed-loop --dataset medalign303 --keep-db \\
        --database medalign_load                      # leaves the loaded database behind
    .venv/bin/python -m tests.load.profile_annotation --database medalign_load -n 30

Against a database the load test kept (its clinicians, their assignments), in this process with
Django's test client (DEBUG off, the production middleware; the client skips the CSRF check), it
works through ``-n`` annotations the way the closed-loop users do (shapes.py): open the review
page (the excerpt inline, as the import prepared it), save the completed annotation as a draft,
submit. Each request runs under
cProfile with a CPU-time clock (waiting for PostgreSQL is not counted) and with its SQL captured.
Prints per endpoint: wall and CPU time, queries per request, the share of Python CPU in each area
(ORM and SQL compilation, driver, templates, BM25, sessions/auth/access, ...), the heaviest
functions, and the statements of one request (text with placeholders: no patient data).
"""

import argparse
import cProfile
import json
import pstats
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from functools import partial
from pathlib import Path

from tests.load import harness, shapes

# Where Python CPU goes, by the file a function is defined in (first match wins).
AREAS = [
    ("ORM & SQL compilation", ("django/db/models/", "django/db/backends/", "django/db/utils")),
    ("database driver (psycopg)", ("psycopg",)),
    ("templates", ("django/template/", "django/templatetags/", "humanize")),
    ("BM25, tokenizing, highlighting", ("review/search.py",)),
    (
        "sessions, auth, access checks",
        ("django/contrib/sessions", "django/contrib/auth", "allauth", "review/access.py"),
    ),
    ("JSON", ("/json/",)),
    (
        "request handling, middleware, URLs",
        ("django/core/handlers", "django/middleware", "django/http", "django/urls", "whitenoise"),
    ),
    ("Django utilities (dates, lazy strings, ...)", ("django/utils/", "asgiref")),
    ("app code (review/, scoring/)", ("/review/", "/scoring/")),
    ("Django test client", ("django/test/",)),
]
JSON = "application/json"
STEPS = ["review page", "autosave", "submit"]


OTHER = "other"


def _area(filename: str) -> str | None:
    """The area of a function's file; None for built-ins and the standard library, whose time
    belongs to whoever called them (copy.copy is the ORM cloning a queryset, and so on)."""
    for name, needles in AREAS:
        if any(n in filename for n in needles):
            return name
    if filename.startswith("~") or ("/lib/python3" in filename and "site-packages" not in filename):
        return None
    return OTHER


def _areas(stats: dict) -> Counter:
    """Own CPU time per area, a built-in's or stdlib function's split among its callers."""
    totals: Counter[str] = Counter()

    def charge(func: tuple, seconds: float, depth: int) -> None:
        area = _area(func[0])
        if area is not None or depth > 8:
            totals[area or OTHER] += seconds
            return
        callers = stats[func][4] if func in stats else {}
        shares = {c: v[2] for c, v in callers.items() if v[2] > 0}  # own time under each caller
        whole = sum(shares.values())
        if not whole:
            totals[OTHER] += seconds
            return
        for caller, share in shares.items():
            charge(caller, seconds * share / whole, depth + 1)

    for func, (_cc, _nc, tt, _ct, _callers) in stats.items():
        charge(func, tt, 0)
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", default="medalign_load")
    parser.add_argument(
        "--redis-db", type=int, default=15, help="the shared cache's Redis database"
    )
    parser.add_argument("-n", "--annotations", type=int, default=30)
    parser.add_argument("--top", type=int, default=12, help="heaviest functions shown per step")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dump", type=Path, help="also write each step's profile (.prof) here")
    parser.add_argument(
        "--warmup", type=int, default=2, help="annotations made first, unprofiled (lazy imports)"
    )
    args = parser.parse_args(argv)
    url = (
        f"postgres://{harness.PG['user']}@{harness.PG['host']}:{harness.PG['port']}/{args.database}"
    )
    env = harness.app_env(
        url, f"redis://127.0.0.1:6379/{args.redis_db}", Path("/tmp/medalign-profile")
    )
    harness.manage(env, "collectstatic", "--noinput", "-v", "0")  # DEBUG off: the manifest
    harness.configure_django(env)
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from review.models import Assignment, Review
    from tests import factories

    pending = list(
        Assignment.objects.filter(clinician__email__startswith="load")
        .exclude(review__status=Review.Status.SUBMITTED)
        .select_related("clinician")
        .order_by("?")[: args.annotations + args.warmup]
    )
    if not pending:
        print("no open assignment of a load-test clinician in this database", file=sys.stderr)
        return 1
    rng = random.Random(args.seed)
    profiles = {step: cProfile.Profile(time.process_time) for step in STEPS}
    wall: dict[str, list[float]] = defaultdict(list)
    cpu: dict[str, list[float]] = defaultdict(list)
    queries: dict[str, list[int]] = defaultdict(list)
    statements: dict[str, list[str]] = {}
    profiled: Counter[str] = Counter()
    clients: dict[int, Client] = {}

    warming = [True]
    profiling = [False]

    def run(step: str, call):  # noqa: ANN001, ANN202 - a request, its response
        if warming[0]:
            return call()
        # Every other annotation runs under the profiler; the times come from the others, so
        # they carry no profiling overhead.
        with CaptureQueriesContext(connection) as captured:
            if profiling[0]:
                profiled[step] += 1
                profiles[step].enable()
                response = call()
                profiles[step].disable()
                return response
            w0, c0 = time.perf_counter(), time.process_time()
            response = call()
            w1, c1 = time.perf_counter(), time.process_time()
        wall[step].append((w1 - w0) * 1000)
        cpu[step].append((c1 - c0) * 1000)
        queries[step].append(len(captured))
        statements.setdefault(step, [q["sql"] for q in captured.captured_queries])
        return response

    for n, assignment in enumerate(pending):
        warming[0] = n < args.warmup
        profiling[0] = (n - args.warmup) % 2 == 1
        user = assignment.clinician
        if user.pk not in clients:
            clients[user.pk] = Client(HTTP_HOST="127.0.0.1")
            clients[user.pk].force_login(user)
            factories.record_second_factor(clients[user.pk], user)  # signed in with TOTP
            if len(clients) > 1:
                # One handler, as a gunicorn worker has: a new one loads the middleware again,
                # and WhiteNoise's scans every static file when it starts.
                clients[user.pk].handler = next(iter(clients.values())).handler
        client = clients[user.pk]
        instruction = assignment.instruction_id
        page = run("review page", partial(client.get, shapes.review_page_url(instruction)))
        data = shapes.task_data(page.content.decode())
        if page.status_code != 200 or data is None:
            print(f"review page answered {page.status_code}", file=sys.stderr)
            return 1
        if not data["editable"]:
            continue
        annotation = shapes.make_annotation(rng, len(data["responses"]))
        body = json.dumps(shapes.judgement_payload(data, annotation, len(data["responses"])))
        post = partial(client.post, content_type="application/json", HTTP_ACCEPT=JSON)
        saved = run("autosave", partial(post, shapes.save_url(data), body))
        assert saved.status_code == 200, saved.content[:200]
        data["version"] = shapes.saved_version(saved.json())
        body = json.dumps(shapes.judgement_payload(data, annotation, len(data["responses"])))
        done = run("submit", partial(post, shapes.submit_url(data), body))
        assert done.status_code == 200 and shapes.is_submitted(done.json()), done.content[:200]

    _report(args, wall, cpu, queries, statements, profiles, profiled)
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        for step, profile in profiles.items():
            profile.dump_stats(args.dump / f"{step.replace(' ', '_').replace(',', '')}.prof")
    return 0


def _normalise(sql: str) -> str:
    sql = re.sub(r"\s+", " ", sql)
    sql = re.sub(r"'[^']*'", "'…'", sql)  # literals (none should carry patient text; to be sure)
    sql = re.sub(r"\b\d+\b", "N", sql)
    return sql[:150]


def _report(args, wall, cpu, queries, statements, profiles, profiled) -> None:  # noqa: ANN001
    steps = [s for s in STEPS + ["excerpt, stored"] if wall.get(s)]
    print(
        f"\n{len(wall['review page']) * 2} annotations (half profiled), in process, PostgreSQL ({args.database})"
    )
    print(f"{'step':<18}{'wall p50 ms':>12}{'CPU mean ms':>12}{'queries':>9}")
    for step in steps:
        q = queries[step]
        qs = f"{min(q)}" if min(q) == max(q) else f"{min(q)}-{max(q)}"
        print(
            f"{step:<18}{statistics.median(wall[step]):>12.1f}"
            f"{statistics.mean(cpu[step]):>12.1f}{qs:>9}"
        )
    for step in steps:
        stats = pstats.Stats(profiles[step])
        raw = stats.stats  # type: ignore[attr-defined]
        areas = _areas(raw)
        total = sum(areas.values())
        rows = [
            (tt, ct, f"{_short(filename)}:{line}({func})")
            for (filename, line, func), (_cc, _nc, tt, ct, _callers) in raw.items()
        ]
        print(
            f"\n## {step}: Python CPU by area (cProfile, CPU clock; {total * 1000:.0f} ms in all)"
        )
        for area, seconds in areas.most_common():
            if seconds / total >= 0.01:
                print(f"  {100 * seconds / total:5.1f}%  {area}")
        print("  heaviest functions (own CPU ms per request / with callees):")
        n = max(1, profiled[step])
        for tt, ct, name in sorted(rows, reverse=True)[: args.top]:
            print(f"    {1000 * tt / n:7.2f} {1000 * ct / n:8.2f}  {name}")
        print(f"  SQL of one request ({len(statements[step])} statements):")
        for sql, count in Counter(_normalise(s) for s in statements[step]).items():
            print(f"    {count}x {sql}")


def _short(filename: str) -> str:
    for marker in ("site-packages/", "wt-load/", "lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


if __name__ == "__main__":
    sys.exit(main())
