"""The test OpenID Provider's own code: URLs, the claims it adds, what it does wrong on purpose,
and its back-channel logout.

- A user in the group "mfa" signed in with several factors: the ID token says so (``amr``).
- Client "expired" gets ID tokens that expired an hour before they were issued (signed).
- Client "tampered" gets ID tokens changed after signing (``amr`` added, signature kept), as a
  proxy between the two could.
- On sign-out at the provider, every client with a ``backchannel_logout_uri`` in its data gets a
  signed logout token (OpenID Connect Back-Channel Logout 1.0).

``python -m tests.sso.oidc_idp_setup SPEC.json`` (with DJANGO_SETTINGS_MODULE and SSO_IDP_STATE
set) migrates and creates the users and clients SPEC lists; runserver serves it.
"""

import base64
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import jwt
import requests
from allauth.core.internal import jwkkit
from allauth.idp.oidc.adapter import DefaultOIDCAdapter, get_adapter
from allauth.idp.oidc.models import Client
from django.http import HttpRequest, HttpResponse
from django.urls import include, path

urlpatterns = [
    path("", include("allauth.idp.urls")),
    path("accounts/", include("allauth.urls")),
]

BACKCHANNEL_LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"


def _sign(claims: dict[str, Any]) -> str:
    jwk, private_key = jwkkit.load_jwk_from_pem(get_adapter().get_signing_key().pem)
    return jwt.encode(claims, private_key, algorithm="RS256", headers={"kid": jwk["kid"]})


def logout_token(*, issuer: str, client_id: str, sub: str, **extra: Any) -> str:
    now = int(time.time())
    claims = {
        "iss": issuer,
        "aud": client_id,
        "iat": now,
        "exp": now + 120,
        "jti": uuid.uuid4().hex,
        "sub": sub,
        "events": {BACKCHANNEL_LOGOUT_EVENT: {}},
        **extra,
    }
    return _sign(claims)


def on_logout(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    if user is None or request is None:
        return
    issuer = request.build_absolute_uri("/").rstrip("/")
    for client in Client.objects.all():
        uri = (client.data or {}).get("backchannel_logout_uri")
        if uri:
            token = logout_token(issuer=issuer, client_id=client.id, sub=str(user.pk))
            requests.post(uri, data={"logout_token": token}, timeout=10)


class Adapter(DefaultOIDCAdapter):  # type: ignore[misc]
    def get_claims(
        self, purpose: str, user: Any, client: Any, scopes: Any, email: Any = None, **kw: Any
    ) -> dict[str, Any]:
        claims: dict[str, Any] = super().get_claims(
            purpose, user, client, scopes, email=email, **kw
        )
        if purpose == "id_token" and user.groups.filter(name="mfa").exists():
            claims["amr"] = ["pwd", "otp", "mfa"]
        return claims

    def populate_id_token(
        self, id_token: dict[str, Any], client: Any, scopes: Any, **kw: Any
    ) -> None:
        if client.id == "expired":
            id_token["exp"] = id_token["iat"] - 3600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _client_id(request: HttpRequest) -> str:
    if request.POST.get("client_id"):
        return request.POST["client_id"]
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Basic "):
        return base64.b64decode(auth[6:]).decode().split(":", 1)[0]
    return ""


class TamperingMiddleware:
    """Changes the ID tokens of client "tampered" after they were signed."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        tamper = request.path.endswith("/api/token") and _client_id(request) == "tampered"
        response = self.get_response(request)
        if tamper and response.status_code == 200:
            data = json.loads(response.content)
            header, payload, signature = data["id_token"].split(".")
            claims = json.loads(_unb64(payload))
            claims["amr"] = ["pwd", "mfa"]
            data["id_token"] = ".".join([header, _b64(json.dumps(claims).encode()), signature])
            response.content = json.dumps(data).encode()
        return response
