"""Rate limits and TOTP replay protection hold across web processes, and nothing planted in the
shared cache runs in them.

The app runs under gunicorn with three worker processes on 127.0.0.1, against the test
database. Before the shared cache each process kept its own counts and used codes: the same TOTP
code was accepted twice in one window, and 15 of 20 wrong passwords were checked against a limit
of 5. Before the signed JSON cache, a pickle written to a session's or a user's cache key ran
in the worker that read it.
"""

import contextlib
import os
import pickle
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


@contextlib.contextmanager
def _gunicorn(**extra_env: str):  # noqa: ANN202 - a context manager
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "DJANGO_SETTINGS_MODULE": "medalign_site.settings",
        **extra_env,
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


@pytest.fixture
def gunicorn(transactional_db):
    with _gunicorn() as base:
        yield base


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


# --- a value planted in the shared cache is refused, not executed -------------------------------
def _redis_url() -> str | None:
    broker = os.environ.get("CELERY_BROKER_URL", "")
    url = broker if broker.startswith("redis://") else "redis://127.0.0.1:6379/11"
    try:
        import redis

        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except Exception:
        return None
    return url


class _Planted:
    """Loaded by pickle, it creates ``path``: what a shell command would do, harmlessly."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):  # noqa: ANN204 - pickle's protocol
        return (open, (self.path, "w"))


def _sign_in(base: str, user) -> requests.Session:  # noqa: ANN001
    session, status, location = _password_step(base, user.email, factories.PASSWORD)
    assert status == 302 and "/2fa/authenticate/" in location, (status, location)
    page = session.get(base + location, timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = session.post(
        base + location,
        data={"csrfmiddlewaretoken": token, "code": factories.totp_code_fresh(margin=10)},
        allow_redirects=False,
        timeout=30,
    )
    assert response.status_code == 302 and "/2fa/" not in response.headers["Location"]
    return session


def _planted_keys(session: requests.Session, user) -> list[str]:  # noqa: ANN001
    from django.core.cache import cache

    session_key = session.cookies["sessionid"]
    return [
        cache.make_key("django.contrib.sessions.cached_db" + session_key),
        cache.make_key(f"review:access:user:{user.pk}"),
        cache.make_key(f"review:access:generation:{user.pk}"),
    ]


@pytest.mark.parametrize("backend", ["database", "redis"])
def test_a_pickle_planted_in_the_shared_cache_is_refused_not_executed(
    backend, transactional_db, tmp_path
):
    extra: dict[str, str] = {}
    if backend == "redis":
        url = _redis_url()
        if url is None:
            pytest.skip("no Redis on 127.0.0.1:6379")
        extra["CACHE_URL"] = url
    elif _redis_url() and os.environ.get("CELERY_BROKER_URL", "").startswith("redis"):
        pytest.skip("the broker's Redis is the cache in this run: the redis case covers it")
    user = factories.make_user("planted@example.edu", roles=[Role.CLINICIAN])
    marker = tmp_path / "planted-pickle-ran"
    payload = pickle.dumps(_Planted(str(marker)))
    with _gunicorn(**extra) as base:
        session = _sign_in(base, user)
        assert session.get(base + "/queue/", timeout=30).status_code == 200  # entries cached
        keys = _planted_keys(session, user)
        if backend == "redis":
            import redis

            client = redis.Redis.from_url(extra["CACHE_URL"])
            for key in keys:
                client.set(key, payload, ex=300)
        else:
            import base64

            from django.db import connection

            planted = base64.b64encode(payload).decode()
            with connection.cursor() as cursor:
                # The rows the server wrote (its keys carry its own prefix).
                for key in keys:
                    suffix = key.split(":", 2)[2]
                    cursor.execute(
                        "UPDATE medalign_cache SET value = %s, expires = %s "
                        "WHERE cache_key LIKE %s",
                        [planted, "2099-01-01 00:00:00", "%:" + suffix],
                    )
                    assert cursor.rowcount >= 1, suffix
        # Every worker reads the planted values (one connection per request spreads them).
        for _ in range(2 * WORKERS):
            response = session.get(base + "/queue/", headers={"Connection": "close"}, timeout=30)
            # Refused: the session comes from the database, access is evaluated afresh.
            assert response.status_code == 200, response.status_code
        if backend == "redis":
            client.delete(*keys)
    assert not marker.exists(), "a pickle planted in the cache ran in a web process"
    assert AuditEvent.objects.filter(actor=user, action=AuditEvent.Action.LOGIN).count() == 1
