"""allauth adapters: the project's hooks into sign-up and second-factor storage."""

import base64
import hashlib
from functools import cache
from typing import Any

import jwt
from allauth.account.adapter import DefaultAccountAdapter
from allauth.core import context as allauth_context
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.mfa.adapter import DefaultMFAAdapter
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialApp, SocialLogin
from allauth.socialaccount.providers.base.constants import AuthError
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import transaction
from django.http import HttpRequest
from django.shortcuts import render
from requests import RequestException

from review import sso
from review.models import AuditEvent
from review.second_factor import lockout_seconds, wait_text
from review.selectors.sso import identity_provider_ids_for, user_with_email
from review.services.audit import audit_record
from review.services.sso import sso_identity_link, sso_refusal_record
from review.site import site_identity, site_url

# Encrypted values start with this marker, so a value stored before encryption was turned on
# (or by an older release) is recognised and re-encrypted by the data migration, never
# mistaken for ciphertext.
ENCRYPTED_PREFIX = "fernet:"


class AccountAdapter(DefaultAccountAdapter):  # type: ignore[misc]
    """Project account adapter: emails that name the site, sign-in limits per account and
    address, a lockout that says how long it lasts, the second factor first when
    re-authenticating."""

    def _get_login_attempts_cache_key(self, request: HttpRequest, **credentials: Any) -> str:
        # allauth counts failed passwords per account ("5/5m/key"): five wrong passwords from
        # anywhere locked anyone out by their email alone. The key now also names the client's
        # address, so only that address is locked out of that account; the per-address limit
        # ("30/5m/ip") still bounds one address across accounts, and TOTP stands behind both.
        login = str(credentials.get("email", credentials.get("username", ""))).lower()
        return f"{login}|{self.get_client_ip(request)}"

    def pre_authenticate(self, request: HttpRequest, **credentials: Any) -> None:
        email = str(credentials.get("email") or "")
        if not sso.local_password_allowed(request, email):
            audit_record(
                action=AuditEvent.Action.LOGIN_FAILED,
                actor_email=email[:254],
                request=request,
                details={"reason": "local passwords are off"},
            )
            raise ValidationError(
                "Password sign-in is turned off here: sign in with your organisation's account "
                "(the button below).",
                code="local_passwords_off",
            )
        try:
            super().pre_authenticate(request, **credentials)
        except ValidationError as exc:
            if exc.code != "too_many_login_attempts":
                raise
            seconds = lockout_seconds(
                request,
                action="login_failed",
                key=self._get_login_attempts_cache_key(request, **credentials),
            )
            audit_record(
                action=AuditEvent.Action.LOGIN_LOCKED,
                actor_email=str(credentials.get("email") or "")[:254],
                request=request,
                details={"seconds": seconds},
            )
            raise ValidationError(
                "Too many failed sign-in attempts from this address. "
                f"Try again in {wait_text(seconds)}.",
                code="too_many_login_attempts",
            ) from None

    def authenticate(self, request: HttpRequest, **credentials: Any) -> AbstractBaseUser | None:
        user: AbstractBaseUser | None = super().authenticate(request, **credentials)
        if user is None:
            return None
        # An account joined to an identity provider signs in through it: were its password
        # still good, the provider disabling the person would not end their access here. Said
        # only once the password was right, so it tells a stranger nothing.
        joined = identity_provider_ids_for(user)  # type: ignore[arg-type]
        email = str(credentials.get("email") or "")
        if joined and not (sso.break_glass_email(request) == email.lower() and email):
            sso_refusal_record(
                request=request,
                provider_id=joined[0],
                reason="password_for_sso_account",
                email=email,
            )
            names = " or ".join(p.name for p in map(sso.identity_provider, joined) if p)
            raise ValidationError(
                f"This account signs in through {names}: use that button below.",
                code="sso_account",
            )
        return user

    def is_open_for_signup(self, request: HttpRequest) -> bool:
        # Local sign-up closes with local passwords; a first sign-in through an identity
        # provider still makes an account (SocialAccountAdapter.is_open_for_signup).
        return bool(settings.LOCAL_PASSWORDS)

    def get_login_stages(self) -> list[str]:
        # allauth's TOTP step, skipped where a provider trusted for it asserted multi-factor
        # sign-in (review.sso).
        stages: list[str] = super().get_login_stages()
        return [
            "review.sso.AuthenticateStage" if s == "allauth.mfa.stages.AuthenticateStage" else s
            for s in stages
        ]

    def get_reauthentication_methods(
        self, user: AbstractBaseUser | AnonymousUser
    ) -> list[dict[str, Any]]:
        # An account with a second factor re-authenticates with it first (allauth sends the
        # user to the first method); the factor pages accept nothing else (review.second_factor).
        methods: list[dict[str, Any]] = super().get_reauthentication_methods(user)
        return sorted(methods, key=lambda m: not str(m.get("id", "")).startswith("mfa_"))

    def send_mail(self, template_prefix: str, email: str, context: dict[str, Any]) -> None:
        # Without django.contrib.sites allauth names the site after the request's host
        # ("Hello from localhost:8000!"); every email names MedAlign Review and its address.
        request = allauth_context.request
        context = {
            **context,
            "current_site": site_identity(request),
            "site_url": site_url(request),
        }
        super().send_mail(template_prefix, email, context)


def _fernet_key(raw: str) -> bytes:
    if raw.startswith("derive:"):
        # DEBUG only (settings): a stable key derived from the development secret key.
        return base64.urlsafe_b64encode(hashlib.sha256(raw.encode()).digest())
    key = raw.encode()
    try:
        Fernet(key)
    except ValueError:
        raise ImproperlyConfigured(
            "MFA_ENCRYPTION_KEY is not a Fernet key (32 url-safe base64-encoded bytes)"
        ) from None
    return key


@cache
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(_fernet_key(k)) for k in keys])


def mfa_cipher() -> MultiFernet:
    """The first key encrypts; every key decrypts, so keys can be rotated."""
    return _fernet(tuple(settings.MFA_ENCRYPTION_KEYS))


def mfa_encrypt(text: str) -> str:
    return ENCRYPTED_PREFIX + mfa_cipher().encrypt(text.encode()).decode()


def mfa_decrypt(stored: str) -> str:
    if not stored.startswith(ENCRYPTED_PREFIX):
        # Stored in clear before encryption existed: the data migration encrypts these; until
        # it has run they still work rather than locking every user out.
        return stored
    try:
        return mfa_cipher().decrypt(stored[len(ENCRYPTED_PREFIX) :].encode()).decode()
    except InvalidToken:
        raise ImproperlyConfigured(
            "A TOTP secret cannot be decrypted with MFA_ENCRYPTION_KEY: was the key changed "
            "without keeping the old one (comma-separated, new key first)?"
        ) from None


class MFAAdapter(DefaultMFAAdapter):  # type: ignore[misc]
    """TOTP secrets and recovery-code seeds encrypted at rest (Fernet, key from the environment).

    A database dump or an admin page alone then reveals no second factor.
    """

    def encrypt(self, text: str) -> str:
        return mfa_encrypt(text)

    def decrypt(self, encrypted_text: str) -> str:
        return mfa_decrypt(encrypted_text)


# --- single sign-on -----------------------------------------------------------------------------
# What a person is told when a provider's sign-in is refused, by reason code (also audited).
REFUSALS = {
    "refused_by_provider": "The identity provider did not sign you in: it refused, or the "
    "sign-in was cancelled there.",
    "invalid_signature": "The identity provider's answer did not carry its valid signature, so "
    "it was refused. Nothing was stored; try again, and tell your IT team if it happens again.",
    "expired": "The identity provider's answer had expired before it arrived, so it was refused. "
    "Start again from the sign-in page.",
    "invalid_response": "The identity provider's answer could not be checked, so it was refused. "
    "Nothing was stored; start again from the sign-in page.",
    "state": "This sign-in does not match one started in this browser: start again from the "
    "sign-in page.",
    "unreachable": "The identity provider could not be reached. Try again in a while.",
    "unknown_provider": "This identity provider is not one this installation uses.",
    "email_in_use": "An account with this email address exists here, and this identity provider "
    "is not trusted to prove email addresses. Sign in as you did before, or ask an admin.",
    "no_email": "The identity provider sent no email address, which an account here needs.",
    "connect": "An identity provider is joined to an account by signing in through it (with "
    "the same verified email), not from a signed-in session.",
}


def _saml_reason(reason: str) -> str:
    """A reason code from python3-saml's description of what failed."""
    text = reason.lower()
    if "signature" in text or "reference validation" in text or "digest" in text:
        return "invalid_signature"
    if (
        "notonorafter" in text
        or "expired" in text
        or "no longer valid" in text
        or "notbefore" in text
    ):
        return "expired"
    if "status code" in text or "responder" in text or "authnfailed" in text:
        return "refused_by_provider"
    return "invalid_response"


def _exception_reason(exception: BaseException | None) -> str:
    seen: BaseException | None = exception
    while seen is not None:
        if isinstance(seen, jwt.ExpiredSignatureError):
            return "expired"
        if isinstance(seen, jwt.InvalidSignatureError | jwt.DecodeError):
            return "invalid_signature"
        if isinstance(seen, RequestException):
            return "unreachable"
        seen = seen.__cause__ or seen.__context__
    return "invalid_response"


def refusal_response(request: HttpRequest, *, provider_name: str, reason: str) -> Any:
    return render(
        request,
        "socialaccount/authentication_error.html",
        {"provider_name": provider_name, "refusal": REFUSALS[reason], "reason": reason},
        status=401,
    )


class SocialAccountAdapter(DefaultSocialAccountAdapter):  # type: ignore[misc]
    """allauth's sign-in through identity providers, with the app's rules: only configured
    providers; a first sign-in joins an existing account only by an email the provider is
    trusted for; every refusal is audited and says why; nothing half-made is kept."""

    def list_apps(
        self, request: HttpRequest | None, provider: str | None = None, client_id: str | None = None
    ) -> list[SocialApp]:
        # The providers of SSO_PROVIDERS only: a SocialApp row added in Django's admin would be
        # a provider nobody configured trust for.
        apps: list[SocialApp] = super().list_apps(request, provider=provider, client_id=client_id)
        return [
            app
            for app in apps
            if app.pk is None and sso.identity_provider(app.provider_id or "") is not None
        ]

    def is_open_for_signup(self, request: HttpRequest, sociallogin: SocialLogin) -> bool:
        return True

    def is_email_verified(self, provider: Any, email: str) -> bool:
        # SAML answers carry no email_verified: a provider trusted for email is believed.
        idp = sso.identity_provider(getattr(provider.app, "provider_id", "") or "")
        return bool(idp and idp.trusted_for_email)

    def pre_social_login(self, request: HttpRequest, sociallogin: SocialLogin) -> None:
        idp, _asserted = sso.sign_in_facts(sociallogin)
        email = sociallogin.email_addresses[0].email if sociallogin.email_addresses else ""
        if idp is None:
            self._refuse(request, sociallogin.account.provider, "unknown_provider", email)
        assert idp is not None
        # An address counts as verified only from a provider trusted for email, and only when
        # the provider says so (OIDC's email_verified; a trusted SAML provider's assertion).
        for address in sociallogin.email_addresses:
            address.verified = bool(address.verified) and idp.trusted_for_email
        if sociallogin.state.get("process") == "connect":
            # Joining a provider to a signed-in account is not offered: a session that showed
            # only a password could join the intruder's own identity at a provider trusted for
            # MFA, and sign in through it later without the account's TOTP.
            self._refuse(request, idp.id, "connect", email)
        if sociallogin.is_existing:
            return
        if not email:
            self._refuse(request, idp.id, "no_email", email)
        holder = user_with_email(email)
        if holder is None:
            return  # a new account: allauth makes it (save_user), then the application pages
        if idp.trusted_for_email and sociallogin.email_addresses[0].verified:
            sso_identity_link(request=request, sociallogin=sociallogin, user=holder, idp=idp)
            return
        # Never join on an address the provider is not trusted to prove: whoever controls an
        # account at that provider could name any address and take the account here.
        sso_refusal_record(request=request, provider_id=idp.id, reason="email_in_use", email=email)
        raise ImmediateHttpResponse(
            refusal_response(request, provider_name=idp.name, reason="email_in_use")
        )

    def _refuse(self, request: HttpRequest, provider_id: str, reason: str, email: str) -> None:
        sso_refusal_record(request=request, provider_id=provider_id, reason=reason, email=email)
        idp = sso.identity_provider(provider_id)
        raise ImmediateHttpResponse(
            refusal_response(request, provider_name=idp.name if idp else provider_id, reason=reason)
        )

    def on_authentication_error(
        self,
        request: HttpRequest,
        provider: Any,
        error: str | None = None,
        exception: BaseException | None = None,
        extra_context: dict[str, Any] | None = None,
    ) -> None:
        context = extra_context or {}
        details: dict[str, Any] = {}
        if context.get("saml_errors"):
            reason = _saml_reason(str(context.get("saml_last_error_reason") or ""))
            details["errors"] = [str(e)[:40] for e in context["saml_errors"]][:5]
        elif "state_id" in context:
            # No sign-in of this browser's has that state: started elsewhere, or replayed.
            reason = "state"
        elif error == AuthError.CANCELLED or (exception is None and "error" in request.GET):
            reason = "refused_by_provider"
            # The provider's own error code (OAuth's "access_denied", "login_required"…).
            details["error"] = "".join(
                c for c in request.GET.get("error", "")[:40] if c.isalnum() or c == "_"
            )
        elif exception is None:
            reason = "invalid_response"
        else:
            reason = _exception_reason(exception)
            details["exception"] = type(exception).__name__
        provider_id = getattr(getattr(provider, "app", None), "provider_id", "") or getattr(
            provider, "id", ""
        )
        sso_refusal_record(request=request, provider_id=provider_id, reason=reason, details=details)
        name = getattr(provider, "name", "") or provider_id
        raise ImmediateHttpResponse(refusal_response(request, provider_name=name, reason=reason))

    def save_user(self, request: HttpRequest, sociallogin: SocialLogin, form: Any = None) -> Any:
        # The user, its addresses and the provider's identity are stored together or not at
        # all: a failure half-way leaves no account without its sign-in.
        with transaction.atomic():
            user = super().save_user(request, sociallogin, form)
        return user

    def populate_user(
        self, request: HttpRequest, sociallogin: SocialLogin, data: dict[str, Any]
    ) -> Any:
        user = super().populate_user(request, sociallogin, data)
        name = data.get("name") or " ".join(
            str(part) for part in (data.get("first_name"), data.get("last_name")) if part
        )
        if name:
            user.full_name = str(name)[:200]
        return user

    def validate_disconnect(self, account: Any, accounts: Any) -> None:
        # A person the provider disables must lose access here: an identity stays joined.
        raise ValidationError(
            "An identity provider joined to this account stays joined; ask an admin to remove it."
        )
