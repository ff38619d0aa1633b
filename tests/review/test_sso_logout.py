"""OpenID Connect Back-Channel Logout: a logout token the provider signed ends every session of
the person it names; anything else is refused with a 400 saying why, and ends nothing.

Tokens are made here with the test provider's own signing key (the provider's sending of them,
on a sign-out there, is driven in the browser: tests/e2e/test_sso_ui.py)."""

import time
import uuid

import jwt
import pytest
from allauth.core.internal import jwkkit
from allauth.socialaccount.models import SocialAccount
from cryptography.hazmat.primitives.asymmetric import rsa
from django.test import Client
from django.urls import reverse

from review.models import AuditEvent, Role
from tests import factories
from tests.sso.fixtures import (
    oidc_come_back,
    oidc_sign_in,
    oidc_start,
    provider_entries,
    use_providers,
)

pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("sso")]
EVENT = "http://schemas.openid.net/event/backchannel-logout"


@pytest.fixture(autouse=True)
def _providers(settings, oidc_idp):
    use_providers(settings, provider_entries(oidc_idp))


@pytest.fixture
def signed_in(oidc_idp):
    """Two browsers signed in as one clinician through the hospital's provider; its sub."""
    factories.make_user("clinician@hospital.example", roles=[Role.CLINICIAN])
    browsers = [Client(), Client()]
    for browser in browsers:
        url = oidc_sign_in(oidc_start(browser, "hospital"), "clinician@hospital.example")
        oidc_come_back(browser, url)
        assert browser.get(reverse("clinician_queue")).status_code == 200
    return browsers, SocialAccount.objects.get(provider="hospital").uid


def token(idp, *, key_pem: str | None = None, **claims) -> str:
    jwk, private_key = jwkkit.load_jwk_from_pem(idp.key_pem)
    if key_pem is not None:  # signed by someone else, naming the provider's key
        _, private_key = jwkkit.load_jwk_from_pem(key_pem)
    now = int(time.time())
    body = {
        "iss": idp.base_url,
        "aud": "hospital",
        "iat": now,
        "exp": now + 120,
        "jti": uuid.uuid4().hex,
        "events": {EVENT: {}},
        **claims,
    }
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode(body, private_key, algorithm="RS256", headers={"kid": jwk["kid"]})


def logout(provider: str, logout_token: str):
    url = reverse("sso_backchannel_logout", args=[provider])
    return Client().post(url, {"logout_token": logout_token})


def still_signed_in(browser: Client) -> bool:
    return browser.get(reverse("clinician_queue")).status_code == 200


def test_the_providers_logout_token_ends_every_session_of_that_person(oidc_idp, signed_in):
    browsers, sub = signed_in

    response = logout("hospital", token(oidc_idp, sub=sub))

    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    assert not any(still_signed_in(b) for b in browsers)
    event = AuditEvent.objects.get(action=AuditEvent.Action.SSO_LOGOUT)
    assert event.details == {"provider": "hospital", "accounts": 1, "by": "sub"}
    assert AuditEvent.objects.filter(action=AuditEvent.Action.SESSIONS_ENDED).exists()


def test_a_logout_token_naming_the_providers_session_id_ends_that_persons_sessions(
    oidc_idp, signed_in
):
    browsers, _sub = signed_in
    # A provider that puts its session id (sid) in ID tokens may name a sign-out by it alone.
    account = SocialAccount.objects.get(provider="hospital")
    account.extra_data["id_token"]["sid"] = "idp-session-7"
    account.save()

    response = logout("hospital", token(oidc_idp, sub=None, sid="idp-session-7"))

    assert response.status_code == 200
    assert not any(still_signed_in(b) for b in browsers)
    event = AuditEvent.objects.get(action=AuditEvent.Action.SSO_LOGOUT)
    assert event.details["by"] == "sid"


def _other_key() -> str:
    from cryptography.hazmat.primitives import serialization

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda idp, sub: token(idp, sub=sub, key_pem=_other_key()), "signature does not verify"),
        (
            lambda idp, sub: _tampered(token(idp, sub="someone-else"), sub),
            "signature does not verify",
        ),
        (lambda idp, sub: token(idp, sub=sub, aud="partner"), "invalid"),
        (lambda idp, sub: token(idp, sub=sub, iss="https://elsewhere.example"), "invalid"),
        (lambda idp, sub: token(idp, sub=sub, events=None), "invalid"),
        (lambda idp, sub: token(idp, sub=sub, events={"other": {}}), "no back-channel logout"),
        (lambda idp, sub: token(idp, sub=sub, nonce="n"), "carries no nonce"),
        (lambda idp, sub: token(idp, sub=None), "neither sub nor sid"),
        (lambda idp, sub: token(idp, sub=sub, exp=int(time.time()) - 600), "expired"),
        (lambda idp, sub: token(idp, sub=sub, iat=int(time.time()) - 3600, exp=None), "too old"),
        (lambda idp, sub: "not-a-jwt", "not a JWT"),
    ],
)
def test_a_bad_logout_token_ends_nothing_and_says_why(oidc_idp, signed_in, make, says):
    browsers, sub = signed_in

    response = logout("hospital", make(oidc_idp, sub))

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert says in response.json()["error_description"]
    assert all(still_signed_in(b) for b in browsers)
    refused = AuditEvent.objects.get(action=AuditEvent.Action.SSO_REFUSED)
    assert refused.details["reason"] == "logout_token_invalid"


def _tampered(good: str, sub: str) -> str:
    import base64
    import json

    header, payload, signature = good.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = sub
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return ".".join([header, forged, signature])


def test_a_logout_token_works_once(oidc_idp, signed_in):
    _browsers, sub = signed_in
    once = token(oidc_idp, sub=sub)
    assert logout("hospital", once).status_code == 200
    again = logout("hospital", once)
    assert again.status_code == 400 and "used before" in again.json()["error_description"]


def test_a_logout_token_for_an_unknown_provider_is_refused(oidc_idp, signed_in):
    browsers, sub = signed_in
    response = logout("elsewhere", token(oidc_idp, sub=sub))
    assert response.status_code == 400
    assert all(still_signed_in(b) for b in browsers)


def test_the_endpoint_takes_only_a_post():
    response = Client().get(reverse("sso_backchannel_logout", args=["hospital"]))
    assert response.status_code == 405
