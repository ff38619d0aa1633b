"""``/health/``: database, cache, broker and migrations, ok or failing, for the proxy and
monitoring. Anonymous, no details beyond ok/failing per component, and a flood of probes
checks the components once per window, not once per request."""

import json

import pytest
from django.core.cache import caches
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client

from medalign_site import health

COMPONENTS = {"database", "cache", "broker", "migrations"}


@pytest.fixture(autouse=True)
def _fresh_health(settings):
    """Each test checks afresh: no result remembered from another test."""
    health.health_forget()
    yield
    health.health_forget()


def _get(client: Client, **headers: str):
    response = client.get("/health/", **headers)
    return response, json.loads(response.content)


@pytest.mark.django_db
def test_it_answers_200_with_every_component_ok_to_anyone(client) -> None:
    response, body = _get(client)

    assert response.status_code == 200
    assert body == {"status": "ok", "checks": dict.fromkeys(COMPONENTS, "ok")}
    assert response["Cache-Control"] == "no-store"


@pytest.mark.django_db
def test_an_unreachable_broker_is_a_503_naming_only_that_component(client, settings) -> None:
    # A port nobody listens on: the broker check must fail, fast, and say nothing else.
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:9/0"

    response, body = _get(client)

    assert response.status_code == 503
    assert body["status"] == "failing"
    assert body["checks"] == {
        "database": "ok",
        "cache": "ok",
        "broker": "failing",
        "migrations": "ok",
    }
    assert b"127.0.0.1" not in response.content  # no address, no exception text


@pytest.mark.django_db
def test_an_unreachable_cache_is_a_503(client, settings) -> None:
    # The Redis cache degrades silently for the app's reads: the probe must still see it gone.
    settings.CACHES = {
        "default": {
            "BACKEND": "medalign_site.cache.ResilientRedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        },
    }
    try:
        response, body = _get(client)
    finally:
        caches["default"].close()

    assert response.status_code == 503
    assert body["checks"]["cache"] == "failing"
    assert body["checks"]["database"] == "ok"


@pytest.mark.django_db
def test_a_pending_migration_is_a_503(client) -> None:
    # The newest migration of the review app, forgotten as if the deploy had not run migrate.
    recorder = MigrationRecorder(connection)
    newest = recorder.migration_qs.filter(app="review").order_by("-name").first()
    assert newest is not None
    newest.delete()

    response, body = _get(client)

    assert response.status_code == 503
    assert body["checks"]["migrations"] == "failing"
    assert body["checks"]["database"] == "ok"


@pytest.mark.django_db
def test_an_unreachable_database_is_a_503(client, monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise health.DatabaseError("connection refused")

    monkeypatch.setattr(health, "_database_ping", refuse)

    response, body = _get(client)

    assert response.status_code == 503
    assert body["checks"]["database"] == "failing"
    assert body["checks"]["migrations"] == "failing"  # unknown without a database
    assert b"refused" not in response.content


@pytest.mark.django_db
def test_probes_within_the_window_reuse_the_last_answer(client, monkeypatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(health, "_now", lambda: clock[0])
    first, _ = _get(client)
    assert first.status_code == 200

    calls = []
    monkeypatch.setattr(health, "_database_ping", lambda: calls.append("db"))
    for _ in range(20):
        again, _ = _get(client)
        assert again.status_code == 200
    assert calls == []  # twenty probes, no check run

    clock[0] += health.HEALTH_WINDOW_SECONDS + 0.1
    _get(client)
    assert calls == ["db"]  # a new window checks again


@pytest.mark.django_db
def test_it_takes_no_body_and_no_other_method(client) -> None:
    assert client.post("/health/", data={"x": "y"}).status_code == 405
    assert client.head("/health/").status_code == 200


@pytest.mark.django_db
def test_it_sets_no_cookie_and_opens_no_session(client) -> None:
    response, _ = _get(client)

    assert not response.cookies


@pytest.mark.django_db
def test_a_plain_http_probe_behind_the_proxy_is_answered_not_redirected(client, settings) -> None:
    # A load balancer probes the web process on its private HTTP port; everything else on
    # that port is sent to HTTPS.
    settings.SECURE_SSL_REDIRECT = True

    assert client.get("/health/").status_code == 200
    assert client.get("/accounts/login/").status_code == 301
