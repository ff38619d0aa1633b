"""Identity providers: what an installation trusts each one for, and the second-factor rule.

SSO proves who someone is; the DUA grants access. A provider named in SSO_PROVIDERS
(medalign_site/sso_config.py) signs people in through allauth's OpenID Connect and SAML
providers; approval, the signed DUA, roles and expiry stay the app's (review.access).

The second factor is the app's TOTP unless the provider that signed this session in is one the
installation marked ``trusted_for_mfa`` *and* it asserted a multi-factor sign-in this time: an
OIDC ID token's ``amr`` (or ``acr``) among the values configured for it, a SAML assertion's
``AuthnContextClassRef`` among its contexts. Only the ID token's claims count (its signature is
checked, review.views.sso), never the userinfo answer. Then ``AuthenticateStage`` records the
provider's second factor in the session (``review.access.IDP_SECOND_FACTOR``) instead of
asking for TOTP; in every other case allauth's TOTP step runs as after a password.
"""

import time
from dataclasses import dataclass
from typing import Any

import jwt
from allauth.account.models import Login
from allauth.mfa.stages import AuthenticateStage as AllauthAuthenticateStage
from allauth.socialaccount.adapter import get_adapter
from allauth.socialaccount.models import SocialLogin
from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter
from allauth.socialaccount.providers.saml.provider import SAMLProvider as AllauthSAMLProvider
from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest

from review.access import IDP_SECOND_FACTOR
from review.allauth_compat import jwtkit, record_authentication

# Where the SAML provider keeps an answer's authentication contexts, beside the attributes
# (SAML attribute names are URIs or OIDs: this key is none of them, and is written last).
AUTHN_CONTEXTS_KEY = "_authn_context_class_refs"


@dataclass(frozen=True)
class IdentityProvider:
    id: str
    protocol: str
    name: str
    trusted_for_email: bool
    trusted_for_mfa: bool
    mfa_amr: tuple[str, ...]
    mfa_acr: tuple[str, ...]
    mfa_contexts: tuple[str, ...]


def identity_provider(provider_id: str) -> IdentityProvider | None:
    """The configured provider with this id, or None (never configured, or since removed)."""
    entry = settings.SSO_IDENTITY_PROVIDERS.get(provider_id)
    if entry is None:
        return None
    return IdentityProvider(
        id=entry["id"],
        protocol=entry["protocol"],
        name=entry["name"],
        trusted_for_email=entry["trusted_for_email"],
        trusted_for_mfa=entry["trusted_for_mfa"],
        mfa_amr=tuple(entry["mfa_amr"]),
        mfa_acr=tuple(entry["mfa_acr"]),
        mfa_contexts=tuple(entry["mfa_contexts"]),
    )


def identity_providers() -> list[IdentityProvider]:
    found = (identity_provider(pid) for pid in settings.SSO_IDENTITY_PROVIDERS)
    return [idp for idp in found if idp is not None]


def mfa_asserted(idp: IdentityProvider, extra_data: dict[str, Any]) -> list[str]:
    """The values in this sign-in's answer that mean "several factors were used", by the
    provider's configured list; empty when it asserted none."""
    if idp.protocol == "oidc":
        claims = extra_data.get("id_token")
        if not isinstance(claims, dict):
            return []
        amr = claims.get("amr")
        found = (
            [v for v in amr if isinstance(v, str) and v in idp.mfa_amr]
            if isinstance(amr, list)
            else []
        )
        acr = claims.get("acr")
        if isinstance(acr, str) and acr in idp.mfa_acr:
            found.append(acr)
        return found
    contexts = extra_data.get(AUTHN_CONTEXTS_KEY)
    if not isinstance(contexts, list):
        return []
    return [c for c in contexts if isinstance(c, str) and c in idp.mfa_contexts]


def sign_in_facts(sociallogin: SocialLogin) -> tuple[IdentityProvider | None, list[str]]:
    """The provider of a sign-in and what it asserted of multi-factor sign-in."""
    idp = identity_provider(sociallogin.account.provider)
    if idp is None:
        return None, []
    return idp, mfa_asserted(idp, sociallogin.account.extra_data or {})


def idp_second_factor(login: Login) -> tuple[IdentityProvider, list[str]] | None:
    """The provider and its assertion when they stand for the second factor of this sign-in:
    a provider trusted for it that asserted multi-factor sign-in. None otherwise (a password
    sign-in, an untrusted provider, or no assertion this time)."""
    sociallogin = (login.signal_kwargs or {}).get("sociallogin")
    if not isinstance(sociallogin, SocialLogin):
        return None
    idp, asserted = sign_in_facts(sociallogin)
    if idp is None or not idp.trusted_for_mfa or not asserted:
        return None
    return idp, asserted


class AuthenticateStage(AllauthAuthenticateStage):  # type: ignore[misc]
    """allauth's TOTP step of sign-in, skipped only where the provider's multi-factor
    assertion stands for it; the session then records that second factor instead."""

    def handle(self) -> tuple[Any, bool]:
        found = idp_second_factor(self.login)
        if found is None:
            result: tuple[Any, bool] = super().handle()
            return result
        idp, asserted = found
        record_authentication(
            self.request,
            self.login.user,
            "mfa",
            type=IDP_SECOND_FACTOR,
            provider=idp.id,
            asserted=asserted,
        )
        return None, True


class SAMLProvider(AllauthSAMLProvider):  # type: ignore[misc]
    """allauth's SAML provider, keeping each answer's AuthnContextClassRef (allauth keeps the
    attributes only): the second-factor rule reads it."""

    # allauth finds a provider's URLs by its package: allauth's own SAML URLs.
    package = "allauth.socialaccount.providers.saml"

    def extract_extra_data(self, data: Any) -> dict[str, Any]:
        extra = dict(super().extract_extra_data(data))
        extra[AUTHN_CONTEXTS_KEY] = [str(c) for c in (data.get_last_authn_contexts() or [])]
        return extra


# --- back-channel logout tokens (OpenID Connect Back-Channel Logout 1.0, section 2.6) --------
BACKCHANNEL_LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"
# A logout token older than this is refused (the spec leaves the bound to the relying party):
# a token captured on the way can then not be replayed later, even after its jti is forgotten.
LOGOUT_TOKEN_MAX_AGE = 10 * 60
_ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


class LogoutTokenInvalid(Exception):
    """A logout token that does not verify; the message says why, for the provider's logs."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


def logout_token_claims(request: HttpRequest, idp: IdentityProvider, token: str) -> dict[str, Any]:
    """The claims of a logout token the provider signed for this app, or LogoutTokenInvalid.

    Checked: the signature by a key of the provider's published set (an asymmetric algorithm
    only: "none" and shared-secret ones are refused), issuer, audience (this app's client id),
    issued-at within LOGOUT_TOKEN_MAX_AGE, the back-channel logout event, a ``sub`` or ``sid``,
    no ``nonce`` (an ID token is not a logout token), and a ``jti`` never seen before.
    """
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise LogoutTokenInvalid("the logout token is not a JWT", code="malformed") from None
    if header.get("alg") not in _ASYMMETRIC or not header.get("kid"):
        raise LogoutTokenInvalid("the logout token is not signed with a published key", code="alg")
    oidc = OpenIDConnectOAuth2Adapter(request, idp.id)
    app = get_adapter().get_app(request, provider=idp.id)
    try:
        config = oidc.openid_config
        alg, key = jwtkit.fetch_key(token, config["jwks_uri"], jwtkit.lookup_kid_jwk)
        claims: dict[str, Any] = jwt.decode(
            token,
            key=key,
            algorithms=[alg],
            audience=app.client_id,
            issuer=config["issuer"],
            options={"require": ["iss", "aud", "iat", "jti", "events"]},
            leeway=60,
        )
    except jwt.ExpiredSignatureError:
        raise LogoutTokenInvalid("the logout token has expired", code="expired") from None
    except jwt.InvalidSignatureError:
        raise LogoutTokenInvalid(
            "the logout token's signature does not verify", code="signature"
        ) from None
    except jwt.PyJWTError as exc:
        raise LogoutTokenInvalid(
            f"the logout token is invalid ({type(exc).__name__})", code="invalid"
        ) from None
    except Exception as exc:  # the provider's keys could not be had: its answer, its network
        raise LogoutTokenInvalid(
            f"the provider's keys could not be read ({type(exc).__name__})", code="keys"
        ) from None
    events = claims.get("events")
    if not isinstance(events, dict) or not isinstance(events.get(BACKCHANNEL_LOGOUT_EVENT), dict):
        raise LogoutTokenInvalid("the token carries no back-channel logout event", code="event")
    if "nonce" in claims:
        raise LogoutTokenInvalid("a logout token carries no nonce", code="nonce")
    if not (isinstance(claims.get("sub"), str) and claims["sub"]) and not (
        isinstance(claims.get("sid"), str) and claims["sid"]
    ):
        raise LogoutTokenInvalid("the logout token names neither sub nor sid", code="subject")
    if (
        not isinstance(claims.get("iat"), int | float)
        or time.time() - claims["iat"] > LOGOUT_TOKEN_MAX_AGE
    ):
        raise LogoutTokenInvalid("the logout token is too old", code="expired")
    if not cache.add(f"sso:logout-jti:{idp.id}:{claims['jti']}", 1, LOGOUT_TOKEN_MAX_AGE + 120):
        raise LogoutTokenInvalid("the logout token was used before", code="replayed")
    return claims


# --- break-glass: an operator's one-time password sign-in while local passwords are off ------
BREAK_GLASS_SESSION_KEY = "sso_break_glass"


def break_glass_email(request: HttpRequest) -> str:
    """The address this session may sign in with a password although LOCAL_PASSWORDS is off
    (an operator's break-glass link opened in it, not yet run out), else ""."""
    session = getattr(request, "session", None)
    if session is None:
        return ""
    entry = session.get(BREAK_GLASS_SESSION_KEY)
    if not isinstance(entry, dict) or float(entry.get("until", 0)) < time.time():
        return ""
    return str(entry.get("email", "")).lower()


def local_password_allowed(request: HttpRequest, email: str) -> bool:
    return bool(settings.LOCAL_PASSWORDS) or (
        bool(email) and email.strip().lower() == break_glass_email(request)
    )


class SignedIDTokenAdapter(OpenIDConnectOAuth2Adapter):  # type: ignore[misc]
    """allauth's OpenID Connect adapter, checking the ID token's signature always.

    allauth skips it for a token fetched from the token endpoint (OIDC Core allows that over
    TLS). The app checks it anyway: the second-factor rule and the account an email joins rest
    on the token's claims, and a proxy that terminates TLS, or a misconfigured http endpoint,
    could change them unseen.
    """

    def _decode_id_token(self, app: Any, id_token: str) -> dict[str, Any]:
        claims: dict[str, Any] = jwtkit.verify_and_decode(
            credential=id_token,
            keys_url=self.openid_config["jwks_uri"],
            issuer=self.openid_config["issuer"],
            audience=app.client_id,
            lookup_kid=jwtkit.lookup_kid_jwk,
            verify_signature=True,
        )
        return claims
