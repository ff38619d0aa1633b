"""Single sign-on settings read from the environment: the identity providers an installation
trusts to say who someone is, and how far.

settings.py calls ``identity_providers`` once with the JSON of ``SSO_PROVIDERS`` (or the file
``SSO_PROVIDERS_FILE`` names). Each entry is checked strictly, as every other setting is: an
unknown key (a typo such as ``trusted_for_mfa `` would otherwise leave TOTP on without anyone
noticing, or off), a trust flag that is not a JSON boolean, a missing secret, or a plain-http
identity provider outside DEBUG stops start-up with ImproperlyConfigured naming the entry.

An entry says who the provider is (``id``, ``name``), how to reach it (OIDC: ``server_url``,
``client_id``, the name of the variable holding the secret; SAML: its metadata URL, or its
entity id, sign-in URL and certificate), and what the installation trusts it for:

- ``trusted_for_email``: its verified email addresses are believed, so a first sign-in may
  join an account that already has that address. Otherwise an address already in use is
  refused (taking over an account by asserting its email), and a new account's address is
  confirmed by email as after a local sign-up.
- ``trusted_for_mfa``: its assertion of a multi-factor sign-in (OIDC ``amr``/``acr``, SAML
  ``AuthnContextClassRef``, matched against ``mfa_amr``/``mfa_acr``/``mfa_contexts``) stands
  for the app's own TOTP step. Otherwise TOTP still asks after the provider signed someone in.

Nothing here grants access: approval, the signed DUA, roles and expiry stay the app's.
"""

import json
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

PROTOCOLS = ("oidc", "saml")
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
# RFC 8176: "mfa" is the value that means several factors were used.
DEFAULT_MFA_AMR = ["mfa"]
# REFEDS MFA profile (research and education federations) and Microsoft Entra's value.
DEFAULT_MFA_CONTEXTS = [
    "https://refeds.org/profile/mfa",
    "http://schemas.microsoft.com/claims/multipleauthn",
]
_COMMON = {
    "id",
    "protocol",
    "name",
    "trusted_for_email",
    "trusted_for_mfa",
    "origins",
}
_OIDC = _COMMON | {
    "server_url",
    "client_id",
    "client_secret_env",
    "mfa_amr",
    "mfa_acr",
    "scope",
}
_SAML = _COMMON | {
    "metadata_url",
    "entity_id",
    "sso_url",
    "slo_url",
    "x509cert",
    "x509cert_file",
    "sp_entity_id",
    "attribute_mapping",
    "mfa_contexts",
}
_LOOPBACK = {"localhost", "127.0.0.1", "::1"}


def _fail(index: int, entry: Mapping[str, Any], message: str) -> ImproperlyConfigured:
    name = entry.get("id") if isinstance(entry.get("id"), str) else f"#{index + 1}"
    return ImproperlyConfigured(f"SSO_PROVIDERS entry {name}: {message}")


def _flag(index: int, entry: Mapping[str, Any], key: str, default: bool = False) -> bool:
    value = entry.get(key, default)
    if not isinstance(value, bool):
        raise _fail(index, entry, f"{key} must be true or false (JSON), not {value!r}")
    return value


def _strings(index: int, entry: Mapping[str, Any], key: str, default: list[str]) -> list[str]:
    value = entry.get(key, default)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(index, entry, f"{key} must be a list of strings")
    return list(value)


def _url(index: int, entry: Mapping[str, Any], key: str, *, debug: bool) -> str:
    return _check_url(index, entry, key, entry.get(key), debug=debug)


def _check_url(index: int, entry: Mapping[str, Any], key: str, value: Any, *, debug: bool) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(index, entry, f"{key} is required")
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise _fail(index, entry, f"{key} is not an http(s) URL: {value!r}")
    # Plain http only for a provider on this machine in DEBUG (the test suite's): elsewhere its
    # answers and keys would travel unprotected.
    if parts.scheme == "http" and not (debug and parts.hostname in _LOOPBACK):
        raise _fail(index, entry, f"{key} must use https: {value!r}")
    return value


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _oidc(index: int, entry: Mapping[str, Any], env: Mapping[str, str], debug: bool) -> Any:
    server_url = _url(index, entry, "server_url", debug=debug)
    client_id = entry.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise _fail(index, entry, "client_id is required")
    secret_env = entry.get("client_secret_env")
    if not isinstance(secret_env, str) or not secret_env:
        raise _fail(index, entry, "client_secret_env (the variable holding the secret) is required")
    secret = env.get(secret_env, "")
    if not secret:
        raise _fail(index, entry, f"the variable {secret_env} (its client secret) is not set")
    scope = _strings(index, entry, "scope", ["openid", "profile", "email"])
    app = {
        "provider_id": entry["id"],
        "name": entry["name"],
        "client_id": client_id,
        "secret": secret,
        "settings": {
            "server_url": server_url,
            "oauth_pkce_enabled": True,
            "scope": scope,
        },
    }
    return app, [_origin(server_url)]


def _saml(index: int, entry: Mapping[str, Any], debug: bool) -> Any:
    entity_id = entry.get("entity_id")
    if not isinstance(entity_id, str) or not entity_id:
        raise _fail(index, entry, "entity_id (the identity provider's) is required")
    origins: list[str] = []
    if "metadata_url" in entry:
        metadata_url = _url(index, entry, "metadata_url", debug=debug)
        idp: dict[str, Any] = {"entity_id": entity_id, "metadata_url": metadata_url}
        origins.append(_origin(metadata_url))
    else:
        sso_url = _url(index, entry, "sso_url", debug=debug)
        cert = entry.get("x509cert")
        if "x509cert_file" in entry:
            try:
                with open(str(entry["x509cert_file"]), encoding="ascii") as handle:
                    cert = handle.read()
            except OSError as exc:
                raise _fail(index, entry, f"x509cert_file cannot be read: {exc}") from None
        if not isinstance(cert, str) or not cert.strip():
            raise _fail(
                index, entry, "x509cert or x509cert_file (its signing certificate) is required"
            )
        idp = {"entity_id": entity_id, "sso_url": sso_url, "x509cert": cert}
        origins.append(_origin(sso_url))
        if "slo_url" in entry:
            idp["slo_url"] = _url(index, entry, "slo_url", debug=debug)
    settings: dict[str, Any] = {
        "idp": idp,
        "advanced": {
            "strict": True,
            # An assertion must carry the provider's signature; an answer the app did not ask
            # for (IdP-initiated) is refused, so every answer matches a request of this browser.
            "want_assertion_signed": True,
            "reject_idp_initiated_sso": True,
            "reject_deprecated_algorithm": True,
        },
    }
    if "sp_entity_id" in entry:
        settings["sp"] = {"entity_id": str(entry["sp_entity_id"])}
    if "attribute_mapping" in entry:
        mapping = entry["attribute_mapping"]
        if not isinstance(mapping, dict):
            raise _fail(index, entry, "attribute_mapping must be an object")
        settings["attribute_mapping"] = mapping
    app = {
        "provider_id": entry["id"],
        "name": entry["name"],
        # allauth names SAML apps by an "organization slug" in their URLs: the id.
        "client_id": entry["id"],
        "settings": settings,
    }
    return app, origins


def identity_providers(
    raw: str, *, env: Mapping[str, str] | None = None, debug: bool = False
) -> tuple[dict[str, dict[str, Any]], dict[str, Any], list[str]]:
    """(SSO_IDENTITY_PROVIDERS, SOCIALACCOUNT_PROVIDERS, extra CSP form-action origins) from
    the JSON list ``raw``; empty for an empty ``raw`` (SSO off)."""
    env = os.environ if env is None else env
    trust: dict[str, dict[str, Any]] = {}
    oidc_apps: list[dict[str, Any]] = []
    saml_apps: list[dict[str, Any]] = []
    origins: list[str] = []
    if raw.strip():
        try:
            entries = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ImproperlyConfigured(f"SSO_PROVIDERS is not valid JSON: {exc.msg}") from None
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise ImproperlyConfigured("SSO_PROVIDERS must be a JSON list of objects")
        for index, entry in enumerate(entries):
            provider_id = entry.get("id")
            if not isinstance(provider_id, str) or not ID_PATTERN.match(provider_id):
                raise _fail(index, entry, "id must be 1-40 lower-case letters, digits or '-'")
            if provider_id in trust:
                raise _fail(index, entry, "id is used by an earlier entry")
            protocol = entry.get("protocol")
            if protocol not in PROTOCOLS:
                raise _fail(index, entry, f"protocol must be one of {', '.join(PROTOCOLS)}")
            unknown = set(entry) - (_OIDC if protocol == "oidc" else _SAML)
            if unknown:
                raise _fail(index, entry, f"unknown keys: {', '.join(sorted(unknown))}")
            if not isinstance(entry.get("name"), str) or not entry["name"].strip():
                raise _fail(index, entry, "name (shown on the sign-in button) is required")
            if protocol == "oidc":
                app, found = _oidc(index, entry, env, debug)
                oidc_apps.append(app)
            else:
                app, found = _saml(index, entry, debug)
                saml_apps.append(app)
            extra = _strings(index, entry, "origins", [])
            origins += found
            origins += [_origin(_check_url(index, entry, "origins", o, debug=debug)) for o in extra]
            trust[provider_id] = {
                "id": provider_id,
                "protocol": protocol,
                "name": entry["name"],
                "trusted_for_email": _flag(index, entry, "trusted_for_email"),
                "trusted_for_mfa": _flag(index, entry, "trusted_for_mfa"),
                "mfa_amr": _strings(index, entry, "mfa_amr", DEFAULT_MFA_AMR),
                "mfa_acr": _strings(index, entry, "mfa_acr", []),
                "mfa_contexts": _strings(index, entry, "mfa_contexts", DEFAULT_MFA_CONTEXTS),
            }
    providers = {
        "openid_connect": {"APPS": oidc_apps, "OAUTH_PKCE_ENABLED": True},
        # The app's SAML provider keeps the authentication context of each answer, which
        # allauth's drops (review.sso).
        "saml": {"APPS": saml_apps, "provider_class": "review.sso.SAMLProvider"},
    }
    return trust, providers, list(dict.fromkeys(origins))


def read_providers(env: Mapping[str, str]) -> str:
    """The JSON of SSO_PROVIDERS, or of the file SSO_PROVIDERS_FILE names (not both)."""
    inline, path = env.get("SSO_PROVIDERS", ""), env.get("SSO_PROVIDERS_FILE", "")
    if inline.strip() and path.strip():
        raise ImproperlyConfigured("set SSO_PROVIDERS or SSO_PROVIDERS_FILE, not both")
    if path.strip():
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        except OSError as exc:
            raise ImproperlyConfigured(f"SSO_PROVIDERS_FILE cannot be read: {exc}") from None
    return inline
