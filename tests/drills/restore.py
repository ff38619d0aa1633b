"""Restore drill: a backup counts once it has been restored.

    .venv/bin/python -m tests.drills.restore        # make drill-restore (~2 min)

1. A study in a throwaway PostgreSQL database with its private files on local disk: the demo
   (``load_demo --small``: approved accounts with training certificates and TOTP, a dataset,
   simulated clinicians' reviews and judgements, rubrics, a first report), then a clinician
   signs in with password and TOTP, leaves one review as a draft and submits another (audit
   rows with them).
2. ``manage.py backup``, encrypted to an age key made for the drill.
3. ``manage.py restore`` into a new, empty database and a new, empty S3 bucket (moto's server on
   loopback: moving from one host's disk to shared storage), with the drill's secret key. A
   second restore into the now full target must be refused.
4. Every table compared row by row (values as PostgreSQL returns them, in primary-key order),
   every sequence, every file byte by byte: independently of the manifest's own check.
5. The restored installation served by gunicorn: the clinician signs in (the TOTP secret was
   encrypted with the same MFA_ENCRYPTION_KEY) and opens the restored draft and the submitted
   review; an admin opens a restored training certificate from the bucket.

Exits 1 if anything differs or fails. Prints each step's duration.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from tests import s3
from tests.drills.steps import Drill
from tests.load import harness
from tests.load.harness import log

PASSWORD = "medalign-demo-2024"  # the demo's public password (README)
CLINICIAN = "clinician1@demo.medalign.local"
ADMIN = "admin@demo.medalign.local"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    source_db = f"medalign_drill_restore_src_{os.getpid()}"
    target_db = f"medalign_drill_restore_dst_{os.getpid()}"
    work = Path(tempfile.mkdtemp(prefix="medalign-drill-restore-"))
    (work / "logs").mkdir()
    procs = harness.Processes(work / "logs")
    started = time.monotonic()
    try:
        code = _drill(Drill(work, procs), source_db, target_db)
    finally:
        procs.stop_all()
        from django.db import connections

        connections.close_all()
        harness.drop_database(source_db)
        harness.drop_database(target_db)
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    log(f"drill-restore: {time.monotonic() - started:.0f} s in all")
    return code


def _manage(env: dict, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=harness.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _drill(drill: Drill, source_db: str, target_db: str) -> int:
    work = drill.work
    source = harness.app_env(harness.fresh_database(source_db), "filesystem://", work / "source")
    # The demo's first report is computed inline (no worker in this drill).
    source["CELERY_TASK_ALWAYS_EAGER"] = "true"
    harness.manage(source, "migrate", "--noinput", "-v", "0")
    harness.manage(source, "collectstatic", "--noinput", "-v", "0")
    loaded = _manage({**source, "DEBUG": "true"}, "load_demo", "--small", "--no-progress")
    if not drill.check(loaded.returncode == 0, "load_demo --small"):
        log(loaded.stderr[-3000:])
        return 1
    harness.configure_django(source)
    drafted, submitted, window = _clinician_works(drill)
    drill.step("the study: demo, a draft and a submitted review")

    from pyrage import x25519

    identity = x25519.Identity.generate()
    key_file = work / "backup-key.txt"
    key_file.write_text(f"{identity}\n")
    key_file.chmod(0o600)
    (work / "backups").mkdir(mode=0o700)
    archive = work / "backups" / "study.tar.age"
    backup = _manage(source, "backup", str(archive), "--recipient", str(identity.to_public()))
    drill.check(backup.returncode == 0, f"backup: {(backup.stdout + backup.stderr).strip()}")
    if backup.returncode != 0:
        return 1
    drill.check(
        oct(archive.stat().st_mode & 0o777) == "0o600",
        f"the archive is mode {oct(archive.stat().st_mode & 0o777)}, {archive.stat().st_size:,} bytes",
    )
    drill.step("backup")

    s3_port = harness.free_port()
    drill.procs.start(
        "s3",
        [str(harness.BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(s3_port)],
        dict(os.environ),
    )
    endpoint = f"http://127.0.0.1:{s3_port}"
    harness.wait_until(lambda: s3.client(endpoint).list_buckets() is not None, timeout=30)
    bucket = s3.new_bucket(endpoint, "medalign-restored")
    target = {
        **source,
        "DATABASE_URL": harness.fresh_database(target_db),
        "DATA_DIR": str(work / "target"),
        "STORAGE_URL": s3.storage_url(endpoint, bucket, "private"),
        "CELERY_TASK_ALWAYS_EAGER": "false",
    }
    restore_args = [
        "restore",
        str(archive),
        "--identity",
        str(key_file),
        "--staging-dir",
        str(work),
    ]
    restored = _manage(target, *restore_args)
    drill.check(restored.returncode == 0, f"restore: {(restored.stdout + restored.stderr).strip()}")
    if restored.returncode != 0:
        return 1
    drill.step("restore into a new database and bucket")

    _compare_databases(drill, source_db, target_db)
    _compare_files(drill, Path(work / "source" / "private"), endpoint, bucket)
    again = _manage(target, *restore_args)
    drill.check(
        again.returncode != 0 and "not empty" in again.stderr,
        f"a second restore into the full target is refused: {again.stderr.strip()[-200:]}",
    )
    drill.step("every row and file compared")

    harness.manage(target, "collectstatic", "--noinput", "-v", "0")  # a new host's own step
    _serve_and_sign_in(drill, target, drafted, submitted, window)
    for problem in drill.problems:
        log(f"PROBLEM: {problem}")
    log("durations: " + ", ".join(f"{name} {secs:.1f} s" for name, secs in drill.timings))
    log("PASS" if not drill.problems else "FAIL")
    return 0 if not drill.problems else 1


def _review_data(html: str) -> dict:
    match = re.search(
        r'<script id="review-data" type="application/json">(.*?)</script>', html, re.S
    )
    return json.loads(match.group(1)) if match else {}


def _clinician_works(drill: Drill) -> tuple[int, int, int]:
    """clinician1 signs in (password, TOTP) in the source installation, leaves a draft on one
    instruction and submits another. Returns the two instructions' ids and the TOTP window
    the sign-in used."""
    from django.test import Client

    from review.demo.accounts import demo_totp_secret
    from review.models import Assignment, Review
    from tests import factories

    client = Client(HTTP_HOST="127.0.0.1")
    step = client.post("/accounts/login/", {"login": CLINICIAN, "password": PASSWORD})
    code = factories.totp_code_fresh(demo_totp_secret(CLINICIAN))
    window = int(time.time()) // 30
    done = client.post(step.headers.get("Location", "/accounts/2fa/authenticate/"), {"code": code})
    drill.check(done.status_code == 302, "clinician1 signs in to the source with TOTP")
    started = set(Review.objects.values_list("assignment_id", flat=True))
    fresh = [
        a.instruction_id
        for a in Assignment.objects.filter(clinician__email=CLINICIAN).order_by("pk")
        if a.pk not in started
    ][:2]
    if not drill.check(len(fresh) == 2, "clinician1 has two untouched assignments"):
        return 0, 0, window
    at = int(time.time() * 1000)
    for n, instruction in enumerate(fresh):
        data = _review_data(client.get(f"/instructions/{instruction}/review/").content.decode())
        handles = [r["handle"] for r in data["responses"]]
        edits = [
            e
            for i, h in enumerate(handles)
            for e in (
                {"handle": h, "field": "rank", "value": i + 1, "at": at},
                {"handle": h, "field": "is_correct", "value": i == 0, "at": at},
                {"handle": h, "field": "comment", "value": f"drill comment {i}", "at": at},
            )
        ]
        url = data["urls"]["save" if n == 0 else "submit"]
        answer = client.post(
            url,
            json.dumps({"tab": "drill", "active_seconds": 7, "edits": edits}),
            content_type="application/json",
            HTTP_ACCEPT="application/json",
        )
        drill.check(
            answer.status_code == 200, f"{'autosave' if n == 0 else 'submit'}: {answer.status_code}"
        )
    return fresh[0], fresh[1], window


def _rows(conn, table: str) -> list[tuple]:  # noqa: ANN001 - a psycopg connection
    from psycopg import sql

    keys = [
        r[0]
        for r in conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
            (f'"{table}"',),
        )
    ]
    rows = conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(table))).fetchall()
    # Sorted here, by the primary key (or the whole row), not by the server.
    names = [
        d.name
        for d in conn.execute(
            sql.SQL("SELECT * FROM {} LIMIT 0").format(sql.Identifier(table))
        ).description
    ]
    index = [names.index(k) for k in keys]
    return sorted(rows, key=lambda row: [row[i] for i in index] if index else repr(row))


def _compare_databases(drill: Drill, source_db: str, target_db: str) -> None:
    import psycopg

    def connect(name: str):  # noqa: ANN202
        return psycopg.connect(
            host=harness.PG["host"], port=harness.PG["port"], user=harness.PG["user"], dbname=name
        )

    with connect(source_db) as src, connect(target_db) as dst:
        listing = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
        tables = [r[0] for r in src.execute(listing)]
        drill.check(
            tables == [r[0] for r in dst.execute(listing)], f"the same {len(tables)} tables"
        )
        rows = differing = 0
        for table in tables:
            a, b = _rows(src, table), _rows(dst, table)
            rows += len(a)
            if a != b:
                differing += 1
                log(
                    f"PROBLEM: {table}: {len(a)} rows in the source, {len(b)} restored, or values differ"
                )
        drill.check(
            differing == 0, f"every row of every table equal: {rows:,} rows in {len(tables)} tables"
        )
        seqs = "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public' ORDER BY 1"
        drill.check(
            src.execute(seqs).fetchall() == dst.execute(seqs).fetchall(),
            "every sequence where it was (the restored app's next ids do not collide)",
        )
        counts = {
            name: src.execute(f"SELECT count(*) FROM {name}").fetchone()[0]  # noqa: S608
            for name in (
                "review_accessapplication",
                "review_review",
                "review_responsejudgement",
                "review_auditevent",
                "scoring_correlationreport",
            )
        }
        log("the study held: " + ", ".join(f"{n} {c:,}" for n, c in counts.items()))
        drill.check(
            all(counts.values()), "applications, reviews, judgements, audit rows and a report"
        )


def _compare_files(drill: Drill, source: Path, endpoint: str, bucket: str) -> None:
    client = s3.client(endpoint)
    local = {str(p.relative_to(source)): p.read_bytes() for p in source.rglob("*") if p.is_file()}
    listed = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    restored = {
        item["Key"].removeprefix("private/"): client.get_object(Bucket=bucket, Key=item["Key"])[
            "Body"
        ].read()
        for item in listed
    }
    drill.check(
        bool(local) and local == restored,
        f"every private file equal, byte for byte: {len(local)} in the source, {len(restored)} in the bucket",
    )


class Browser:
    """Signs in over plain HTTP on loopback: cookies (marked Secure) kept and sent by hand."""

    def __init__(self, base: str) -> None:
        self.base, self.cookies = base, {}
        self.http = requests.Session()
        self.http.trust_env = False

    def _send(self, method: str, path: str, **kw) -> requests.Response:  # noqa: ANN003
        headers = {
            "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
            "Referer": self.base + "/",
            "X-CSRFToken": self.cookies.get("csrftoken", ""),
        }
        answer = self.http.request(
            method, self.base + path, headers=headers, allow_redirects=False, timeout=30, **kw
        )
        self.cookies.update({c.name: c.value for c in answer.cookies})
        return answer

    def sign_in(self, email: str, secret: str) -> bool:
        from tests import factories

        self._send("GET", "/accounts/login/")
        token = self.cookies.get("csrftoken", "")
        step = self._send(
            "POST",
            "/accounts/login/",
            data={"login": email, "password": PASSWORD, "csrfmiddlewaretoken": token},
        )
        token = self.cookies.get("csrftoken", "")
        code = factories.totp_code_fresh(secret)
        done = self._send(
            "POST",
            step.headers.get("Location", ""),
            data={"code": code, "csrfmiddlewaretoken": token},
        )
        return done.status_code == 302 and "/accounts/" not in done.headers.get("Location", "")


def _serve_and_sign_in(
    drill: Drill, target: dict, drafted: int, submitted: int, window: int
) -> None:
    from review.demo.accounts import demo_totp_secret

    # The restored cache remembers the code clinician1 used in the source (replay protection
    # survives a restore): sign in with the next window's code at the earliest.
    while int(time.time()) // 30 <= window:
        time.sleep(0.5)

    port = harness.free_port()
    base = f"http://127.0.0.1:{port}"
    drill.procs.start("gunicorn", harness.gunicorn_args(port, workers=1, threads=4), target)
    if not harness.wait_until(lambda: harness.http_ok(base + "/healthz"), timeout=60):
        drill.check(
            False, "gunicorn serves the restored installation:\n" + drill.procs.tail("gunicorn")
        )
        return
    clinician = Browser(base)
    drill.check(
        clinician.sign_in(CLINICIAN, demo_totp_secret(CLINICIAN)),
        "clinician1 signs in to the restored installation with TOTP",
    )
    for instruction, status in ((drafted, "draft"), (submitted, "submitted")):
        page = clinician._send("GET", f"/instructions/{instruction}/review/")
        data = _review_data(page.text)
        ranks = [
            (r["rank"], r["is_correct"], r["comment"])
            for r in sorted(data.get("responses", []), key=lambda r: r["rank"] or 0)
        ]
        drill.check(
            page.status_code == 200
            and data.get("status") == status
            and ranks == [(i + 1, i == 0, f"drill comment {i}") for i in range(len(ranks))]
            and len(ranks) > 1,
            f"the restored {status} review opens with every judgement as left ({page.status_code})",
        )
    admin = Browser(base)
    drill.check(
        admin.sign_in(ADMIN, demo_totp_secret(ADMIN)),
        "the admin signs in to the restored installation",
    )
    from review.models import AccessApplication

    application = AccessApplication.objects.filter(user__email=CLINICIAN).order_by("-pk").first()
    answer = admin._send("GET", f"/manage/applications/{application.pk}/certificate/")
    drill.check(
        answer.status_code == 200 and answer.content.startswith(b"%PDF"),
        f"a restored certificate is streamed from the bucket ({answer.status_code}, {len(answer.content)} bytes)",
    )
    drill.step("served: sign-in, the restored reviews and a certificate")


if __name__ == "__main__":
    sys.exit(main())
