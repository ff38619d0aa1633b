"""What a script is told when its request cannot go through: JSON, never a sign-in page.

The access decorators answer a page request with a redirect (to sign-in, to the application
page, to the second-factor step) and a missing object with Django's HTML 404; this middleware
turns those into JSON a page can act on for the review, record and grading endpoints.
"""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from medalign_site.errors import is_navigation, wants_json
from review.access import APPLICATION_URL_NAME, MFA_SETUP_URL_NAME, page_owner, user_access
from review.models import AccessApplication

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
        response = self._answer(request)
        if (
            response.status_code in (403, 404)
            and wants_json(request)
            and request.user.is_authenticated
        ):
            # Which account this refusal was for: a page opened by another account (signed in
            # since, in another tab) tells "not yours" from "not found" and says so.
            response["X-Account"] = page_owner(request.user)
        return response

    def _answer(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not wants_json(request) or "application/json" in response.get("Content-Type", ""):
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
            return JsonResponse(no_access_body(request, response["Location"]), status=403)
        if response.status_code == 404:
            return JsonResponse({"error": "not_found", "message": "Not found."}, status=404)
        if response.status_code == 405:
            return JsonResponse(
                {"error": "method_not_allowed", "message": "Method not allowed."}, status=405
            )
        return response


def no_access_body(request: HttpRequest, location: str) -> dict[str, str]:
    """Which requirement of access failed, said plainly, for a page that cannot go on: the
    approval (revoked, expired, not yet given), the training certificate, the DUA or the second
    factor's set-up. The page stops retrying and links to the access page."""
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
