"""Fixtures that start the test identity providers once per session, and drive their pages.

    from tests.sso.fixtures import oidc_idp, saml_idp, use_providers  # noqa: F401

``oidc_idp``: allauth's OpenID Provider (tests/sso/oidc_idp.py) in a second Django process, with
the users and clients of ``OIDC_SPEC``. ``saml_idp``: the pysaml2 IdP (tests/sso/saml_idp.py) in
a process of its own, with the users of ``SAML_USERS``. ``use_providers(settings, ...)`` points
the app at them as an installation's SSO_PROVIDERS would.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "idp-password-123"
TOTP_CLAIMED = ["pwd", "otp", "mfa"]

# People at the OpenID Provider. "mfa": the provider signs them in with several factors.
OIDC_USERS = [
    {"email": "new.person@hospital.example", "first_name": "Nia", "last_name": "New"},
    {"email": "clinician@hospital.example", "mfa": True},
    {"email": "clinician2@hospital.example"},
    {"email": "admin@hospital.example", "mfa": True},
    {"email": "disabled@hospital.example", "active": False},
    {"email": "mallory@partner.example"},
]
# Clients of the provider, one per entry of the app's SSO_PROVIDERS (trust set there).
OIDC_CLIENTS = ["hospital", "partner", "tampered", "expired"]
# People at the SAML IdP: "refuse" is refused there, "expired" gets an assertion already over.
SAML_USERS = [
    {"email": "new.scholar@university.example", "uid": "u-new"},
    {"email": "clinician@university.example", "uid": "u-clin", "mfa": True},
    {"email": "clinician2@university.example", "uid": "u-clin2"},
    {"email": "refused@university.example", "uid": "u-refused", "refuse": True},
    {"email": "late@university.example", "uid": "u-late", "expired": True},
]


# The app's SAML entries (one IdP, trusted by "university", not by "college").
SAML_ORGS = ("university", "college")


def sp_entity_id(org: str) -> str:
    return f"https://review.test/sp/{org}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, process: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(url, timeout=5).status_code < 500:
                return
        except requests.RequestException:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            err = log.read_text(errors="replace") if log.exists() else ""
            raise RuntimeError(f"the test {what} did not start: {err[-2000:]}")
        time.sleep(0.2)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


# --- the OpenID Provider ----------------------------------------------------------------------
@dataclass
class OIDCProvider:
    base_url: str
    state: Path
    env: dict[str, str]

    @property
    def key_pem(self) -> str:
        return (self.state / "idp-key.pem").read_text()

    def setup(self, spec: dict[str, Any]) -> None:
        """Create or change users and clients (e.g. a client's back-channel logout URL)."""
        path = self.state / "spec.json"
        path.write_text(json.dumps(spec))
        done = subprocess.run(
            [sys.executable, "-m", "tests.sso.oidc_idp_setup", str(path)],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
        )
        if done.returncode:
            raise RuntimeError(f"the provider's set-up failed: {done.stderr.decode()[-2000:]}")


def oidc_spec(extra_redirects: list[str] | None = None) -> dict[str, Any]:
    clients = []
    for client in OIDC_CLIENTS:
        uris = [
            f"http://{host}/accounts/oidc/{client}/login/callback/"
            for host in ("testserver", "localhost", "127.0.0.1")
        ]
        clients.append({"id": client, "secret": f"secret-{client}", "redirect_uris": uris})
    users = [{"password": PASSWORD, **u} for u in OIDC_USERS]
    return {"users": users, "clients": clients}


@pytest.fixture(scope="session")
def oidc_idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OIDCProvider]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    state = tmp_path_factory.mktemp("oidc-idp")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (state / "idp-key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.sso.oidc_idp_settings",
        "SSO_IDP_STATE": str(state),
        "OAUTHLIB_INSECURE_TRANSPORT": "1",
        "PYTHONPATH": str(ROOT),
    }
    for name in ("DATABASE_URL", "DEBUG"):
        env.pop(name, None)
    port = free_port()
    idp = OIDCProvider(base_url=f"http://127.0.0.1:{port}", state=state, env=env)
    idp.setup(oidc_spec())
    # Its log goes to a file: runserver logs every request, and a pipe nobody reads fills up
    # and stops the server mid-suite.
    process = subprocess.Popen(
        [sys.executable, "-m", "django", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(state / "server.log").open("wb"),
        start_new_session=True,
    )
    try:
        _wait(
            f"{idp.base_url}/.well-known/openid-configuration",
            process,
            "OpenID Provider",
            state / "server.log",
        )
        yield idp
    finally:
        _stop(process)


# --- the SAML IdP -----------------------------------------------------------------------------
@dataclass
class SAMLProvider:
    base_url: str
    entity_id: str
    cert_pem: str
    state: Path


@pytest.fixture(scope="session")
def saml_idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SAMLProvider]:
    if shutil.which("xmlsec1") is None:
        pytest.skip("xmlsec1 is missing: run `make xmlsec` (apt-get install xmlsec1)")
    from tests.sso.saml_idp import make_key_and_cert

    state = tmp_path_factory.mktemp("saml-idp")
    make_key_and_cert(state)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    users = state / "users.json"
    users.write_text(json.dumps([{"password": PASSWORD, **u} for u in SAML_USERS]))
    (state / "sps.json").write_text(json.dumps([sp_entity_id(org) for org in SAML_ORGS]))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.sso.saml_idp", str(state), str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(state / "server.log").open("wb"),
        start_new_session=True,
    )
    try:
        _wait(f"{base}/metadata", process, "SAML IdP", state / "server.log")
        yield SAMLProvider(
            base_url=base,
            entity_id=f"{base}/metadata",
            cert_pem=(state / "idp-cert.pem").read_text(),
            state=state,
        )
    finally:
        _stop(process)


# --- the app's configuration ------------------------------------------------------------------
def provider_entries(
    oidc: OIDCProvider | None = None, saml: SAMLProvider | None = None
) -> list[dict[str, Any]]:
    """SSO_PROVIDERS as an IT team would write it for the test providers: "hospital" trusted for
    email and MFA, "partner" for neither, "tampered"/"expired" trusted (their tokens are bad);
    "university" (SAML) trusted for both, "college" (the same IdP) for neither."""
    entries: list[dict[str, Any]] = []
    if oidc is not None:
        for client, trusted in (
            ("hospital", True),
            ("partner", False),
            ("tampered", True),
            ("expired", True),
        ):
            entries.append(
                {
                    "id": client,
                    "protocol": "oidc",
                    "name": f"{client.title()} sign-in",
                    "server_url": oidc.base_url,
                    "client_id": client,
                    "client_secret_env": f"TEST_SSO_{client.upper()}_SECRET",
                    "trusted_for_email": trusted,
                    "trusted_for_mfa": trusted,
                }
            )
    if saml is not None:
        for org in SAML_ORGS:
            trusted = org == "university"
            entries.append(
                {
                    "id": org,
                    "protocol": "saml",
                    "name": f"{org.title()} SAML",
                    "entity_id": saml.entity_id,
                    "sso_url": f"{saml.base_url}/sso/redirect",
                    "x509cert": saml.cert_pem,
                    "sp_entity_id": sp_entity_id(org),
                    "trusted_for_email": trusted,
                    "trusted_for_mfa": trusted,
                }
            )
    return entries


def use_providers(settings: Any, entries: list[dict[str, Any]]) -> None:
    """Point the app at ``entries`` (pytest-django's ``settings`` undoes it after the test)."""
    from medalign_site.sso_config import identity_providers

    secrets = {f"TEST_SSO_{c.upper()}_SECRET": f"secret-{c}" for c in OIDC_CLIENTS}
    trust, providers, origins = identity_providers(json.dumps(entries), env=secrets, debug=True)
    settings.SSO_IDENTITY_PROVIDERS = trust
    settings.SOCIALACCOUNT_PROVIDERS = providers
    settings.CONTENT_SECURITY_POLICY = settings.CONTENT_SECURITY_POLICY.replace(
        "form-action 'self'", " ".join(["form-action 'self'", *origins])
    )


# --- driving the providers' pages as a browser would ------------------------------------------
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def oidc_sign_in(authorize_url: str, email: str, password: str = PASSWORD) -> str:
    """Sign in at the OpenID Provider from its authorization URL; the address it sends the
    browser back to (the app's callback, with a code or an error)."""
    browser = requests.Session()
    page = browser.get(authorize_url, timeout=30)
    token = _CSRF.search(page.text)
    assert token, f"no sign-in form at the provider: {page.status_code} {page.url}"
    answer = browser.post(
        page.url,
        data={"csrfmiddlewaretoken": token.group(1), "login": email, "password": password},
        headers={"Referer": page.url},
        allow_redirects=False,
        timeout=30,
    )
    provider = urlsplit(authorize_url).netloc
    for _ in range(10):
        location = answer.headers.get("Location", "")
        if answer.status_code not in (301, 302, 303) or not location:
            return ""  # the provider kept the browser (refused the sign-in on its own page)
        target = urljoin(answer.url, location)
        if urlsplit(target).netloc != provider:
            return target
        answer = browser.get(target, allow_redirects=False, timeout=30)
    raise AssertionError("the provider redirected in circles")


def oidc_start(client: Any, provider_id: str) -> str:
    """Press the provider's button on the app's sign-in page (a POST): the provider's
    authorization URL the app sends the browser to."""
    response = client.post(f"/accounts/oidc/{provider_id}/login/")
    assert response.status_code == 302, response.content[:300]
    return str(response["Location"])


def oidc_come_back(client: Any, url: str) -> Any:
    """The browser arriving back at the app's callback from the provider."""
    parts = urlsplit(url)
    assert parts.path.startswith("/accounts/oidc/"), url
    return client.get(parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()})


_FORM_FIELD = re.compile(r'name="(SAMLResponse|RelayState)" value="([^"]*)"')


def saml_sign_in(sso_url: str, email: str, password: str = PASSWORD) -> tuple[str, dict[str, str]]:
    """Sign in at the SAML IdP from the app's redirect to it; the ACS URL and the form fields
    (SAMLResponse, RelayState) the IdP's page posts there."""
    import html

    browser = requests.Session()
    page = browser.get(sso_url, timeout=30)
    fields = dict(re.findall(r'name="(SAMLRequest|RelayState)" value="([^"]*)"', page.text))
    answer = browser.post(
        urljoin(page.url, "/sso/login"),
        data={
            **{k: html.unescape(v) for k, v in fields.items()},
            "email": email,
            "password": password,
        },
        timeout=30,
    )
    action = re.search(r'action="([^"]+)"', answer.text)
    assert action, f"no form posting to the app: {answer.status_code} {answer.text[:3000]}"
    posted = {k: html.unescape(v) for k, v in _FORM_FIELD.findall(answer.text)}
    return html.unescape(action.group(1)), posted
