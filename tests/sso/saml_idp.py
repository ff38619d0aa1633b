"""The test SAML 2.0 identity provider: pysaml2's ``Server`` behind a small WSGI app, signing
with xmlsec1 (Debian's), run in a process of its own by tests/sso/fixtures.py:

    python -m tests.sso.saml_idp STATE_DIR PORT

- ``GET /sso/redirect``: the app's AuthnRequest (HTTP-Redirect binding); a sign-in form.
- ``POST /sso/login``: email and password; answers with the HTTP-POST binding's page (a form
  carrying the SAMLResponse to the app's ACS). A user marked "refuse" (or a wrong password)
  gets a Responder/AuthnFailed status; one marked "expired" an assertion that ran out half an
  hour ago; one marked "mfa" the REFEDS MFA authentication context, others password-only.
- ``GET /metadata``: its metadata.

STATE_DIR holds its key and certificate (``make_key_and_cert``), users.json, and sps.json (the
entity ids of the service providers it answers: pysaml2 looks each up in its metadata).
"""

import datetime
import html
import json
import sys
import traceback
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, make_server

MFA_CONTEXT = "https://refeds.org/profile/mfa"
PASSWORD_CONTEXT = "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"


def make_key_and_cert(state: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Test SAML IdP")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    (state / "idp-key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    (state / "idp-cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _sp_metadata(entity_id: str) -> str:
    # Only what pysaml2 looks up: the entity, and that it consumes assertions over HTTP-POST
    # (where to is read from each request).
    return (
        '<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" '
        f'entityID="{html.escape(entity_id)}"><md:SPSSODescriptor '
        'protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">'
        '<md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" '
        'Location="https://review.test/acs/" index="1"/>'
        "</md:SPSSODescriptor></md:EntityDescriptor>"
    )


def _server(state: Path, base: str, *, lifetime_minutes: int) -> Any:
    from saml2 import BINDING_HTTP_REDIRECT
    from saml2.config import IdPConfig
    from saml2.saml import NAME_FORMAT_URI
    from saml2.server import Server

    config = IdPConfig()
    config.load(
        {
            "entityid": f"{base}/metadata",
            "service": {
                "idp": {
                    "endpoints": {
                        "single_sign_on_service": [(f"{base}/sso/redirect", BINDING_HTTP_REDIRECT)]
                    },
                    "policy": {
                        "default": {
                            "lifetime": {"minutes": lifetime_minutes},
                            "attribute_restrictions": None,
                            "name_form": NAME_FORMAT_URI,
                        }
                    },
                    "want_authn_requests_signed": False,
                }
            },
            "key_file": str(state / "idp-key.pem"),
            "cert_file": str(state / "idp-cert.pem"),
            "xmlsec_binary": "/usr/bin/xmlsec1",
            "metadata": {
                "inline": [_sp_metadata(sp) for sp in json.loads((state / "sps.json").read_text())]
            },
        }
    )
    return Server(config=config)


class IdP:
    def __init__(self, state: Path, base: str) -> None:
        self.state = state
        self.base = base
        self.server = _server(state, base, lifetime_minutes=15)
        # Assertions that ran out before they were sent (the "expired" user's).
        self.late_server = _server(state, base, lifetime_minutes=-30)
        self.users = {u["email"]: u for u in json.loads((state / "users.json").read_text())}

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metadata":
            from saml2.metadata import create_metadata_string

            body = create_metadata_string(None, config=self.server.config, sign=False)
            return self._answer(start_response, body, "text/xml")
        if path == "/sso/redirect":
            query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
            fields = "".join(
                f'<input type="hidden" name="{k}" value="{html.escape(query.get(k, ""))}">'
                for k in ("SAMLRequest", "RelayState")
            )
            page = (
                f'<form method="post" action="/sso/login">{fields}'
                '<input name="email"><input name="password" type="password">'
                "<button>Sign in</button></form>"
            )
            return self._answer(start_response, page.encode(), "text/html")
        if path == "/sso/login":
            size = int(environ.get("CONTENT_LENGTH") or 0)
            form = {k: v[0] for k, v in parse_qs(environ["wsgi.input"].read(size).decode()).items()}
            try:
                page = self._login(form)
            except Exception:
                # Kept for the test that meets it (tests/sso/fixtures.py shows it).
                (self.state / "errors.log").write_text(traceback.format_exc())
                raise
            return self._answer(start_response, page.encode(), "text/html")
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found"]

    def _answer(self, start_response: Any, body: bytes | str, kind: str) -> list[bytes]:
        data = body.encode() if isinstance(body, str) else body
        start_response("200 OK", [("Content-Type", kind), ("Content-Length", str(len(data)))])
        return [data]

    def _login(self, form: dict[str, str]) -> str:
        from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
        from saml2.saml import NAMEID_FORMAT_PERSISTENT, NameID
        from saml2.samlp import STATUS_AUTHN_FAILED

        request = self.server.parse_authn_request(form["SAMLRequest"], BINDING_HTTP_REDIRECT)
        message = request.message
        acs = message.assertion_consumer_service_url
        sp = message.issuer.text
        relay = form.get("RelayState", "")
        user = self.users.get(form.get("email", ""))
        if user is None or user["password"] != form.get("password") or user.get("refuse"):
            response = self.server.create_error_response(
                message.id, acs, (STATUS_AUTHN_FAILED, "The identity provider refused the sign-in")
            )
        else:
            server = self.late_server if user.get("expired") else self.server
            response = server.create_authn_response(
                identity={"mail": [user["email"]], "givenName": ["Test"], "sn": ["Person"]},
                in_response_to=message.id,
                destination=acs,
                sp_entity_id=sp,
                name_id=NameID(format=NAMEID_FORMAT_PERSISTENT, text=user["uid"]),
                authn={
                    "class_ref": MFA_CONTEXT if user.get("mfa") else PASSWORD_CONTEXT,
                    "authn_auth": self.base,
                },
                sign_assertion=True,
                sign_response=True,
                sign_alg="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256",
                digest_alg="http://www.w3.org/2001/04/xmlenc#sha256",
            )
        http = self.server.apply_binding(
            BINDING_HTTP_POST, str(response), acs, relay, response=True
        )
        return str(http["data"])


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


if __name__ == "__main__":
    state, port = Path(sys.argv[1]), int(sys.argv[2])
    app = IdP(state, f"http://127.0.0.1:{port}")
    make_server("127.0.0.1", port, app, handler_class=_Quiet).serve_forever()
