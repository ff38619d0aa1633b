"""Rate limits and TOTP replay protection hold across web processes (issue 10, finding 3).

The app runs under gunicorn with three worker processes on 127.0.0.1, against the test
database, for the length of this module's tests. Before the shared cache each process kept its
own counts and used codes: the same TOTP code was accepted twice in one window, and 15 of 20 wrong
passwords were checked against a limit of 5.
"""

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from django.db import connection

from review.models import AuditEvent, Role
from tests import factories

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 3

pytestmark = pytest.mark.django_db(transaction=True)


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True)
def _hashers_the_server_knows(settings):
    # The fast test hasher (conftest) is not in the server's settings: hash as it would.
    from django.conf import global_settings

    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS


@pytest.fixture
def gunicorn(transactional_db):
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "DJANGO_SETTINGS_MODULE": "medalign_site.settings",
    }
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")),
            "medalign_site.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(WORKERS),
            "--timeout",
            "60",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(base + "/healthz", timeout=30).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("gunicorn did not start: " + proc.stderr.read().decode()[-2000:])
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _password_step(base: str, email: str, password: str) -> tuple[requests.Session, int, str]:
    # A new session, and a new connection, per attempt: gunicorn spreads them over its workers.
    session = requests.Session()
    page = session.get(base + "/accounts/login/", timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = session.post(
        base + "/accounts/login/",
        data={"csrfmiddlewaretoken": token, "login": email, "password": password},
        headers={"Connection": "close"},
        allow_redirects=False,
        timeout=30,
    )
    return session, response.status_code, response.headers.get("Location", "")


def test_failed_sign_ins_are_limited_across_worker_processes(gunicorn):
    user = factories.make_user("limited@example.edu", roles=[Role.CLINICIAN])
    for _ in range(20):
        _password_step(gunicorn, user.email, "wrong-password")
    # Only attempts under the limit reach the password check (each check is audited).
    checked = AuditEvent.objects.filter(
        action=AuditEvent.Action.LOGIN_FAILED, actor_email=user.email
    ).count()
    assert checked == 5


def test_a_totp_code_is_accepted_once_across_worker_processes(gunicorn):
    user = factories.make_user("replay@example.edu", roles=[Role.CLINICIAN])
    code = factories.totp_code_fresh(margin=20)
    accepted = 0
    for _ in range(2 * WORKERS):
        session, status, location = _password_step(gunicorn, user.email, factories.PASSWORD)
        assert status == 302 and "/2fa/authenticate/" in location, (status, location)
        page = session.get(gunicorn + location, timeout=30)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        response = session.post(
            gunicorn + location,
            data={"csrfmiddlewaretoken": token, "code": code},
            headers={"Connection": "close"},
            allow_redirects=False,
            timeout=30,
        )
        accepted += response.status_code == 302 and "/2fa/" not in response.headers["Location"]
    assert accepted == 1
