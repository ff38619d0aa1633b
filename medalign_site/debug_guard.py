"""DEBUG is never a deployment: a process with the DEBUG settings (``make demo``, ``make run``,
runserver, gunicorn or an ASGI server with DEBUG=true) answers 503, saying why and what to do,
while its database holds a dataset that is not synthetic.

One check behind both entry points (``wsgi.py``, ``asgi.py``): a server that loads either one
keeps the promise. The database is asked at most every few seconds (a dataset imported while it
serves is noticed), and never again once real data was seen.

Imported by the entry points once Django is set up (it reads the models).
"""

import html
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError, connection

from review.selectors.datasets import datasets_not_synthetic, debug_refusal

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class RealDataCheck:
    """Whether to refuse, and why: ``refusal`` once a dataset that is not synthetic was seen."""

    INTERVAL = 5.0

    def __init__(self) -> None:
        self.checked_at = -self.INTERVAL
        self.refusal: str | None = None

    def due(self) -> bool:
        return self.refusal is None and time.monotonic() - self.checked_at >= self.INTERVAL

    def run(self) -> None:
        """Ask the database (synchronous: ASGI calls it through ``sync_to_async``)."""
        # A connection this check opens is closed again (it is outside any request); one that
        # was open is left as it is: a persistent one is Django's to recycle at the next
        # request, and a caller's transaction (a test's) must survive the check.
        opened = connection.connection is None
        try:
            names: list[str] | None = datasets_not_synthetic()
        except DatabaseError:
            # Not migrated yet, or away: no data can be served either; the app says so.
            names = None
        if opened:
            connection.close()
        if names is not None:
            self.checked_at = time.monotonic()
        if names:
            self.refusal = debug_refusal(names)

    def page(self) -> bytes:
        return (
            "<!doctype html><title>Not served in DEBUG · MedAlign Review</title>"
            "<h1>This server runs with the DEBUG settings beside real data.</h1>"
            f"<p>{html.escape(self.refusal or '')}</p>"
        ).encode()


class DebugOnlyBesideSyntheticData:
    """The WSGI application, refused with a 503 beside real data (``RealDataCheck``)."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self.check = RealDataCheck()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if self.check.due():
            self.check.run()
        if self.check.refusal is None:
            return self.app(environ, start_response)
        page = self.check.page()
        start_response(
            "503 Service Unavailable",
            [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(page)))],
        )
        return [page]


class DebugOnlyBesideSyntheticDataASGI:
    """The ASGI application, refused with a 503 beside real data (``RealDataCheck``). The check
    runs in Django's thread for synchronous code, as the ORM requires under ASGI. Scopes other
    than HTTP (lifespan) pass through: Django's handler serves nothing else."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.check = RealDataCheck()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.check.due():
            await sync_to_async(self.check.run, thread_sensitive=True)()
        if self.check.refusal is None:
            await self.app(scope, receive, send)
            return
        page = self.check.page()
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"text/html; charset=utf-8"),
                    (b"content-length", str(len(page)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": page})
