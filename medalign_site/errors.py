"""Error handlers that never show the error: a JSON 503 when the database is away.

Django's ``handler500`` runs inside the ``except`` block that caught the exception, whether it
came from a view or from a middleware (the session and auth middleware hit the database before
any view runs), so ``sys.exc_info()`` says what failed. A database outage is temporary: the
review endpoints answer a JSON 503 with a clear message and ``Retry-After``, which review.js shows
while it retries, instead of an HTML 500. Nothing here renders the exception or request data.
"""

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
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
        # The grading page's autosave and submit (its page, /gradings/<id>/, is HTML).
        or (
            request.path.startswith("/gradings/") and request.path.endswith(("/draft/", "/submit/"))
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


SIGNED_OUT_MESSAGE = (
    "Your session has ended. Sign in again to save: your changes are kept on this page "
    "until the server has them."
)
SECOND_FACTOR_MESSAGE = (
    "This session has not passed the second factor. Enter your authenticator code to save: your "
    "changes are kept on this page until the server has them."
)
NO_ACCESS_MESSAGE = (
    "Your access to the records needs attention (approval, training certificate, data use "
    "agreement or second factor). Open the app in a new tab to see what is missing; your "
    "changes are kept on this page until the server has them."
)


class JsonAuthMiddleware:
    """JSON requests get JSON answers when they cannot go through.

    The access decorators answer a page request with a redirect (to sign-in, to the application
    page, to the second-factor step) and a missing object with Django's HTML 404. A script that
    follows such a redirect gets the sign-in page as HTML, which the review page once drew into
    its record panel ("Showing the NaN events"). For a JSON request: 401 when not signed in,
    403 when signed in without access, and JSON for 404/405.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        # Before the access decorators and the view: the page says the same to everyone, for
        # any id in the address, and reads nothing.
        methods = getattr(view, "json_endpoint_methods", None)
        if methods is None or not is_navigation(request):
            return None
        allowed = request.method in methods or (request.method == "HEAD" and "GET" in methods)
        response = render(
            request,
            "json_endpoint.html",
            {"home_url": reverse("home"), "queue_url": reverse("clinician_queue")},
            status=406 if allowed else 405,
        )
        if not allowed:
            response["Allow"] = ", ".join(sorted(methods))
        return response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not _wants_json(request) or "application/json" in response.get("Content-Type", ""):
            return response
        if response.status_code in (301, 302, 303, 307, 308):
            # Where the page's sign-in window should go; it ends on a page that tells the review
            # page to send its edits (review.views.clinician.session_resumed).
            resume = "?next=" + reverse("session_resumed")
            if not request.user.is_authenticated:
                return JsonResponse(
                    {
                        "error": "signed_out",
                        "message": SIGNED_OUT_MESSAGE,
                        "login_url": reverse(settings.LOGIN_URL) + resume,
                    },
                    status=401,
                )
            if response["Location"].startswith(reverse("mfa_reauthenticate")):
                # Signed in, but this session has not passed the second factor.
                return JsonResponse(
                    {
                        "error": "second_factor",
                        "message": SECOND_FACTOR_MESSAGE,
                        "login_url": reverse("mfa_reauthenticate") + resume,
                    },
                    status=401,
                )
            return JsonResponse(_no_access(request, response["Location"]), status=403)
        if response.status_code == 404:
            return JsonResponse({"error": "not_found", "message": "Not found."}, status=404)
        if response.status_code == 405:
            return JsonResponse(
                {"error": "method_not_allowed", "message": "Method not allowed."}, status=405
            )
        return response


def _no_access(request: HttpRequest, location: str) -> dict[str, str]:
    """Which requirement of access failed, said plainly, for a page that cannot go on: the
    approval (revoked, expired, not yet given), the training certificate, the DUA or the second
    factor's set-up. The page stops retrying and links to the access page."""
    from review.access import APPLICATION_URL_NAME, MFA_SETUP_URL_NAME, user_access
    from review.models import AccessApplication

    body = {
        "error": "forbidden",
        "requirement": "",
        "message": NO_ACCESS_MESSAGE,
        "access_url": reverse(APPLICATION_URL_NAME),
    }
    keep = " Your changes are kept on this page until the server has them."
    if location.startswith(reverse(MFA_SETUP_URL_NAME)):
        body["requirement"] = "second factor"
        body["message"] = (
            "Your account has no second factor: set up an authenticator app on your access "
            "page, then try again." + keep
        )
        return body
    access = user_access(request.user)
    application = access.application
    if access.reason == "no approved application":
        latest = (
            AccessApplication.objects.filter(user_id=int(request.user.pk or 0))
            .order_by("-decided_at", "-id")
            .values_list("status", flat=True)
            .first()
        )
        body["requirement"] = "approval"
        body["message"] = (
            (
                "An admin revoked your access to the records."
                if latest == AccessApplication.Status.REVOKED
                else "Your access to the records is not approved."
            )
            + " Your access page says what to do."
            + keep
        )
    elif access.reason == "approval expired" and application is not None:
        body["requirement"] = "approval"
        body["message"] = (
            f"Your approval expired on {application.expires_on:%-d %b %Y}: ask an admin to "
            "renew it." + keep
        )
    elif access.reason == "training certificate expired" and application is not None:
        body["requirement"] = "training certificate"
        body["message"] = (
            "Your training certificate expired on "
            f"{application.certificate_expires_on:%-d %b %Y}: upload a current one on your "
            "access page." + keep
        )
    elif access.reason == "new DUA version not signed":
        body["requirement"] = "DUA"
        body["message"] = (
            "A new version of the data use agreement needs your signature: sign it on your "
            "access page, then try again." + keep
        )
    return body


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
