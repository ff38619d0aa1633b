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
from django.core.exceptions import ImproperlyConfigured

from review.site import site_identity, site_url

# Encrypted values start with this marker, so a value stored before encryption was turned on
# (or by an older release) is recognised and re-encrypted by the data migration, never
# mistaken for ciphertext.
ENCRYPTED_PREFIX = "fernet:"


class AccountAdapter(DefaultAccountAdapter):
    """Project account adapter (hook point for signup rules)."""

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


class MFAAdapter(DefaultMFAAdapter):
    """TOTP secrets and recovery-code seeds encrypted at rest (Fernet, key from the environment).

    A database dump or an admin page alone then reveals no second factor.
    """

    def encrypt(self, text: str) -> str:
        return mfa_encrypt(text)

    def decrypt(self, encrypted_text: str) -> str:
        return mfa_decrypt(encrypted_text)
