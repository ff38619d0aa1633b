"""``/health/``: is this web process able to serve? For the proxy, a load balancer and monitoring.

Four components, each ``ok`` or ``failing``: the database answers, the shared cache takes a
write, the Celery broker accepts a connection, and every migration this code knows is applied.
200 when all are ok, 503 otherwise. Nothing else is said: no exception text, host name,
version or timing (the logs have the exception's type), and no patient data is read.

Anonymous and cheap to flood: the answer is computed at most once per ``HEALTH_WINDOW_SECONDS``
in each process (concurrent probes wait for the one check under way), so a burst of probes
costs the database, Redis and the broker one round each. The proxy also limits the rate
(deploy/nginx). A body is never read: GET and HEAD only.

``/healthz`` (review.views.core) stays what the drills and load tests wait on: the process is up
and its database answers, nothing more.
"""

import logging
import secrets
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.core.cache import caches
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_http_methods
from kombu import Connection

from medalign_site.logs import redact_exception

logger = logging.getLogger(__name__)

__all__ = ["DatabaseError", "HEALTH_WINDOW_SECONDS", "health", "health_check", "health_forget"]

HEALTH_WINDOW_SECONDS = 5.0
# A broker that does not answer within this is failing: a probe must not hang the proxy's check.
BROKER_TIMEOUT_SECONDS = 2.0

_lock = threading.Lock()
_last: tuple[float, dict[str, bool]] | None = None
# Once every migration is applied, this code's migrations stay applied for the life of the
# process (a new release is a new process): the migration graph is not loaded again.
_migrations_applied = False


def _now() -> float:
    return time.monotonic()


def _database_ping() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _cache_write() -> None:
    # A write, not a read: the Redis cache turns an unreachable server into a miss for the
    # app's reads (medalign_site/cache.py), but ``add`` is never softened.
    key = f"health-probe:{secrets.token_hex(8)}"
    cache = caches["default"]
    if not cache.add(key, 1, timeout=30):
        raise RuntimeError("the cache did not store a fresh key")
    cache.delete(key)


def _broker_connect() -> None:
    url = settings.CELERY_BROKER_URL
    with Connection(
        url,
        transport_options=dict(getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})),
        connect_timeout=BROKER_TIMEOUT_SECONDS,
    ) as broker:
        broker.ensure_connection(max_retries=0, timeout=BROKER_TIMEOUT_SECONDS)


def _migrations_check() -> None:
    global _migrations_applied
    if _migrations_applied:
        return
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        raise RuntimeError("migrations are pending")
    _migrations_applied = True


def _component(name: str, check: Callable[[], None]) -> bool:
    try:
        check()
    except Exception as exc:  # any failure is "failing"; the log keeps its type
        logger.warning("health: %s failing: %s", name, redact_exception(exc))
        return False
    return True


def health_check() -> dict[str, bool]:
    """Each component's state, checked now (``health`` reuses it within the window)."""
    database = _component("database", lambda: _database_ping())
    checks = {
        "database": database,
        "cache": _component("cache", lambda: _cache_write()),
        "broker": _component("broker", lambda: _broker_connect()),
        # Unknown without a database, hence failing.
        "migrations": database and _component("migrations", lambda: _migrations_check()),
    }
    return checks


def health_forget() -> None:
    """Forget the last answer and the migrations seen applied (tests)."""
    global _last, _migrations_applied
    with _lock:
        _last = None
        _migrations_applied = False


def _checks_in_window() -> dict[str, bool]:
    global _last
    with _lock:
        now = _now()
        if _last is not None and now - _last[0] < HEALTH_WINDOW_SECONDS:
            return _last[1]
        checks = health_check()
        _last = (_now(), checks)
        return checks


@require_http_methods(["GET", "HEAD"])
def health(request: HttpRequest) -> JsonResponse:
    checks = _checks_in_window()
    healthy = all(checks.values())
    response = JsonResponse(
        {
            "status": "ok" if healthy else "failing",
            "checks": {name: "ok" if ok else "failing" for name, ok in checks.items()},
        },
        status=200 if healthy else 503,
    )
    response["Cache-Control"] = "no-store"
    return response
