"""The settings file parses its environment strictly, works with only DEBUG=true set, and
refuses to start in production mode without its secrets (DEBUG is opt-in)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_settings(tmp_path: Path, _code: str = "", **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {
            "DATABASE_URL",
            "CELERY_BROKER_URL",
            "CACHE_URL",
            "DEBUG",
            "SECRET_KEY",
            "MFA_ENCRYPTION_KEY",
            "ALLOWED_HOSTS",
        }
    }
    clean.update({"DATA_DIR": str(tmp_path), **env})
    code = (
        "import medalign_site.settings as s;"
        "print(s.DEBUG, s.DATABASES['default']['ENGINE'], s.CELERY_BROKER_URL,"
        " s.SESSION_IDLE_TIMEOUT_MINUTES, s.CACHES['default']['BACKEND'])"
    )
    if _code:
        clean["DJANGO_SETTINGS_MODULE"] = "medalign_site.settings"
    return subprocess.run(
        [sys.executable, "-c", _code or code],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        check=False,
    )


GOOD_KEY = "k" * 20 + "abcdefghijklmnopqrstuvwxyz0123456789"
FERNET_KEY = "r5y0Hn6E5lqHx2a7wQ7mV9mXg0m7iYt3h8N6sXk2c1A="


def test_with_only_debug_set_it_runs_on_sqlite_the_filesystem_broker_and_the_db_cache(
    tmp_path,
) -> None:
    result = load_settings(tmp_path, DEBUG="true")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "True",
        "django.db.backends.sqlite3",
        "filesystem://",
        "30",
        "medalign_site.cache.SignedDatabaseCache",
    ]
    assert (tmp_path / "celery-broker" / "queue").is_dir()


_KEYS = (
    "import json, medalign_site.settings as s; "
    "print(json.dumps([s.SECRET_KEY, s.MFA_ENCRYPTION_KEYS]))"
)


def _debug_keys(tmp_path: Path, data_dir: Path) -> tuple[str, list[str]]:
    import json

    result = load_settings(tmp_path, _KEYS, DEBUG="true", DATA_DIR=str(data_dir))
    assert result.returncode == 0, result.stderr[-2000:]
    secret, fernet = json.loads(result.stdout)
    return secret, fernet


def test_debug_makes_its_own_random_keys_once_into_data_dir(tmp_path) -> None:
    # DEBUG signed with a key printed in settings.py: an institutional email was verified by a
    # link forged with it. Each DEBUG installation now makes its own, readable by its owner only.
    import base64
    import stat

    secret, fernet = _debug_keys(tmp_path, tmp_path / "one")
    assert secret != "django-insecure-local-development-only"
    assert len(secret) >= 50 and len(set(secret)) >= 5
    assert len(base64.urlsafe_b64decode(fernet[0])) == 32  # a Fernet key of its own first
    for name in ("secret_key", "mfa_encryption_key"):
        path = tmp_path / "one" / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
    assert _debug_keys(tmp_path, tmp_path / "one") == (secret, fernet)  # made once, then read
    other_secret, other_fernet = _debug_keys(tmp_path, tmp_path / "two")
    assert other_secret != secret and other_fernet[0] != fernet[0]


def test_a_debug_key_file_others_can_read_stops_start_up(tmp_path) -> None:
    _debug_keys(tmp_path, tmp_path)
    (tmp_path / "secret_key").chmod(0o644)
    result = load_settings(tmp_path, _KEYS, DEBUG="true")
    assert result.returncode != 0
    assert "can be read by other users: chmod 600" in result.stderr


def test_debug_is_off_unless_asked_for(tmp_path) -> None:
    result = load_settings(tmp_path, SECRET_KEY=GOOD_KEY, MFA_ENCRYPTION_KEY=FERNET_KEY)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "False"


def test_database_and_broker_urls_switch_to_postgresql_and_redis(tmp_path) -> None:
    result = load_settings(
        tmp_path,
        DEBUG="true",
        DATABASE_URL="postgres://u@127.0.0.1:5432/db",
        CELERY_BROKER_URL="redis://127.0.0.1:6379/0",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[1:3] == [
        "medalign_site.pgbackend",  # Django's, with a health check that polls the socket
        "redis://127.0.0.1:6379/0",
    ]
    # The Redis broker is also the shared cache (rate limits, TOTP replay, sessions).
    assert result.stdout.split()[4] == "medalign_site.cache.ResilientRedisCache"


@pytest.mark.parametrize(
    "url",
    [
        "rediss://medalign:s3cret@cache.internal:6380/0",
        "redis://127.0.0.1:6379/0",  # loopback: on this machine
        "unix:///run/redis/redis.sock?db=0",
    ],
)
def test_a_dedicated_redis_with_tls_and_a_password_or_a_local_one_starts(tmp_path, url) -> None:
    result = load_settings(
        tmp_path, SECRET_KEY=GOOD_KEY, MFA_ENCRYPTION_KEY=FERNET_KEY, CACHE_URL=url
    )
    assert result.returncode == 0, result.stderr


def test_cache_url_selects_redis_for_the_shared_cache(tmp_path) -> None:
    result = load_settings(tmp_path, DEBUG="true", CACHE_URL="redis://127.0.0.1:6379/3")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[4] == "medalign_site.cache.ResilientRedisCache"


def test_the_app_refuses_to_start_with_only_allowed_hosts_set(tmp_path) -> None:
    # The reported fail-open: with only ALLOWED_HOSTS set the app used to run in DEBUG with the
    # development key. gunicorn, as deployed, must not start at all.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DEBUG", "SECRET_KEY", "MFA_ENCRYPTION_KEY", "DATABASE_URL", "CACHE_URL"}
    }
    env.update({"ALLOWED_HOSTS": "review.example.org", "DATA_DIR": str(tmp_path)})
    gunicorn = Path(sys.executable).with_name("gunicorn")
    result = subprocess.run(
        [str(gunicorn), "--bind", "127.0.0.1:0", "--workers", "1", "medalign_site.wsgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
        ({"DEBUG": "true", "SESSION_IDLE_TIMEOUT_MINUTES": "half an hour"}, "not a whole number"),
        ({"DEBUG": "true", "SESSION_IDLE_TIMEOUT_MINUTES": "0"}, "must be at least 1"),
        ({"DEBUG": "false"}, "SECRET_KEY must be set when DEBUG is off"),
        ({}, "SECRET_KEY must be set when DEBUG is off"),
        ({"SECRET_KEY": "x"}, "SECRET_KEY is too short"),
        ({"SECRET_KEY": "a" * 60}, "SECRET_KEY is too short"),  # 1 distinct character
        ({"SECRET_KEY": GOOD_KEY[:49]}, "SECRET_KEY is too short"),
        ({"SECRET_KEY": GOOD_KEY}, "MFA_ENCRYPTION_KEY must be set when DEBUG is off"),
        ({"SECRET_KEY": GOOD_KEY, "MFA_ENCRYPTION_KEY": "short"}, "is not a Fernet key"),
        ({"DEBUG": "true", "CACHE_URL": "memcached://x"}, "CACHE_URL must be a redis:// URL"),
        # Redis beyond this machine: TLS and a password, outside DEBUG.
        (
            {
                "SECRET_KEY": GOOD_KEY,
                "MFA_ENCRYPTION_KEY": FERNET_KEY,
                "CACHE_URL": "redis://cache.internal:6379/0",
            },
            "CACHE_URL must use rediss://",
        ),
        (
            {
                "SECRET_KEY": GOOD_KEY,
                "MFA_ENCRYPTION_KEY": FERNET_KEY,
                "CACHE_URL": "rediss://cache.internal:6380/0",
            },
            "CACHE_URL must carry the Redis user's password",
        ),
        (
            {"DEBUG": "true", "SCORING_REFERENCE_AGGREGATE": "median"},
            "SCORING_REFERENCE_AGGREGATE must be one of",
        ),
        (
            {"DEBUG": "true", "RUN_HEARTBEAT_INTERVAL": "60", "RUN_HEARTBEAT_TIMEOUT": "90"},
            "RUN_HEARTBEAT_TIMEOUT must be at least twice RUN_HEARTBEAT_INTERVAL",
        ),
        ({"DEBUG": "true", "JURY_JUDGES": "[{'kind': 1}"}, "JURY_JUDGES is not valid JSON"),
        ({"DEBUG": "true", "JURY_JUDGES": '{"kind": "x"}'}, "JURY_JUDGES must be a JSON list"),
        ({"DEBUG": "true", "GENERATION_STORE_PROMPTS": "perhaps"}, "is not a boolean"),
    ],
)
def test_bad_values_stop_start_up_with_a_clear_error(tmp_path, env, message) -> None:
    result = load_settings(tmp_path, **env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and message in result.stderr


# --- the demo serves the app's own error pages ----------------------------------------------------
def test_the_demo_server_shows_its_own_error_pages(tmp_path):
    import os
    import socket
    import subprocess
    import sys
    import time

    import requests

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = ROOT
    # What rundemo runs: DEBUG settings, the app's own error pages, static files still served.
    env = {**os.environ, "DEBUG": "true", "DEBUG_ERROR_PAGES": "false", "DATA_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", "--insecure", f"127.0.0.1:{port}"],
        cwd=root,
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
                static = requests.get(base + "/static/review/app.css", timeout=30)
                break
            except requests.RequestException:
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    raise AssertionError(server.communicate()[1].decode()[-3000:]) from None
                time.sleep(0.5)
        assert static.status_code == 200
        missing = requests.get(base + "/no-such-page/", timeout=30)
        assert missing.status_code == 404
        assert "MedAlign Review" in missing.text
        assert "Django tried these URL patterns" not in missing.text
        assert "DEBUG = True" not in missing.text
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_filesystem_worker_reserves_its_next_batch_and_a_redis_one_does_not(tmp_path) -> None:
    # Celery's blocking loop (the filesystem broker) acks a finished task only when its 2 s wait
    # for messages ends: with nothing reserved every batch waited for it (bench_scoring). On
    # Redis a batch is never held behind a long one on a busy worker.
    code = (
        "import medalign_site.settings as s;"
        "print(s.CELERY_WORKER_PREFETCH_MULTIPLIER,"
        " s.CELERY_BROKER_TRANSPORT_OPTIONS.get('polling_interval'))"
    )
    embedded = load_settings(tmp_path, code, DEBUG="true")
    assert embedded.returncode == 0, embedded.stderr
    assert embedded.stdout.split() == ["2", "0.1"]
    redis = load_settings(
        tmp_path, code, DEBUG="true", CELERY_BROKER_URL="redis://127.0.0.1:6379/0"
    )
    assert redis.stdout.split() == ["1", "None"]
