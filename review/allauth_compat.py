"""Every name this project takes from allauth's ``internal`` modules, in one place.

allauth keeps these outside its public API, so a release may move or change them without
notice. Importing them here alone means an upgrade breaks one module, at import, with a clear
error, instead of failing somewhere deep in a sign-in; ``tests/review/test_allauth_compat.py``
checks each still behaves as this project relies on.

- ``ratelimit``: the rate limiter allauth's own MFA step uses (the app's second-factor step
  shares its counters across processes);
- ``get_client_ip``: the client address as allauth derives it (honouring its proxy settings),
  so the audit trail and allauth's rate limits agree;
- ``record_authentication``: marks a session as authenticated by a method, as allauth's own
  sign-in does;
- ``TOTP``, ``hotp_value``, ``format_hotp_value``, ``SECRET_SESSION_KEY``: TOTP enrolment and
  codes (the demo's enrolled accounts and ``demo_totp``);
- ``RecoveryCodes``: recovery codes for the demo's enrolled accounts;
- ``jwtkit``: fetching an OpenID provider's published signing key by the token's ``kid``
  (review.sso checks back-channel logout tokens and ID tokens with it).
"""

from allauth.account.internal.flows.login import record_authentication
from allauth.core.internal import ratelimit
from allauth.core.internal.httpkit import get_client_ip
from allauth.mfa.recovery_codes.internal.auth import RecoveryCodes
from allauth.mfa.totp.internal.auth import (
    SECRET_SESSION_KEY,
    TOTP,
    format_hotp_value,
    hotp_value,
)
from allauth.socialaccount.internal import jwtkit

__all__ = [
    "SECRET_SESSION_KEY",
    "TOTP",
    "RecoveryCodes",
    "format_hotp_value",
    "get_client_ip",
    "hotp_value",
    "jwtkit",
    "ratelimit",
    "record_authentication",
]
