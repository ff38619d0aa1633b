"""Fault drill: the Redis broker is down.

    /tmp/venv1/bin/python -m tests.faults.redis_down            # ~1 min
    /tmp/venv1/bin/python -m tests.faults.redis_down --short    # CI form (the same drill)

Starts its own redis-server on a free 127.0.0.1 port (the shared 6379 is never touched), the app
under gunicorn (DEBUG off) and a Celery worker on it, then stops that Redis and checks:
- reviewing keeps working: queue, review page, record, autosave and submit all answer 200,
  quickly (sessions are in the database; no review view touches the broker);
- starting a scoring run from the web form fails fast with a clear message (and the run is kept),
  and so does ``manage.py score`` (non-zero exit, a message naming the broker);
- once Redis is back, both runs are resumed (the web page's Resume button, ``score --resume``)
  and finish with exactly one score per response and metric.
Exits 1 if any of that does not hold.
"""

import argparse
import re
import socket
import subprocess
import sys
import time

import requests

from tests.faults.common import prepare, scoring_dataset
from tests.load import harness
from tests.load.harness import log


def _free_port() -> int:
    # A port nobody listens on, so a leftover server from an interrupted run can't stand in for
    # ours and make "Redis is down" untrue (the shared 6379 is never touched).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


REDIS_PORT = _free_port()
METRICS = "rougeL,bleu,chrf"


def start_redis(procs: harness.Processes, env: dict) -> None:
    procs.start(
        "redis",
        [
            "redis-server",
            "--bind",
            "127.0.0.1",
            "--port",
            str(REDIS_PORT),
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        env,
    )
    ok = harness.wait_until(
        lambda: (
            subprocess.run(
                ["redis-cli", "-h", "127.0.0.1", "-p", str(REDIS_PORT), "ping"],
                capture_output=True,
                timeout=5,
                check=False,
            ).stdout.strip()
            == b"PONG"
        ),
        timeout=20,
    )
    if not ok:
        raise RuntimeError(f"redis-server on {REDIS_PORT} did not start")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="CI form (the same drill)")
    parser.add_argument("--database", default="medalign_fault_redis")
    args = parser.parse_args(argv)
    env, work = prepare(args.database, f"redis://127.0.0.1:{REDIS_PORT}/0", static=True)
    procs = harness.Processes(work / "logs")
    try:
        return _drill(env, procs)
    finally:
        procs.stop_all()  # gunicorn, the worker and our own redis-server only
        from django.db import connections

        connections.close_all()
        harness.drop_database(args.database)


class Browser:
    """A signed-in client on plain HTTP: cookies sent by hand (Django marks them Secure)."""

    def __init__(self, host: str, session: str, csrf: str) -> None:
        self.host, self.csrf = host, csrf
        self.cookies = {"sessionid": session, "csrftoken": csrf}
        self.http = requests.Session()
        self.http.trust_env = False  # loopback only, never a proxy

    def _headers(self, extra: dict | None = None) -> dict:
        cookie = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        return {
            "Cookie": cookie,
            "X-CSRFToken": self.csrf,
            "Referer": self.host + "/",
            **(extra or {}),
        }

    def _keep(self, response: requests.Response) -> requests.Response:
        for name in ("messages",):
            if name in response.cookies:
                self.cookies[name] = response.cookies[name]
        return response

    def get(self, path: str, **kw) -> requests.Response:  # noqa: ANN003
        return self._keep(
            self.http.get(
                self.host + path, headers=self._headers(), timeout=30, allow_redirects=False, **kw
            )
        )

    def post(self, path: str, *, data=None, json_body=None) -> requests.Response:  # noqa: ANN001
        if json_body is not None:
            import json

            return self._keep(
                self.http.post(
                    self.host + path,
                    data=json.dumps(json_body),
                    timeout=60,
                    allow_redirects=False,
                    headers=self._headers(
                        {"Content-Type": "application/json", "Accept": "application/json"}
                    ),
                )
            )
        data = {**(data or {}), "csrfmiddlewaretoken": self.csrf}
        return self._keep(
            self.http.post(
                self.host + path,
                data=data,
                headers=self._headers(),
                timeout=60,
                allow_redirects=False,
            )
        )


def _setup(host: str) -> dict:
    from django.conf import settings
    from django.middleware.csrf import _get_new_csrf_string
    from django.test import Client

    from review.models import Role
    from tests import factories
    from tests.review import review_data

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    dataset = review_data.make_dataset("fault-redis-review")
    patient = review_data.make_record(dataset, "P-REDIS-1", n_events=40)
    instruction = review_data.make_instruction(dataset, patient, "I-REDIS-1")
    clinician = factories.make_user("redis-clin@example.edu", roles=[Role.CLINICIAN])
    researcher = factories.make_user("redis-res@example.edu", roles=[Role.RESEARCHER])
    review_data.assign(instruction, clinician)
    scoring = scoring_dataset("fault-redis", instructions=10, words=80)

    def browser(user) -> Browser:  # noqa: ANN001
        client = Client()
        client.force_login(user)
        factories.record_second_factor(client, user)  # signed in with TOTP
        return Browser(
            host, client.cookies[settings.SESSION_COOKIE_NAME].value, _get_new_csrf_string()
        )

    return {
        "clinician": browser(clinician),
        "researcher": browser(researcher),
        "instruction": instruction.pk,
        "scoring": scoring,
    }


def _drill(env: dict, procs: harness.Processes) -> int:
    import json as jsonlib

    from scoring.models import ScoringRun
    from tests.faults.checks import scores_exactly_once

    problems: list[str] = []
    start_redis(procs, env)
    port = harness.free_port()
    host = f"http://127.0.0.1:{port}"
    world = _setup(host)
    procs.start("gunicorn", harness.gunicorn_args(port, workers=2, threads=4), env)
    procs.start("celery", harness.celery_args(concurrency=1), env)
    if not harness.wait_until(lambda: harness.http_ok(host + "/healthz"), timeout=60):
        log("gunicorn did not start:\n" + procs.tail("gunicorn"))
        return 1
    procs.stop("redis")
    log(f"Redis on 127.0.0.1:{REDIS_PORT} stopped (the shared 6379 is untouched)")

    # --- reviewing keeps working -------------------------------------------------------------
    clin = world["clinician"]
    base = f"/instructions/{world['instruction']}"
    timings = {}

    def timed(name: str, call):  # noqa: ANN001, ANN202
        t0 = time.monotonic()
        response = call()
        timings[name] = (response.status_code, (time.monotonic() - t0) * 1000)
        if response.status_code != 200:
            problems.append(f"{name}: {response.status_code} while Redis is down")
        return response

    timed("queue", lambda: clin.get("/queue/"))
    page = timed("review page", lambda: clin.get(f"{base}/review/"))
    match = re.search(
        r'<script id="review-data" type="application/json">(.*?)</script>', page.text, re.S
    )
    data = jsonlib.loads(match.group(1)) if match else None
    timed("record events", lambda: clin.get(f"{base}/record/events/"))
    timed(
        "record search",
        lambda: clin.post(f"{base}/record/search/", json_body={"q": "creatinine"}),
    )
    if data:
        at = int(time.time() * 1000)
        body = {
            "tab": "redis-down",
            "active_seconds": 5,
            "edits": [
                e
                for i, r in enumerate(data["responses"])
                for e in (
                    {"handle": r["handle"], "field": "rank", "value": i + 1, "at": at},
                    {"handle": r["handle"], "field": "is_correct", "value": True, "at": at},
                )
            ],
        }
        timed("autosave", lambda: clin.post(data["urls"]["save"], json_body=body))
        timed("submit", lambda: clin.post(data["urls"]["submit"], json_body=body))
    else:
        problems.append("the review page did not render its data")
    for name, (status, ms) in timings.items():
        log(f"while Redis is down: {name}: {status} in {ms:.0f} ms")
    slow = [n for n, (_, ms) in timings.items() if ms > 2000]
    if slow:
        problems.append(f"reviewing waited on the broker: {slow}")

    # --- starting a scoring run fails clearly ----------------------------------------------------
    res = world["researcher"]
    dataset = world["scoring"]
    t0 = time.monotonic()
    answer = res.post(
        "/research/runs/", data={"dataset": dataset.pk, "metrics": METRICS.split(",")}
    )
    web_ms = (time.monotonic() - t0) * 1000
    location = answer.headers.get("Location", "")
    shown = res.get(location).text if location else answer.text
    web_run = ScoringRun.objects.filter(dataset=dataset).order_by("-pk").first()
    clear = "broker is unreachable" in shown
    log(
        f"web form: {answer.status_code} -> {location or '(same page)'} in {web_ms:.0f} ms; "
        f"clear message shown: {clear}; run kept: {web_run.pk if web_run else None}"
    )
    if not clear:
        problems.append("the web form showed no clear broker message")
    t0 = time.monotonic()
    cli = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "score",
            "--dataset",
            dataset.name,
            "--metrics",
            METRICS,
            "--no-progress",
            "--no-wait",
        ],
        cwd=harness.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    cli_ms = (time.monotonic() - t0) * 1000
    cli_message = (cli.stderr.strip().splitlines() or [""])[-1]
    log(f"manage.py score: exit {cli.returncode} in {cli_ms:.0f} ms: {cli_message!r}")
    if cli.returncode == 0 or "broker" not in cli.stderr.lower():
        problems.append("manage.py score did not fail with a clear broker message")
    if "Traceback" in cli.stderr:
        problems.append("manage.py score printed a traceback")
    cli_run = (
        ScoringRun.objects.filter(dataset=dataset)
        .exclude(pk=getattr(web_run, "pk", 0))
        .order_by("-pk")
        .first()
    )

    # --- Redis back: resume both ------------------------------------------------------------------
    start_redis(procs, env)
    log("Redis started again")
    if web_run is not None:
        resumed = res.post(f"/research/runs/{web_run.pk}/resume/")
        log(f"web Resume for run {web_run.pk}: {resumed.status_code}")
    if cli_run is not None:
        again = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "score",
                "--dataset",
                dataset.name,
                "--resume",
                str(cli_run.pk),
                "--no-progress",
            ],
            cwd=harness.ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        log(
            f"manage.py score --resume {cli_run.pk}: exit {again.returncode}: "
            f"{(again.stdout.strip().splitlines() or [''])[-1]!r}"
        )
    for run in filter(None, [web_run, cli_run]):
        done = harness.wait_until(
            lambda run=run: ScoringRun.objects.get(pk=run.pk).status == ScoringRun.Status.DONE,
            timeout=180,
        )
        run.refresh_from_db()
        ok, message = scores_exactly_once(run)
        log(f"run {run.pk}: {run.status}; {message}")
        if not (done and ok):
            problems.append(f"run {run.pk} did not finish with one score each after Redis returned")
    if web_run is None or cli_run is None:
        problems.append("a failed start did not keep its run for resuming")
    for problem in problems:
        log(f"PROBLEM: {problem}")
    log("PASS" if not problems else "FAIL")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
