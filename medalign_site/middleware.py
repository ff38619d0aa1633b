"""Cross-cutting HTTP middleware: the signed-in user, idle session timeout, security headers."""

import time
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import get_user, logout
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.http import HttpRequest, HttpResponse

_LAST_SEEN_KEY = "_last_seen"
SIGNED_IN_AT_KEY = "_signed_in_at"  # set at sign-in (review.receivers.on_login)


class UserMiddleware(AuthenticationMiddleware):
    """Django's authentication middleware, with the user read at once rather than on first use.

    Django wraps ``request.user`` in a SimpleLazyObject so that a request which never asks
    pays nothing. Here every request asks (IdleSessionTimeoutMiddleware, next, checks whether
    it is signed in), and every later attribute read through the wrapper (the access checks,
    the templates, the audit trail: hundreds per annotation) is a Python-level proxy call.
    ``request.auser`` and the session check stay Django's.
    """

    def process_request(self, request: HttpRequest) -> None:
        super().process_request(request)
        request.user = get_user(request)


class IdleSessionTimeoutMiddleware:
    """Sign a user out after SESSION_IDLE_TIMEOUT_MINUTES without a request, and in any case
    SESSION_COOKIE_AGE after they signed in.

    A DUA requires unattended sessions to end: the idle clock is kept in the session itself and
    refreshed on every authenticated request. Django's SESSION_COOKIE_AGE is not an absolute
    cap by itself: every save of the session moves its expiry on, so a session in use never
    ended. The sign-in time, kept in the session, caps it.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.user.is_authenticated:
            now = int(time.time())
            last_seen = request.session.get(_LAST_SEEN_KEY)
            limit = settings.SESSION_IDLE_TIMEOUT_MINUTES * 60
            signed_in_at = request.session.get(SIGNED_IN_AT_KEY)
            if signed_in_at is None:
                # A session from before the cap existed: its lifetime counts from now.
                request.session[SIGNED_IN_AT_KEY] = now
            elif now - int(signed_in_at) > settings.SESSION_COOKIE_AGE:
                logout(request)
                request.session["session_expired"] = True
                return self.get_response(request)
            if last_seen is not None and now - int(last_seen) > limit:
                logout(request)
                request.session["idle_logout"] = True
            else:
                # Writing the session every request costs a write; once a minute is plenty.
                if last_seen is None or now - int(last_seen) >= 60:
                    request.session[_LAST_SEEN_KEY] = now
        return self.get_response(request)


class SecurityHeadersMiddleware:
    """Content Security Policy (enforced in every mode), a permissions policy, and no caching
    of anything served to a signed-in user.

    Every page a signed-in user gets may carry record, response or export data; a browser or
    proxy cache must not keep a copy (``no-store``), so the back button after sign-out or a
    shared workstation shows nothing. Static files are served before this (WhiteNoise).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        user = getattr(request, "user", None)
        private = (user is not None and user.is_authenticated) or "Authorization" in request.headers
        if private and "no-store" not in response.headers.get("Cache-Control", ""):
            response.headers["Cache-Control"] = "no-store, private"
        response.headers.setdefault(
            "Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()"
        )
        return response
