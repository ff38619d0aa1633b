import os
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from review.access import user_access
from review.models import AuditEvent, User
from tests import factories

pytestmark = pytest.mark.django_db


def run(tmp_path, monkeypatch, email="ops@hospital.example.org", name="Olga Operator", typed=None):
    cert = tmp_path / "cert.pdf"
    cert.write_bytes(factories.PDF_BYTES)
    monkeypatch.setattr("getpass.getpass", lambda prompt: "a-long-operator-password")
    monkeypatch.setattr("builtins.input", lambda prompt: typed or name)
    today = timezone.localdate()
    call_command(
        "bootstrap_admin",
        email,
        "--full-name",
        name,
        "--institution",
        "Hospital",
        "--certificate",
        str(cert),
        "--certificate-completed",
        str(today - timedelta(days=10)),
        "--certificate-expires",
        str(today + timedelta(days=700)),
    )


def test_it_creates_the_first_admin_and_then_refuses(tmp_path, monkeypatch) -> None:
    run(tmp_path, monkeypatch)
    user = User.objects.get(email="ops@hospital.example.org")
    access = user_access(user)
    assert access.is_admin and access.needs_mfa  # TOTP is still required at first sign-in
    assert user.check_password("a-long-operator-password")
    assert AuditEvent.objects.filter(action=AuditEvent.Action.APPLICATION_DECISION).exists()
    with pytest.raises(CommandError, match="an approved admin exists"):
        run(tmp_path, monkeypatch, email="second@hospital.example.org")


def test_a_signature_that_does_not_match_is_refused(tmp_path, monkeypatch) -> None:
    with pytest.raises(CommandError, match="signature must match"):
        run(tmp_path, monkeypatch, name="Olga Operator", typed="Someone Else")
    assert not User.objects.filter(email="ops@hospital.example.org").exists()


def test_a_certificate_the_user_cannot_read_is_refused_before_anything_is_made(
    tmp_path, monkeypatch
) -> None:
    # Tests run as root, who reads every file: the check's answer is what is replaced.
    real_access = os.access
    monkeypatch.setattr(
        "os.access",
        lambda path, mode: False if str(path).endswith("cert.pdf") else real_access(path, mode),
    )
    with pytest.raises(CommandError, match="cannot be read by this user"):
        run(tmp_path, monkeypatch)
    assert not User.objects.filter(email="ops@hospital.example.org").exists()
