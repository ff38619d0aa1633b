"""The settings file parses its environment strictly and works with nothing set."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "DEBUG", "SECRET_KEY"}
    }
    clean.update({"DATA_DIR": str(tmp_path), **env})
    code = (
        "import medalign_site.settings as s;"
        "print(s.DEBUG, s.DATABASES['default']['ENGINE'], s.CELERY_BROKER_URL,"
        " s.SESSION_IDLE_TIMEOUT_MINUTES)"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        check=False,
    )


def test_with_nothing_set_it_runs_on_sqlite_and_the_filesystem_broker(tmp_path) -> None:
    result = load_settings(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "django.db.backends.sqlite3", "filesystem://", "30"]
    assert (tmp_path / "celery-broker" / "queue").is_dir()


def test_database_and_broker_urls_switch_to_postgresql_and_redis(tmp_path) -> None:
    result = load_settings(
        tmp_path,
        DATABASE_URL="postgres://u@127.0.0.1:5432/db",
        CELERY_BROKER_URL="redis://127.0.0.1:6379/0",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[1:3] == [
        "django.db.backends.postgresql",
        "redis://127.0.0.1:6379/0",
    ]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
        ({"SESSION_IDLE_TIMEOUT_MINUTES": "half an hour"}, "is not a whole number"),
        ({"SESSION_IDLE_TIMEOUT_MINUTES": "0"}, "must be at least 1"),
        ({"DEBUG": "false"}, "SECRET_KEY must be set when DEBUG is off"),
        ({"SCORING_REFERENCE_AGGREGATE": "median"}, "SCORING_REFERENCE_AGGREGATE must be one of"),
    ],
)
def test_bad_values_stop_start_up_with_a_clear_error(tmp_path, env, message) -> None:
    result = load_settings(tmp_path, **env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and message in result.stderr
