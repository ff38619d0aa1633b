"""Error handlers that never show the error: a JSON 503 when the database is away.

Django's ``handler500`` runs inside the ``except`` block that caught the exception, whether it
came from a view or from a middleware (the session and auth middleware hit the database before
any view runs), so ``sys.exc_info()`` says what failed. A database outage is temporary: the
review endpoints answer a JSON 503 with a clear message and ``Retry-After``, which review.js shows
while it retries, instead of an HTML 500. Nothing here renders the exception or request data.
"""

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import server_error as django_server_error

DB_UNAVAILABLE_MESSAGE = (
    "The database is unavailable for a moment; nothing was saved by this request. "
    "Your changes are kept on this page and will be saved automatically when it is back."
)


def _wants_json(request: HttpRequest) -> bool:
    accept = request.headers.get("Accept", "")
    return (
        request.content_type == "application/json"
        or "application/json" in accept
        or request.path.startswith("/reviews/")
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
        response = HttpResponse(
            "<!doctype html><title>Unavailable · MedAlign Review</title>"
            "<h1>The service is unavailable for a moment.</h1>"
            "<p>The database cannot be reached. Try again in a few seconds.</p>",
            status=503,
        )
        response["Retry-After"] = "5"
        return response
    return django_server_error(request, template_name=template_name)
