"""Deployment drill: the recipe in deploy/ brought up on loopback and used by a clinician.

    .venv/bin/python -m tests.drills.deploy        # make drill-deploy (as root; ~2 min)

Started directly (no systemd), each from the file its unit uses: Debian's nginx with
deploy/nginx/medalign.conf (site values replaced: loopback ports, a self-signed certificate)
and medalign-proxy.conf unchanged; two web processes from deploy/systemd/medalign-web@.service
and deploy/gunicorn.conf.py; Celery workers for the cpu and gpu queues from
medalign-worker@.service; every process with the settings of deploy/medalign.env.example, its
site values replaced (a throwaway PostgreSQL database, a Redis and an S3 endpoint of the drill's
own on free ports). Then, over HTTPS through nginx, from the client address 127.0.0.5:

- /health/ says every component is ok; plain HTTP is sent to HTTPS; answers carry HSTS;
- a clinician signs in with password and TOTP, opens a review, autosaves, submits; the web
  process that took the submit is stopped and the page is reloaded from the other one;
- the audit trail holds the client's address (not the proxy's, not a forged X-Forwarded-For);
- an admin opens a training certificate kept in the S3 bucket;
- bodies over the app's limits are refused by nginx, never reaching a web process;
- a scoring run is done by the worker; ``check --deploy`` passes on the same settings.

Exits 1 if any of that does not hold. Prints each step's duration.
"""

import argparse
import base64
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
from requests.adapters import HTTPAdapter

from tests import s3
from tests.drills import recipe
from tests.drills.steps import Drill
from tests.load import harness
from tests.load.harness import log

CLIENT_ADDRESS = "127.0.0.5"  # loopback, but not the proxy's 127.0.0.1
FORGED = "203.0.113.66"


class _FromAddress(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        kwargs["source_address"] = (CLIENT_ADDRESS, 0)
        return super().init_poolmanager(*args, **kwargs)


class Browser:
    """A person's browser over HTTPS, from CLIENT_ADDRESS, sending a forged X-Forwarded-For."""

    def __init__(self, base: str, certificate: Path) -> None:
        self.base = base
        self.http = requests.Session()
        self.http.trust_env = False  # loopback only, never a proxy
        self.http.verify = str(certificate)
        self.http.mount("https://", _FromAddress())
        self.http.headers["X-Forwarded-For"] = FORGED

    def _headers(self, extra: dict | None = None) -> dict:
        return {
            "Referer": self.base + "/",
            "Origin": self.base,
            "X-CSRFToken": self.http.cookies.get("csrftoken", ""),
            **(extra or {}),
        }

    def get(self, path: str) -> requests.Response:
        return self.http.get(self.base + path, allow_redirects=False, timeout=30)

    def post_form(self, path: str, data: dict) -> requests.Response:
        data = {**data, "csrfmiddlewaretoken": self.http.cookies.get("csrftoken", "")}
        return self.http.post(
            self.base + path, data=data, headers=self._headers(), allow_redirects=False, timeout=30
        )

    def post_json(self, path: str, body: object, *, raw: bytes | None = None) -> requests.Response:
        return self.http.post(
            self.base + path,
            data=raw if raw is not None else json.dumps(body),
            headers=self._headers(
                {"Content-Type": "application/json", "Accept": "application/json"}
            ),
            allow_redirects=False,
            timeout=60,
        )

    def sign_in(self, email: str, password: str, totp_secret: str) -> bool:
        from tests import factories

        self.get("/accounts/login/")
        step = self.post_form("/accounts/login/", {"login": email, "password": password})
        if step.status_code != 302 or "2fa" not in step.headers.get("Location", ""):
            log(
                f"sign-in: password step answered {step.status_code} {step.headers.get('Location')}"
            )
            return False
        code = factories.totp_code_fresh(totp_secret)
        done = self.post_form(step.headers["Location"], {"code": code})
        if done.status_code != 302 or "/accounts/" in done.headers.get("Location", ""):
            log(f"sign-in: TOTP step answered {done.status_code} {done.headers.get('Location')}")
            return False
        return True


def _self_signed(work: Path) -> tuple[Path, Path]:
    cert, key = work / "tls" / "cert.pem", work / "tls" / "key.pem"
    cert.parent.mkdir(mode=0o700)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def _environment(
    *, database_url: str, redis_url: str, storage_url: str, https_port: int, data_dir: Path
) -> tuple[dict[str, str], dict[str, str]]:
    """deploy/medalign.env.example with its site values replaced: (the file's values, the
    process environment). Every other value is the recipe's own."""
    template = recipe.env_file()
    site = {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "MFA_ENCRYPTION_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "ALLOWED_HOSTS": "127.0.0.1",
        "CSRF_TRUSTED_ORIGINS": f"https://127.0.0.1:{https_port}",
        "SITE_URL": f"https://127.0.0.1:{https_port}",
        "DATABASE_URL": database_url,
        # A Redis of the drill's own on loopback (plain redis:// is accepted there).
        "CELERY_BROKER_URL": redis_url + "/0",
        "CACHE_URL": redis_url + "/1",
        "DATA_DIR": str(data_dir),
        "STORAGE_URL": storage_url,
        "AWS_ACCESS_KEY_ID": s3.ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": s3.SECRET_KEY,
        "EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend",
        "BACKUP_RECIPIENTS": "",
        "GUNICORN_WORKERS": "2",
        "CELERY_CONCURRENCY": "1",
    }
    unknown = set(site) - set(template)
    if unknown:
        raise ValueError(f"the recipe's environment file no longer names {sorted(unknown)}")
    values = {**template, **site}
    kept = sorted(set(template) - set(site))
    log(f"environment: the recipe's own {', '.join(kept)}")
    process = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_", "CELERY_", "CACHE_", "DEBUG", "STORAGE_", "AWS_"))
    }
    process.update(values)
    process.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "DJANGO_SETTINGS_MODULE": "medalign_site.settings",
            "LOG_LEVEL": "WARNING",
        }
    )
    return values, process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    args = parser.parse_args(argv)
    nginx = recipe.nginx_binary()
    if nginx is None:
        log("nginx is missing: make nginx (Debian's nginx) first")
        return 1
    if os.geteuid() != 0:
        log("run as root: nginx starts its workers as www-data")
        return 1
    database = f"medalign_drill_deploy_{os.getpid()}"
    work = Path(tempfile.mkdtemp(prefix="medalign-drill-deploy-"))
    work.chmod(0o711)  # nginx's workers (www-data) reach the static files below
    (work / "logs").mkdir()
    procs = harness.Processes(work / "logs")
    started = time.monotonic()
    try:
        drill = Drill(work, procs)
        code = _drill(drill, nginx, database)
    finally:
        procs.stop_all()
        from django.db import connections

        connections.close_all()
        harness.drop_database(database)
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    log(f"drill-deploy: {time.monotonic() - started:.0f} s in all")
    return code


def _start_services(drill: Drill) -> tuple[str, str]:
    redis_port, s3_port = harness.free_port(), harness.free_port()
    drill.procs.start(
        "redis",
        ["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port), "--save", "",
         "--appendonly", "no"],
        dict(os.environ),
    )  # fmt: skip
    drill.procs.start(
        "s3",
        [str(harness.BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(s3_port)],
        dict(os.environ),
    )
    endpoint = f"http://127.0.0.1:{s3_port}"
    up = harness.wait_until(lambda: s3.client(endpoint).list_buckets() is not None, timeout=30)
    if not up:
        raise RuntimeError("moto_server did not start:\n" + drill.procs.tail("s3"))
    bucket = s3.new_bucket(endpoint, "medalign-drill")  # the operator makes the bucket
    return f"redis://127.0.0.1:{redis_port}", s3.storage_url(endpoint, bucket, "private")


def _drill(drill: Drill, nginx: str, database: str) -> int:
    work = drill.work
    https_port, http_port = harness.free_port(), harness.free_port()
    web_ports = [harness.free_port(), harness.free_port()]
    redis_url, storage_url = _start_services(drill)
    values, env = _environment(
        database_url=harness.fresh_database(database),
        redis_url=redis_url,
        storage_url=storage_url,
        https_port=https_port,
        data_dir=work / "var",
    )
    drill.step("services (Redis, S3 endpoint, database)")

    check = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=harness.ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    drill.check(check.returncode == 0, "manage.py check --deploy passes on the recipe's settings")
    harness.manage(env, "migrate", "--noinput", "-v", "0")
    harness.manage(env, "collectstatic", "--noinput", "-v", "0")
    for folder in [work / "var", work / "var" / "staticfiles"]:
        folder.chmod(0o711)
    subprocess.run(["chmod", "-R", "a+rX", str(work / "var" / "staticfiles")], check=True)
    drill.step("migrate and collectstatic")

    harness.configure_django(env)
    world = _study()
    drill.step("accounts, a review and a dataset to score")

    for i, port in enumerate(web_ports):
        argv, unit_env, cwd = recipe.unit_command("medalign-web@.service", str(port), values)
        drill.procs.start(f"web{i + 1}", argv, {**env, **unit_env})
    for queue in ("cpu", "gpu"):
        argv, unit_env, cwd = recipe.unit_command("medalign-worker@.service", queue, values)
        drill.procs.start(f"worker-{queue}", argv, {**env, **unit_env})
    cert, key = _self_signed(work)
    site = work / "medalign.conf"
    site.write_text(
        recipe.nginx_site(
            https_port=https_port,
            http_port=http_port,
            backends=web_ports,
            certificate=cert,
            key=key,
            static_root=work / "var" / "staticfiles",
            logs=work / "logs",
        )
    )
    main_conf = work / "nginx.conf"
    main_conf.write_text(recipe.nginx_main(site=site, work=work))
    test = subprocess.run([nginx, "-t", "-q", "-c", str(main_conf)], capture_output=True, text=True)
    if not drill.check(test.returncode == 0, f"nginx -t: {test.stderr.strip() or 'ok'}"):
        return 1
    drill.procs.start("nginx", [nginx, "-c", str(main_conf)], dict(os.environ))
    for i, port in enumerate(web_ports):
        if not harness.wait_until(lambda port=port: _web_up(port), timeout=90):
            log(f"web{i + 1} did not start:\n" + drill.procs.tail(f"web{i + 1}"))
            return 1
    base = f"https://127.0.0.1:{https_port}"
    drill.step("nginx, two web processes and two workers started")

    _front_door(drill, base, cert, http_port)
    _clinician(drill, base, cert, world, web_ports)
    _admin(drill, base, cert, world)
    _oversized(drill, base, cert, world)
    _worker(drill, env, world)
    for problem in drill.problems:
        log(f"PROBLEM: {problem}")
    log("durations: " + ", ".join(f"{name} {secs:.1f} s" for name, secs in drill.timings))
    log("PASS" if not drill.problems else "FAIL")
    return 0 if not drill.problems else 1


def _web_up(port: int) -> bool:
    # Straight to the web process: /health/ answers plain HTTP (everything else redirects).
    response = requests.get(
        f"http://127.0.0.1:{port}/health/",
        headers={"Host": "127.0.0.1"},
        timeout=5,
        allow_redirects=False,
    )
    return response.status_code == 200


def _study() -> dict:
    from review.models import Role
    from tests import factories
    from tests.faults.common import scoring_dataset
    from tests.review import review_data

    dataset = review_data.make_dataset("drill-deploy")
    patient = review_data.make_record(dataset, "P-DEPLOY-1", n_events=40)
    instruction = review_data.make_instruction(dataset, patient, "I-DEPLOY-1")
    clinician = factories.make_user("deploy-clinician@example.edu", roles=[Role.CLINICIAN])
    admin = factories.make_user("deploy-admin@example.edu", roles=[Role.ADMIN])
    review_data.assign(instruction, clinician)
    application = clinician.applications.get()
    return {
        "clinician": clinician,
        "admin": admin,
        "instruction": instruction.pk,
        "application": application.pk,
        "scoring": scoring_dataset("drill-deploy-scoring", instructions=4, words=40),
    }


def _front_door(drill: Drill, base: str, cert: Path, http_port: int) -> None:
    browser = Browser(base, cert)
    health = browser.get("/health/")
    body = (
        health.json()
        if health.headers.get("Content-Type", "").startswith("application/json")
        else {}
    )
    drill.check(
        health.status_code == 200 and body.get("status") == "ok",
        f"/health/ through nginx: {health.status_code} {body.get('checks')}",
    )
    hsts = health.headers.get("Strict-Transport-Security", "")
    drill.check(hsts.startswith("max-age=31536000"), f"HSTS on every answer: {hsts!r}")
    plain = requests.get(f"http://127.0.0.1:{http_port}/queue/", allow_redirects=False, timeout=10)
    drill.check(
        plain.status_code == 301 and plain.headers.get("Location", "").startswith("https://"),
        f"plain HTTP is sent to HTTPS: {plain.status_code} {plain.headers.get('Location')}",
    )
    static = re.search(r'href="(/static/[^"]+\.css)"', browser.get("/accounts/login/").text)
    if drill.check(static is not None, "the sign-in page links its stylesheet"):
        answer = browser.get(static.group(1))
        drill.check(
            answer.status_code == 200 and "max-age" in answer.headers.get("Cache-Control", ""),
            f"static files served by nginx: {answer.status_code} {answer.headers.get('Cache-Control')}",
        )
    drill.step("front door: health, HTTPS, HSTS, static files")


def _upstreams(drill: Drill, path_part: str) -> list[str]:
    """The web processes (upstreams) nginx tried for each request for ``path_part``, in order:
    "-" for a request nginx answered itself."""
    lines = (drill.work / "logs" / "medalign.access.log").read_text().splitlines()
    return [re.search(r"upstream=(.*?) \"", line).group(1) for line in lines if path_part in line]


def _answered_by(drill: Drill, path_part: str, before: int) -> str:
    """The web process that answered the request after the ``before`` earlier ones for that
    path (nginx writes its log line once it has finished with the request)."""
    harness.wait_until(lambda: len(_upstreams(drill, path_part)) > before, timeout=10, interval=0.1)
    tried = _upstreams(drill, path_part)
    return tried[before].split(", ")[-1] if len(tried) > before else "(no log line)"


def _clinician(drill: Drill, base: str, cert: Path, world: dict, web_ports: list[int]) -> None:
    from django.utils import timezone

    from review.models import AuditEvent, Review
    from tests import factories

    since = timezone.now()
    browser = Browser(base, cert)
    clinician = world["clinician"]
    signed_in = browser.sign_in(clinician.email, factories.PASSWORD, factories.TOTP_SECRET)
    drill.check(signed_in, "the clinician signs in with password and TOTP over HTTPS")
    queue = browser.get("/queue/")
    drill.check(queue.status_code == 200, f"the queue opens: {queue.status_code}")
    page_path = f"/instructions/{world['instruction']}/review/"
    page = browser.get(page_path)
    match = re.search(
        r'<script id="review-data" type="application/json">(.*?)</script>', page.text, re.S
    )
    if not drill.check(page.status_code == 200 and match is not None, "the review page opens"):
        return
    data = json.loads(match.group(1))
    at = int(time.time() * 1000)
    handles = [r["handle"] for r in data["responses"]]
    first = [{"handle": handles[0], "field": "rank", "value": 1, "at": at}]
    saved = browser.post_json(
        data["urls"]["save"], {"tab": "drill", "active_seconds": 3, "edits": first}
    )
    drill.check(saved.status_code == 200, f"autosave: {saved.status_code}")
    edits = [
        e
        for i, h in enumerate(handles)
        for e in (
            {"handle": h, "field": "rank", "value": i + 1, "at": at + 1},
            {"handle": h, "field": "is_correct", "value": i % 2 == 0, "at": at + 1},
        )
    ]
    submitted = browser.post_json(
        data["urls"]["submit"], {"tab": "drill", "active_seconds": 9, "edits": edits}
    )
    drill.check(submitted.status_code == 200, f"submit: {submitted.status_code}")
    took = _answered_by(drill, data["urls"]["submit"], 0)
    drill.step("sign-in, autosave and submit")

    # The web process that took the submit stops, as `systemctl stop` stops it; the other serves.
    stopped = next(i for i, p in enumerate(web_ports) if took.endswith(f":{p}"))
    drill.procs.stop(f"web{stopped + 1}")
    pages_before = len(_upstreams(drill, page_path))
    reload = browser.get(page_path)
    again = re.search(
        r'<script id="review-data" type="application/json">(.*?)</script>', reload.text, re.S
    )
    shown = json.loads(again.group(1)) if again else {}
    served = _answered_by(drill, page_path, pages_before)
    drill.check(
        reload.status_code == 200 and served != took,
        f"reloaded from the other web process: submit on {took}, reload on {served}",
    )
    ranks = {r["handle"]: (r["rank"], r["is_correct"]) for r in shown.get("responses", [])}
    drill.check(
        shown.get("status") == "submitted"
        and ranks == {h: (i + 1, i % 2 == 0) for i, h in enumerate(handles)},
        f"the reloaded page shows the submitted review as sent ({shown.get('status')})",
    )
    review = Review.objects.get(pk=data["review"])
    drill.check(review.status == Review.Status.SUBMITTED, "the database holds it submitted")
    addresses = set(
        AuditEvent.objects.filter(actor=clinician, created_at__gte=since).values_list(
            "ip_address", flat=True
        )
    )
    drill.check(
        addresses == {CLIENT_ADDRESS},
        f"the audit trail holds the client's address {CLIENT_ADDRESS}, not the proxy's or a "
        f"forged one: {sorted(map(str, addresses))}",
    )
    drill.step("reload on the other web process, audit trail")


def _admin(drill: Drill, base: str, cert: Path, world: dict) -> None:
    from tests import factories

    browser = Browser(base, cert)
    admin = world["admin"]
    drill.check(
        browser.sign_in(admin.email, factories.PASSWORD, factories.TOTP_SECRET),
        "an admin signs in with password and TOTP",
    )
    answer = browser.get(f"/manage/applications/{world['application']}/certificate/")
    drill.check(
        answer.status_code == 200 and answer.content == factories.PDF_BYTES,
        f"the certificate is streamed from the S3 bucket: {answer.status_code}, "
        f"{len(answer.content)} bytes",
    )
    drill.step("admin opens a certificate from the bucket")


def _oversized(drill: Drill, base: str, cert: Path, world: dict) -> None:
    browser = Browser(base, cert)
    drill.check(browser.get("/accounts/login/").status_code == 200, "a fresh visitor")
    cases = [
        ("/accounts/login/", 2_621_440 + 1, "a form body over 2.5 MiB"),
        ("/access/apply/", 7_864_320 + 1, "a certificate upload over 7.5 MiB"),
    ]
    for path, size, what in cases:
        before = len(_upstreams(drill, path))
        answer = browser.post_json(path, None, raw=b"x" * size)
        upstream = _answered_by(drill, path, before)
        drill.check(
            answer.status_code == 413 and upstream == "-",
            f"{what} is refused by nginx before any web process: {answer.status_code}, "
            f"upstream {upstream}",
        )
    drill.step("oversized bodies")


def _worker(drill: Drill, env: dict, world: dict) -> None:
    from scoring.models import ScoringRun
    from tests.faults.checks import scores_exactly_once

    dataset = world["scoring"]
    result = subprocess.run(
        [sys.executable, "manage.py", "score", "--dataset", dataset.name, "--metrics", "rougeL",
         "--no-progress", "--no-wait"],
        cwd=harness.ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    drill.check(result.returncode == 0, f"a scoring run is queued: {result.stderr.strip()[-300:]}")
    run = ScoringRun.objects.filter(dataset=dataset).order_by("-pk").first()
    done = run is not None and harness.wait_until(
        lambda: ScoringRun.objects.get(pk=run.pk).status == ScoringRun.Status.DONE, timeout=120
    )
    ok, message = scores_exactly_once(run) if run else (False, "no run")
    drill.check(done and ok, f"the cpu worker finished the run: {message}")
    drill.step("a scoring run on the worker")


if __name__ == "__main__":
    sys.exit(main())
