"""allauth adapters: the project's hooks into sign-up and second-factor storage."""

import base64
import hashlib
from functools import cache
from typing import Any

from allauth.account.adapter import DefaultAccountAdapter
from allauth.core import context as allauth_context
from allauth.mfa.adapter import DefaultMFAAdapter
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.http import HttpRequest

from review.models import AuditEvent
from review.second_factor import lockout_seconds, wait_text
from review.services.audit import audit_record
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
