"""Security review against OWASP ASVS level 2, where it applies, as tests.

CSRF on every state-changing URL (V4.2.2/V13.2.3), session fixation (V3.2.1), open redirects
(V5.1.5), uploads (V12.1/V12.2), CSP and clickjacking (V14.4), `check --deploy`, and no patient
text in logs, exports or error pages (V7.1.1, V8.3).
"""

import json
import logging
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.contrib.admindocs.views import extract_views_from_urlpatterns, simplify_regex
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import Resolver404, get_resolver, resolve, reverse

from review.forms.accounts import ApplicationForm
from review.models import Role
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
EVIL = "https://evil.example/phish"

# Views that take a POST without a CSRF token by design (allauth's headless API is not
# installed). A URL added here needs a reason.
CSRF_EXEMPT_BY_DESIGN: set[str] = {
    # Posted by an identity provider, not by a browser holding the app's cookie: the OIDC
    # back-channel logout carries a token the provider signed (tests/review/test_sso_logout.py);
    # allauth's SAML ACS and single logout take the IdP's signed messages, and the ACS only
    # stashes what was posted for a GET of the app's own (SameSite cookies are not sent on a
    # cross-site POST), where the signature and the request it answers are checked.
    "/accounts/oidc/1/backchannel-logout/",
    "/accounts/saml/1/acs/",
    "/accounts/saml/1/sls/",
}


def all_url_paths() -> list[str]:
    """Every URL pattern, as a concrete path (each parameter filled with 1)."""
    paths = set()
    for _view, regex, _namespace, _name in extract_views_from_urlpatterns(
        get_resolver().url_patterns
    ):
        path = simplify_regex(regex)
        path = re.sub(r"<[^>]+>", "1", path)
        paths.add(path)
    return sorted(paths)


@pytest.fixture
def admin(db):
    return factories.make_user(
        "sec-admin@example.edu", roles=[Role.ADMIN, Role.CLINICIAN, Role.RESEARCHER]
    )


@pytest.fixture
def record(db):
    dataset = review_data.make_dataset("sec")
    patient = review_data.make_record(dataset, "P-SEC-1", n_events=40)
    instruction = review_data.make_instruction(dataset, patient, "I-SEC-1")
    return dataset, patient, instruction


# --- CSRF ----------------------------------------------------------------------------------
def test_every_url_refuses_a_post_without_a_csrf_token(admin):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    checked, accepted = 0, []
    for path in all_url_paths():
        try:
            resolve(path)
        except Resolver404:
            continue
        if path in CSRF_EXEMPT_BY_DESIGN:
            continue
        response = client.post(path, {"x": "1"})
        checked += 1
        if response.status_code not in (403, 405):
            accepted.append(f"{path}: {response.status_code}")
    assert checked > 40, f"only {checked} URLs checked: the walk is broken"
    assert not accepted, "POST without a CSRF token was not refused:\n" + "\n".join(accepted)


def test_json_endpoints_refuse_a_post_without_a_csrf_token(admin, record):
    from review.services.reviews import review_get_or_start

    review = review_get_or_start(assignment=review_data.assign(record[2], admin))
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    for name in ("review_save", "review_submit"):
        response = client.post(
            reverse(name, args=[review.pk]), data="{}", content_type="application/json"
        )
        assert response.status_code == 403


# --- sessions --------------------------------------------------------------------------------
def test_the_session_key_rotates_at_sign_in(db):
    user = factories.make_user("fix@example.edu", roles=[Role.CLINICIAN])
    client = Client()
    session = client.session  # an attacker-planted pre-login session
    session["planted"] = True
    session.save()
    client.cookies["sessionid"] = session.session_key
    planted = session.session_key
    response = client.post(
        reverse("account_login"), {"login": user.email, "password": factories.PASSWORD}
    )
    assert response.status_code == 302
    response = client.post(reverse("mfa_authenticate"), {"code": factories.totp_code_fresh()})
    assert response.status_code == 302
    assert client.session.get("_auth_user_id") == str(user.pk)
    assert client.cookies["sessionid"].value != planted


def test_session_cookies_are_httponly_and_secure_when_debug_is_off(settings):
    assert settings.SESSION_COOKIE_HTTPONLY
    assert settings.SESSION_COOKIE_SAMESITE in ("Lax", "Strict")
    out = _deploy_env_python(
        "from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.X_FRAME_OPTIONS)"
    )
    assert out.split() == ["True", "True", "DENY"]


# --- open redirects ----------------------------------------------------------------------------
def test_sign_in_ignores_an_offsite_next(db):
    user = factories.make_user("redir@example.edu", roles=[Role.CLINICIAN])
    client = Client()
    client.post(
        reverse("account_login") + f"?next={EVIL}",
        {"login": user.email, "password": factories.PASSWORD, "next": EVIL},
    )
    response = client.post(
        reverse("mfa_authenticate") + f"?next={EVIL}",
        {"code": factories.totp_code_fresh(), "next": EVIL},
    )
    assert response.status_code == 302
    assert "evil.example" not in response["Location"]


@pytest.mark.parametrize(
    "target", [EVIL, "//evil.example/", "/\\evil.example", "https:evil.example"]
)
def test_sign_out_ignores_an_offsite_next(db, target):
    user = factories.make_user("out@example.edu", roles=[Role.CLINICIAN])
    client = Client()
    client.force_login(user)
    response = client.post(reverse("account_logout") + f"?next={target}", {"next": target})
    assert response.status_code == 302
    assert "evil.example" not in response["Location"]


def test_next_review_ignores_a_foreign_after(admin):
    client = Client()
    client.force_login(admin)
    response = client.get(reverse("clinician_next") + "?after=https://evil.example")
    assert response.status_code == 302
    assert "evil.example" not in response["Location"]


# --- uploads ----------------------------------------------------------------------------------
def _form(file: SimpleUploadedFile) -> ApplicationForm:
    return ApplicationForm(data={}, files={"certificate": file})


@pytest.mark.parametrize(
    "name, content",
    [
        ("certificate.pdf", b"<html><script>alert(1)</script></html>"),
        ("certificate.pdf", b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>"),
        ("certificate.png", b"MZ\x90\x00" + b"\x00" * 64),
        ("../../etc/passwd.pdf", b"GIF89a" + b"\x00" * 20),
    ],
)
def test_uploads_are_checked_by_content_not_name(name, content):
    form = _form(SimpleUploadedFile(name, content, content_type="application/pdf"))
    form.is_valid()
    assert "certificate" in form.errors


def test_uploads_over_the_limit_are_refused(settings):
    settings.MAX_UPLOAD_BYTES = 2048
    form = _form(SimpleUploadedFile("c.pdf", factories.PDF_BYTES + b" " * 4096))
    form.is_valid()
    assert "larger than" in str(form.errors["certificate"])


def test_certificates_are_private_and_admin_only(settings, tmp_path):
    applicant = factories.make_user("upload@example.edu")
    application = factories.make_application(applicant)
    stored = Path(application.certificate.path).resolve()
    assert stored.is_relative_to(Path(settings.PRIVATE_STORAGE_ROOT).resolve())
    assert not stored.is_relative_to(Path(settings.STATIC_ROOT).resolve())
    assert ".." not in application.certificate.name
    url = reverse("admin_application_certificate", args=[application.pk])
    other = Client()
    other.force_login(factories.make_user("nosy@example.edu", roles=[Role.CLINICIAN]))
    assert other.get(url).status_code in (403, 404)
    admin_client = Client()
    admin_client.force_login(factories.make_user("adm2@example.edu", roles=[Role.ADMIN]))
    response = admin_client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "no-store" in response["Cache-Control"]


# --- headers: CSP and clickjacking --------------------------------------------------------------
def test_csp_and_frame_headers_when_debug_is_off(client, settings):
    settings.DEBUG = False
    response = client.get(reverse("account_login"))
    csp = response["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "object-src 'none'" in csp
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


def _deploy_env_python(code: str) -> str:
    env = {
        **os.environ,
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(48),
        "MFA_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "ALLOWED_HOSTS": "review.example.org",
        "DJANGO_SETTINGS_MODULE": "medalign_site.settings",
    }
    env.pop("SECURE_SSL_REDIRECT", None)
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); " + code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_check_deploy_is_clean():
    out = _deploy_env_python(
        "from django.core.management import call_command; "
        "call_command('check', '--deploy', '--fail-level', 'WARNING'); print('CLEAN')"
    )
    assert "CLEAN" in out


# --- no patient text in error pages, logs or exports ---------------------------------------------
def test_a_500_shows_and_logs_no_patient_text(settings, monkeypatch, caplog, record):
    settings.DEBUG = False
    _, patient, instruction = record
    clinician = factories.make_user("crash@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    secret = review_data.NOTE_TEXT

    def boom(*args, **kwargs):
        # The worst case: an exception whose message quotes the record (as a database error's
        # DETAIL or a parser's message can).
        raise ValueError(f"could not rank note: {secret}")

    monkeypatch.setattr("review.selectors.records.record_excerpt", boom)
    client = Client(raise_request_exception=False)
    client.force_login(clinician)
    with caplog.at_level(logging.INFO):
        response = client.get(reverse("record_excerpt", args=[instruction.pk]))
    assert response.status_code == 500
    assert secret not in response.content.decode()
    assert "Traceback" not in response.content.decode()
    assert response["Content-Type"].startswith("application/json")
    # Format what was logged with the handlers the settings configure (what reaches the logs).
    formatters = [h.formatter for h in logging.getLogger().handlers if h.formatter] or [
        logging.Formatter()
    ]
    logged = "\n".join(f.format(r) for r in caplog.records for f in formatters)
    assert "Internal Server Error" in logged  # the error itself is logged...
    assert "ValueError" in logged
    assert "<message redacted" in logged  # ...without its message, which may quote a record
    assert "shortness of breath" not in logged


def test_searches_and_the_audit_export_hold_no_patient_text(settings, record, caplog):
    _, patient, instruction = record
    clinician = factories.make_user("search@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    client = Client()
    client.force_login(clinician)
    query = "pericardial effusion"
    with caplog.at_level(logging.DEBUG):
        assert client.get(reverse("clinician_review", args=[instruction.pk])).status_code == 200
        response = client.post(
            reverse("record_search", args=[instruction.pk]),
            json.dumps({"q": query}),
            content_type="application/json",
        )
        assert response.status_code == 200 and "pericardial" in response.json()["html"].lower()
        # The terms never travel in a URL, where proxies and servers log them.
        get = client.get(reverse("record_search", args=[instruction.pk]), {"q": query})
        assert get.status_code == 405
    assert query not in caplog.text and "shortness of breath" not in caplog.text
    admin = Client()
    admin.force_login(factories.make_user("audit-admin@example.edu", roles=[Role.ADMIN]))
    export = admin.get(reverse("audit_log_csv"))
    assert export.status_code == 200
    body = b"".join(export.streaming_content) if export.streaming else export.content
    text = body.decode()
    assert "record_searched" in text.lower() or "search" in text.lower()
    assert query not in text and "shortness of breath" not in text.lower()
