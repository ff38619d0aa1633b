"""The ASGI entry point (medalign_site/asgi.py) keeps DEBUG's promise as the WSGI one does: a
process with the DEBUG settings serves only beside synthetic data, whichever server loads it."""

import os
import subprocess
import sys
from pathlib import Path

from asgiref.sync import async_to_sync

from review.models import Dataset

ROOT = Path(__file__).resolve().parent.parent


async def _hello(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"served"})


def _get(app) -> tuple[int, bytes]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/accounts/login/", "headers": []}
    async_to_sync(app)(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body


def test_a_debug_asgi_app_serves_synthetic_data_then_stops_once_real_data_arrives(db):
    from medalign_site.debug_guard import DebugOnlyBesideSyntheticDataASGI

    Dataset.objects.create(name="demo", is_synthetic=True)
    app = DebugOnlyBesideSyntheticDataASGI(_hello)
    assert _get(app) == (200, b"served")
    Dataset.objects.create(name="omop-cohort", is_synthetic=False)
    app.check.checked_at = -app.check.INTERVAL  # as if the interval had passed
    status, body = _get(app)
    assert status == 503
    page = body.decode().replace("&#x27;", "'")
    assert "omop-cohort, which is not synthetic" in page and "DEBUG=false make run" in page
    # For good once real data was seen: deleting it does not make DEBUG a deployment.
    Dataset.objects.filter(is_synthetic=False).delete()
    app.check.checked_at = -app.check.INTERVAL
    assert _get(app)[0] == 503


def _asgi_application_type(tmp_path: Path, **env: str) -> str:
    environ = {**os.environ, "DATA_DIR": str(tmp_path), **env}
    environ.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", "import medalign_site.asgi as a; print(type(a.application))"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_with_debug_the_asgi_app_is_wrapped_by_the_guard(tmp_path):
    assert "DebugOnlyBesideSyntheticDataASGI" in _asgi_application_type(tmp_path, DEBUG="true")


def test_without_debug_the_asgi_app_is_djangos_own(tmp_path):
    from cryptography.fernet import Fernet

    out = _asgi_application_type(
        tmp_path,
        DEBUG="false",
        SECRET_KEY="x" * 40 + "-a-long-random-enough-key-9f8e7d6c",
        MFA_ENCRYPTION_KEY=Fernet.generate_key().decode(),
    )
    assert "ASGIHandler" in out
