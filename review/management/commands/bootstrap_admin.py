"""Create the first approved admin of a fresh installation, from the server's console.

Every other account is approved by an admin in the app; the first admin has nobody to approve
them, so an operator with shell access on the protected machine does it here, with the admin's
real training certificate and signature of the active DUA. It refuses once an approved admin
exists. The new admin sets up TOTP at first sign-in (the app requires it before any record).
"""

import getpass
import os
from datetime import date, timedelta
from pathlib import Path

from allauth.account.models import EmailAddress
from django.core.files import File
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from review.access import user_access
from review.models import AccessApplication, DUAVersion, Role, User
from review.services import accounts


def _date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"{value!r} is not a date (YYYY-MM-DD)") from None


class Command(BaseCommand):
    help = "Create and approve the first admin account (refuses if an approved admin exists)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email")
        parser.add_argument("--full-name", required=True)
        parser.add_argument("--institution", required=True)
        parser.add_argument("--certificate", required=True, type=Path, help="PDF, PNG or JPEG")
        parser.add_argument("--certificate-completed", required=True, type=_date)
        parser.add_argument("--certificate-expires", required=True, type=_date)
        parser.add_argument("--expires", type=_date, help="approval end (default: one year)")
        parser.add_argument("--also-clinician", action="store_true")
        parser.add_argument("--also-researcher", action="store_true")

    def handle(self, *args: object, **o: object) -> None:
        approved_admins = AccessApplication.objects.filter(
            status=AccessApplication.Status.APPROVED, is_admin=True
        ).select_related("user")
        if any(user_access(a.user).is_admin for a in approved_admins):
            raise CommandError("an approved admin exists: new admins are approved in the app")
        dua = DUAVersion.objects.filter(is_active=True).first()
        if dua is None:
            raise CommandError("no active DUA version: run the migrations first")
        certificate: Path = o["certificate"]  # type: ignore[assignment]
        if not certificate.is_file():
            raise CommandError(f"no such file: {certificate}")
        if not os.access(certificate, os.R_OK):
            # Run as the service user, a file left in root's home cannot be read: say so before
            # anything is created rather than fail halfway with a traceback.
            raise CommandError(
                f"{certificate} cannot be read by this user: copy it somewhere they can read"
            )
        email = str(o["email"]).strip().lower()
        password = getpass.getpass(f"Password for {email}: ")
        if len(password) < 12:
            raise CommandError("use a password of at least 12 characters")
        roles = [Role.ADMIN]
        if o["also_clinician"]:
            roles.append(Role.CLINICIAN)
        if o["also_researcher"]:
            roles.append(Role.RESEARCHER)
        self.stdout.write(f"\n{dua.title} (version {dua.version})\n\n{dua.text}\n")
        typed = input("Type your full name to sign the DUA above: ")
        with transaction.atomic():
            user = User.objects.filter(email=email).first() or User.objects.create_user(email)
            user.set_password(password)
            user.save()
            EmailAddress.objects.update_or_create(
                user=user, email=email, defaults={"verified": True, "primary": True}
            )
            details = accounts.ApplicationDetails(
                full_name=str(o["full_name"]),
                institution=str(o["institution"]),
                institutional_email=email,
                research_use="Administers this MedAlign Review installation (bootstrap).",
                requested_role=Role.ADMIN,
                certificate_completed_on=o["certificate_completed"],  # type: ignore[arg-type]
                certificate_expires_on=o["certificate_expires"],  # type: ignore[arg-type]
                storage_attestation=True,
            )
            with certificate.open("rb") as fh:
                try:
                    application = accounts.application_submit(
                        user=user,
                        details=details,
                        certificate=File(fh, name=certificate.name),
                        typed_name=typed,
                        dua_version=dua,
                        send_email_link=False,  # the operator vouches for the first admin
                    )
                except accounts.AccountsError as exc:
                    raise CommandError(str(exc)) from None
            expires = o["expires"] or timezone.localdate() + timedelta(days=365)
            # Self-approval, recorded as such in the audit trail: nobody else can approve yet.
            accounts.application_approve(
                application=application,
                reviewer=user,
                roles=roles,
                expires_on=expires,  # type: ignore[arg-type]
                notify=False,
                by_operator=True,
            )
        self.stdout.write(
            self.style.SUCCESS(
                f"{email} is an approved admin until {expires}. Sign in and set up TOTP."
            )
        )
