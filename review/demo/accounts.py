"""Approved demo accounts with enrolled TOTP, for `load_demo` (idempotent).

Each account is real: a verified email address, a signed DUA, an approved application with a
synthetic certificate, and an allauth TOTP authenticator (plus recovery codes) whose secret is
fixed and printed, so the demo is usable within a minute without switching MFA off.
"""

import base64
import hashlib
from dataclasses import dataclass
from datetime import timedelta

from allauth.account.models import EmailAddress
from allauth.mfa.models import Authenticator
from allauth.mfa.utils import decrypt
from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone

from review.access import user_access
from review.allauth_compat import TOTP, RecoveryCodes
from review.models import AccessApplication, DUAVersion, Role, User
from review.services.accounts import (
    ApplicationDetails,
    application_approve,
    application_submit,
    dua_sign,
)

DEMO_DOMAIN = "demo.medalign.local"
DEMO_PASSWORD = "medalign-demo-2024"  # noqa: S105 - printed on purpose; synthetic data only


def _synthetic_certificate() -> bytes:
    """A one-page blank PDF (pypdf): the demo's "training certificate", readable as one."""
    import io

    import pypdf

    writer = pypdf.PdfWriter()
    writer.add_blank_page(width=200, height=100)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


SYNTHETIC_CERTIFICATE = _synthetic_certificate()


@dataclass(frozen=True)
class DemoAccount:
    email: str
    full_name: str
    roles: tuple[str, ...]
    specialty: str = ""


DEMO_ACCOUNTS = (
    DemoAccount(f"admin@{DEMO_DOMAIN}", "Ada Admin", (Role.ADMIN, Role.CLINICIAN, Role.RESEARCHER)),
    DemoAccount(
        f"clinician1@{DEMO_DOMAIN}", "Casey Clinician", (Role.CLINICIAN,), "Internal medicine"
    ),
    DemoAccount(f"clinician2@{DEMO_DOMAIN}", "Jordan Clinician", (Role.CLINICIAN,), "Oncology"),
    DemoAccount(f"researcher@{DEMO_DOMAIN}", "Riley Researcher", (Role.RESEARCHER,)),
)


def demo_totp_secret(email: str) -> str:
    """A fixed base32 TOTP secret per demo account (32 characters, 160 bits)."""
    digest = hashlib.sha1(f"medalign-demo-totp:{email}".encode(), usedforsecurity=False).digest()
    return base64.b32encode(digest).decode("ascii")


def demo_accounts() -> list[str]:
    """Create (or complete) the demo accounts; return the lines `load_demo` prints."""
    lines = ["", "Demo accounts (synthetic data only; password for all: " + DEMO_PASSWORD + "):"]
    for spec in DEMO_ACCOUNTS:
        demo_account_ensure(spec)
        roles = ", ".join(spec.roles)
        secret = demo_totp_secret(spec.email)
        lines.append(f"  {spec.email:<36} {roles:<32} TOTP secret {secret}")
    lines += [
        "Two-factor: add the secret to an authenticator app, or run "
        "`python manage.py demo_totp EMAIL` to print the current code.",
        "",
    ]
    return lines


@transaction.atomic
def demo_account_ensure(spec: DemoAccount) -> User:
    user = User.objects.filter(email=spec.email).first()
    if user is None:
        user = User.objects.create_user(spec.email, DEMO_PASSWORD, full_name=spec.full_name)
    EmailAddress.objects.update_or_create(
        user=user, email=spec.email, defaults={"verified": True, "primary": True}
    )
    _ensure_totp(user, demo_totp_secret(spec.email))
    access = user_access(user, today=timezone.localdate())
    if access.is_approved and set(access.roles) == set(spec.roles):
        return user
    dua = DUAVersion.objects.filter(is_active=True).first()
    if dua is None:
        raise RuntimeError("No active DUA version: run the migrations first.")
    if access.reason == "new DUA version not signed":
        dua_sign(user=user, version=dua, typed_name=spec.full_name)
        user.refresh_from_db()
        return user
    admin = User.objects.filter(email=DEMO_ACCOUNTS[0].email).first() or user
    # A stale demo application (pending, expired, other roles) is replaced by a fresh one.
    AccessApplication.objects.filter(
        user=user,
        status__in=[AccessApplication.Status.PENDING, AccessApplication.Status.CHANGES_REQUESTED],
    ).update(status=AccessApplication.Status.REJECTED, decision_reason="Replaced by load_demo")
    today = timezone.localdate()
    application = application_submit(
        user=user,
        details=ApplicationDetails(
            full_name=spec.full_name,
            institution="MedAlign Demo Hospital",
            institutional_email=spec.email,
            research_use="Demonstration of MedAlign Review with synthetic data.",
            requested_role=Role.CLINICIAN if Role.CLINICIAN in spec.roles else Role.RESEARCHER,
            specialty=spec.specialty,
            certificate_completed_on=today - timedelta(days=30),
            certificate_expires_on=today + timedelta(days=3 * 365),
            storage_attestation=True,
        ),
        certificate=ContentFile(SYNTHETIC_CERTIFICATE, name="certificate.pdf"),
        typed_name=spec.full_name,
        dua_version=dua,
        send_email_link=False,  # no mailbox; approved by the operator below
    )
    application_approve(
        application=application,
        reviewer=admin,
        roles=spec.roles,
        expires_on=today + timedelta(days=365),
        notify=False,
        by_operator=True,  # synthetic demo accounts, created by load_demo on the server
    )
    # The approval ended the account's sessions (a new session epoch): a caller that signs
    # this instance in must hold the epoch its session will be checked against.
    user.refresh_from_db()
    return user


def _ensure_totp(user: User, secret: str) -> None:
    existing = Authenticator.objects.filter(user=user, type=Authenticator.Type.TOTP).first()
    if existing is not None and decrypt(existing.data["secret"]) == secret:
        return
    if existing is not None:
        existing.delete()
    TOTP.activate(user, secret)
    RecoveryCodes.activate(user)
