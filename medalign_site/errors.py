"""Error handlers that never show the error: a JSON 503 when the database is away.

Django's ``handler500`` runs inside the ``except`` block that caught the exception, whether it
came from a view or from a middleware (the session and auth middleware hit the database before
any view runs), so ``sys.exc_info()`` says what failed. A database outage is temporary: the
review endpoints answer a JSON 503 with a clear message and ``Retry-After``, which review.js shows
while it retries, instead of an HTML 500. Nothing here renders the exception or request data.
"""

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.views.csrf import csrf_failure as django_csrf_failure
from django.views.defaults import server_error as django_server_error

DB_UNAVAILABLE_MESSAGE = (
    "The database is unavailable for a moment; nothing was saved by this request. "
    "Your changes are kept on this page and will be saved automatically when it is back."
)


def is_navigation(request: HttpRequest) -> bool:
    """A browser opening the URL as a page (the address bar, a link), not a script's fetch.

    Browsers say so in ``Sec-Fetch-Mode``; one that sends no fetch metadata is taken at its
    ``Accept``: HTML asked for, JSON not.
    """
    if request.method not in ("GET", "HEAD"):
        return False
    mode = request.headers.get("Sec-Fetch-Mode")
    if mode is not None:
        return mode == "navigate"
    accept = request.headers.get("Accept", "")
    return "text/html" in accept and "application/json" not in accept


View = TypeVar("View", bound=Callable[..., HttpResponse])


def json_endpoint(*methods: str) -> Callable[[View], View]:
    """Mark a view as answering scripts only (``methods``: those it takes), so that opening it
    as a page gets a page saying what the address is for (``JsonAuthMiddleware.process_view``),
    before the view runs: nothing is read or audited for a stray click."""

    def mark(view: View) -> View:
        view.json_endpoint_methods = frozenset(methods)  # type: ignore[attr-defined]
        return view

    return mark


def navigation_redirect(to: str | Callable[..., str]) -> Callable[[View], View]:
    """A status endpoint that its page's script polls (``progress.json``, ``status.json``):
    opened as a page (a copied link, the address bar) it sends the browser to the page that
    shows the same status, instead of raw JSON. ``to`` is that page's URL name, reversed with
    the view's keyword arguments, or a function of them returning the URL. Scripts (whose
    ``fetch`` asks for JSON) and clients that say nothing get the JSON as before. Before the
    view runs, so nothing is read for a stray click; the page checks access itself."""

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if is_navigation(request):
                url = to(**kwargs) if callable(to) else reverse(to, kwargs=kwargs)
                return HttpResponseRedirect(url)
            return view(request, *args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def wants_json(request: HttpRequest) -> bool:
    """Whether the request is a script's that must be answered in JSON, whatever happens."""
    return _wants_json(request)


def _wants_json(request: HttpRequest) -> bool:
    if is_navigation(request):
        return False
    accept = request.headers.get("Accept", "")
    return (
        request.content_type == "application/json"
        or "application/json" in accept
        or request.path.startswith("/reviews/")
        # The grading and adjudication pages' autosave and submit (the pages are HTML).
        or (
            request.path.startswith(("/gradings/", "/adjudications/"))
            and request.path.endswith(("/draft/", "/submit/"))
        )
        or "/record/" in request.path
    )


def server_error(request: HttpRequest, template_name: str = "500.html") -> HttpResponse:
    exc = sys.exc_info()[1]
    # OperationalError and InterfaceError are what psycopg raises for a server that went away or
    # refused the connection; an IntegrityError or ProgrammingError is a bug, not an outage.
    unavailable = isinstance(exc, OperationalError | InterfaceError)
    if _wants_json(request):
        if unavailable:
            response = JsonResponse(
                {"error": "unavailable", "message": DB_UNAVAILABLE_MESSAGE}, status=503
            )
            response["Retry-After"] = "5"
            return response
        return JsonResponse(
            {"error": "server_error", "message": "The server had a problem; try again."},
            status=500,
        )
    if unavailable:
        page = HttpResponse(
            "<!doctype html><title>Unavailable · MedAlign Review</title>"
            "<h1>The service is unavailable for a moment.</h1>"
            "<p>The database cannot be reached. Try again in a few seconds.</p>",
            status=503,
        )
        page["Retry-After"] = "5"
        return page
    return django_server_error(request, template_name=template_name)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A JSON 403 the page can act on (fetch the fresh token and resend) for JSON requests."""
    if _wants_json(request):
        return JsonResponse(
            {
                "error": "csrf",
                "message": "The page's security token changed (you signed in again). "
                "Sending your changes again.",
            },
            status=403,
        )
    return django_csrf_failure(request, reason=reason)
