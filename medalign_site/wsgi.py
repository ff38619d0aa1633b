import gc
import html
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "medalign_site.settings")
application: Callable[..., Any] = get_wsgi_application()

from django.conf import settings  # noqa: E402 - configured by get_wsgi_application()
from django.db import DatabaseError, connection  # noqa: E402

from review.selectors.datasets import datasets_not_synthetic, debug_refusal  # noqa: E402

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class DebugOnlyBesideSyntheticData:
    """A server with the DEBUG settings (``make demo``, ``make run``, runserver, gunicorn with
    DEBUG=true) answers 503, saying why and what to do, while its database holds a dataset that
    is not synthetic: DEBUG is never a deployment. Asked at most every few seconds (a dataset
    imported while it serves is noticed), and for good once real data was seen."""

    INTERVAL = 5.0

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self.checked_at = -self.INTERVAL
        self.refusal: str | None = None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if self.refusal is None and time.monotonic() - self.checked_at >= self.INTERVAL:
            # A connection this check opens is closed again (it is outside any request); one
            # that was open is left as it is: a persistent one is Django's to recycle at the
            # next request, and a caller's transaction (a test's) must survive the check.
            opened = connection.connection is None
            try:
                names = datasets_not_synthetic()
            except DatabaseError:
                # Not migrated yet, or away: no data can be served either; the app says so.
                names = None
            if opened:
                connection.close()
            if names is not None:
                self.checked_at = time.monotonic()
            if names:
                self.refusal = debug_refusal(names)
        if self.refusal is None:
            return self.app(environ, start_response)
        page = (
            "<!doctype html><title>Not served in DEBUG · MedAlign Review</title>"
            "<h1>This server runs with the DEBUG settings beside real data.</h1>"
            f"<p>{html.escape(self.refusal)}</p>"
        ).encode()
        start_response(
            "503 Service Unavailable",
            [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(page)))],
        )
        return [page]


if settings.DEBUG_SETTINGS:
    application = DebugOnlyBesideSyntheticData(application)
# Import every view module now (Django does it on the first request): a worker that has just
# started, or all of them after a deploy, would otherwise make their first visitors wait seconds.
get_resolver().url_patterns  # noqa: B018 - evaluated for its side effect
# What is loaded by now (Django, the app and its libraries: ~180,000 objects) lives as long as the
# process, yet every full collection of the cyclic GC walks all of it: ~50 ms, every few hundred
# requests, about 0.2 ms per annotation (measured). Frozen objects are left out of collections.
# Under gunicorn --preload this runs in the master, before the fork, so the workers share the
# pages those objects are on instead of copying them when a collection touches them.
gc.collect()
gc.freeze()
