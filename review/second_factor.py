"""The second factor beyond allauth's defaults: who may manage the factors, and lockouts.

- Viewing, downloading or regenerating the recovery codes and deactivating TOTP need the second
  factor shown *in this session, recently* (within ACCOUNT_REAUTHENTICATION_TIMEOUT): at sign-in
  or at the TOTP step (``mfa_reauthenticate``). allauth accepts a fresh password there, which let
  a password-only session read the recovery codes and pass the second factor with
  one. ``factor_management_urls`` mounts allauth's own views behind that check, under
  their own names, before allauth's URLs; viewing the codes is audited.
- A locked second factor or sign-in says how long the lock lasts, and is audited
  (``AuthenticateForm``/``ReauthenticateForm`` through ``MFA_FORMS``; the password sign-in in
  review.adapters). Wrong codes and used recovery codes are audited by review.receivers.
"""

import math
import time
from collections.abc import Callable
from functools import wraps
from typing import Any

from allauth.account import app_settings as account_settings
from allauth.account.authentication import get_authentication_records
from allauth.core import context
from allauth.mfa.base.forms import AuthenticateForm as AllauthAuthenticateForm
from allauth.mfa.base.forms import ReauthenticateForm as AllauthReauthenticateForm
from allauth.mfa.models import Authenticator
from allauth.mfa.recovery_codes import views as recovery_code_views
from allauth.mfa.totp import views as totp_views
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode

from review.allauth_compat import ratelimit
from review.models import AuditEvent
from review.services.audit import audit_record

SECOND_FACTOR_TYPES = frozenset({"totp", "recovery_codes", "webauthn"})
MFA_RATE_KEY = "mfa-auth-user-{pk}"  # allauth.mfa.base.internal.flows.check_rate_limit


def recent_second_factor(request: HttpRequest) -> bool:
    """Whether this session showed a second factor within the re-authentication timeout."""
    horizon = time.time() - account_settings.REAUTHENTICATION_TIMEOUT
    return any(
        record.get("method") == "mfa"
        and record.get("type") in SECOND_FACTOR_TYPES
        and float(record.get("at", 0)) > horizon
        for record in get_authentication_records(request, request.user)
    )


View = Callable[..., HttpResponse]


def second_factor_required(view: View, *, audit_views: bool = False) -> View:
    """Let an account with a second factor through only in a session that showed it recently;
    others go to the TOTP step, which brings them back. Accounts without one are left to the
    view (allauth answers 404 or sends them to set TOTP up)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        user = request.user
        if (
            user.is_authenticated
            and Authenticator.objects.filter(user=user).exists()
            and not recent_second_factor(request)
        ):
            step = reverse("mfa_reauthenticate")
            return redirect(f"{step}?{urlencode({'next': request.get_full_path()})}")
        response = view(request, *args, **kwargs)
        if audit_views and request.method == "GET" and response.status_code == 200:
            match = request.resolver_match
            name = (match.url_name or "") if match else ""
            audit_record(
                action=AuditEvent.Action.RECOVERY_CODES_VIEWED,
                request=request,
                details={"download": name == "mfa_download_recovery_codes"},
            )
        return response

    return wrapped


def factor_management_urls() -> list[URLPattern]:
    """allauth's recovery-code and TOTP-deactivation views behind ``second_factor_required``,
    at allauth's paths and names (mounted before ``allauth.urls``, so these are the ones
    served)."""
    return [
        path(
            "accounts/2fa/recovery-codes/",
            second_factor_required(recovery_code_views.view_recovery_codes, audit_views=True),
            name="mfa_view_recovery_codes",
        ),
        path(
            "accounts/2fa/recovery-codes/generate/",
            second_factor_required(recovery_code_views.generate_recovery_codes),
            name="mfa_generate_recovery_codes",
        ),
        path(
            "accounts/2fa/recovery-codes/download/",
            second_factor_required(recovery_code_views.download_recovery_codes, audit_views=True),
            name="mfa_download_recovery_codes",
        ),
        path(
            "accounts/2fa/totp/deactivate/",
            second_factor_required(totp_views.deactivate_totp),
            name="mfa_deactivate_totp",
        ),
    ]


# --- lockouts: how long they last, audited ------------------------------------------------------
def lockout_seconds(request: HttpRequest, *, action: str, key: str) -> int:
    """Seconds until allauth's limits for ``action`` (per address, per key) let ``key`` try
    again: the oldest failure still counted ages out of the longest full window."""
    now = time.time()
    wait = 0.0
    for rate in ratelimit.get_rates(app="allauth.account", action=action):
        cache_key = ratelimit.get_cache_key(
            request, app="allauth.account", action=action, rate=rate, key=key
        )
        history = cache.get(cache_key, [])
        if isinstance(history, list) and len(history) >= rate.amount:
            wait = max(wait, float(history[-1]) + rate.duration - now)
    return max(1, math.ceil(wait))


def wait_text(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


class _LockoutSaysHowLong:
    user: Any

    def clean_code(self) -> str:
        try:
            code: str = super().clean_code()  # type: ignore[misc]
        except ValidationError as exc:
            if exc.code != "too_many_login_attempts":
                raise
            request = context.request
            seconds = lockout_seconds(
                request, action="login_failed", key=MFA_RATE_KEY.format(pk=self.user.pk)
            )
            audit_record(
                action=AuditEvent.Action.MFA_LOCKED,
                actor=self.user,
                request=request,
                details={"seconds": seconds},
            )
            raise ValidationError(
                f"Too many wrong codes. Try again in {wait_text(seconds)}.",
                code="too_many_login_attempts",
            ) from None
        return code


class AuthenticateForm(_LockoutSaysHowLong, AllauthAuthenticateForm):  # type: ignore[misc]
    """The TOTP step of sign-in (MFA_FORMS["authenticate"])."""


class ReauthenticateForm(_LockoutSaysHowLong, AllauthReauthenticateForm):  # type: ignore[misc]
    """The TOTP step of a session (MFA_FORMS["reauthenticate"])."""
