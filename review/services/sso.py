"""Writes for single sign-on: joining an identity to an account, the audit trail of sign-ins
and refusals, the provider's back-channel logout, and the operator's break-glass link.

Never put what an identity provider sent into the audit trail beyond what names the sign-in
(provider, reason codes): its answers carry names and addresses, not patient data, but the trail
keeps only what an admin needs to follow a sign-in.
"""

import secrets
import time
from typing import Any

from allauth.account.models import EmailAddress
from allauth.socialaccount.models import SocialLogin
from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.db import transaction
from django.http import HttpRequest

from review.models import AuditEvent, User
from review.selectors.sso import users_signed_in_as
from review.services.accounts import user_sessions_end
from review.services.audit import audit_record
from review.sso import (
    BREAK_GLASS_SESSION_KEY,
    IdentityProvider,
    LogoutTokenInvalid,
    identity_provider,
    logout_token_claims,
)

BREAK_GLASS_SALT = "review.sso.break-glass"


def sso_refusal_record(
    *,
    request: HttpRequest | None,
    provider_id: str,
    reason: str,
    email: str = "",
    details: dict[str, Any] | None = None,
) -> None:
    """A sign-in through a provider that was refused, and why (a reason code)."""
    audit_record(
        action=AuditEvent.Action.SSO_REFUSED,
        request=request,
        actor_email=email[:254],
        details={"provider": provider_id, "reason": reason, **(details or {})},
    )


@transaction.atomic
def sso_identity_link(
    *, request: HttpRequest, sociallogin: SocialLogin, user: User, idp: IdentityProvider
) -> None:
    """Join a provider's identity to the existing account holding its verified email (the
    provider is trusted for email), and audit it.

    An account whose address was never confirmed here may have been made by someone else in
    the owner's name, waiting for them: its password is wiped and its sessions end, so only
    the provider's sign-in reaches it from now on (allauth does the same for its own email
    matching).
    """
    email = sociallogin.email_addresses[0].email
    confirmed = EmailAddress.objects.filter(user=user, email__iexact=email, verified=True)
    if not confirmed.exists():
        user.set_unusable_password()
        user.save(update_fields=["password"])
        user_sessions_end(
            user=user, reason="joined to an identity provider by an unconfirmed address"
        )
    sociallogin.connect(request, user)
    audit_record(
        action=AuditEvent.Action.SSO_LINKED,
        actor=user,
        request=request,
        details={
            "provider": idp.id,
            "by": "verified email",
            "address_confirmed_here": confirmed.exists(),
        },
    )


def sso_sign_in_record(
    *, request: HttpRequest | None, user: User, provider_id: str, second_factor: str
) -> None:
    audit_record(
        action=AuditEvent.Action.SSO_LOGIN,
        actor=user,
        request=request,
        details={"provider": provider_id, "second_factor": second_factor},
    )


def sso_backchannel_logout(*, request: HttpRequest, provider_id: str, logout_token: str) -> int:
    """End every session of the accounts a provider's verified logout token names; how many
    accounts. Raises LogoutTokenInvalid (audited) for a token that does not verify."""
    idp = identity_provider(provider_id)
    try:
        if idp is None or idp.protocol != "oidc":
            raise LogoutTokenInvalid(
                "no such OpenID Connect provider here", code="unknown_provider"
            )
        claims = logout_token_claims(request, idp, logout_token)
    except LogoutTokenInvalid as exc:
        sso_refusal_record(
            request=request,
            provider_id=provider_id[:64],
            reason="logout_token_invalid",
            details={"detail": exc.code},
        )
        raise
    users = users_signed_in_as(
        provider_id, sub=str(claims.get("sub") or ""), sid=str(claims.get("sid") or "")
    )
    for user in users:
        user_sessions_end(
            user=user,
            reason=f"signed out by the identity provider ({provider_id})",
            request=request,
        )
    audit_record(
        action=AuditEvent.Action.SSO_LOGOUT,
        actor=users[0] if len(users) == 1 else None,
        request=request,
        details={
            "provider": provider_id,
            "accounts": len(users),
            "by": "sub" if claims.get("sub") else "sid",
        },
    )
    return len(users)


# --- break-glass --------------------------------------------------------------------------------
class BreakGlassRefused(Exception):
    pass


def break_glass_issue(*, user: User) -> str:
    """A one-time link token letting ``user`` sign in with their password (and TOTP) while
    LOCAL_PASSWORDS is off, for SSO_BREAK_GLASS_MINUTES; audited."""
    if not user.is_active:
        raise BreakGlassRefused(f"{user.email} is deactivated")
    token = signing.dumps({"u": user.pk, "n": secrets.token_hex(16)}, salt=BREAK_GLASS_SALT)
    audit_record(
        action=AuditEvent.Action.BREAK_GLASS,
        actor=user,
        details={"step": "issued", "minutes": settings.SSO_BREAK_GLASS_MINUTES},
    )
    return token


def break_glass_open(*, request: HttpRequest, token: str) -> User:
    """Open a break-glass link in this session: its account may sign in here with a password
    until the link's time is up. Each link opens once; refusals say why and are audited."""
    seconds = settings.SSO_BREAK_GLASS_MINUTES * 60
    try:
        data = signing.loads(token, salt=BREAK_GLASS_SALT, max_age=seconds)
    except signing.SignatureExpired:
        _break_glass_refused(request, "expired")
        raise BreakGlassRefused(
            "This break-glass link has expired: ask the operator for a new one."
        ) from None
    except signing.BadSignature:
        _break_glass_refused(request, "invalid")
        raise BreakGlassRefused("This is not a valid break-glass link.") from None
    user = User.objects.filter(pk=data.get("u"), is_active=True).first()
    if user is None:
        _break_glass_refused(request, "no account")
        raise BreakGlassRefused("This break-glass link's account is gone or deactivated.")
    # One use: the shared cache remembers each link's nonce for as long as the link lives.
    if not cache.add(f"sso:break-glass:{data.get('n')}", 1, seconds + 60):
        _break_glass_refused(request, "used", user=user)
        raise BreakGlassRefused("This break-glass link was used already: ask for a new one.")
    request.session[BREAK_GLASS_SESSION_KEY] = {
        "email": user.email.lower(),
        "until": time.time() + seconds,
    }
    audit_record(
        action=AuditEvent.Action.BREAK_GLASS,
        actor=user,
        request=request,
        details={"step": "opened"},
    )
    return user


def _break_glass_refused(request: HttpRequest, reason: str, *, user: User | None = None) -> None:
    audit_record(
        action=AuditEvent.Action.BREAK_GLASS,
        actor=user,
        request=request,
        details={"step": "refused", "reason": reason},
    )
