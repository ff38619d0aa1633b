"""Plain helpers that build accounts in a known state, through the services where it matters.

    user = make_user("c@example.edu", roles=["clinician"])          # approved, TOTP enrolled
    applicant = make_user("a@example.edu")                          # signed up, no application
    app = make_application(applicant)                               # pending
    make_approved(user, ["researcher"], expires_on=date(...))       # another approval
    client.force_login(user)      # the session also passes TOTP if the user has it (conftest)
    sign_in(client, user, second_factor=False)                      # password only: no TOTP step

Every user gets a verified primary EmailAddress and the password ``PASSWORD``; ``totp=True``
enrols an allauth TOTP authenticator with ``TOTP_SECRET`` (``totp_code()`` gives a valid code).
"""

import time
from collections.abc import Iterable
from datetime import date, timedelta
from typing import Any

from allauth.account.authentication import AUTHENTICATION_METHODS_SESSION_KEY
from allauth.account.models import EmailAddress
from allauth.mfa import app_settings as mfa_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from review.access import clear_cached_access
from review.allauth_compat import TOTP, format_hotp_value, hotp_value
from review.models import AccessApplication, DUAVersion, Role, User
from review.services import accounts as services

PASSWORD = "correct-horse-battery-staple"
TOTP_SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"  # base32, 32 characters


def _pdf_bytes() -> bytes:
    import io

    import pypdf

    writer = pypdf.PdfWriter()
    writer.add_blank_page(width=200, height=100)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _image_bytes(fmt: str) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (40, 20), "white").save(out, format=fmt)
    return out.getvalue()


# Certificates that decode (a header followed by garbage is refused).
PDF_BYTES = _pdf_bytes()
PNG_BYTES = _image_bytes("PNG")
JPEG_BYTES = _image_bytes("JPEG")


def totp_code(secret: str = TOTP_SECRET, *, at: float | None = None) -> str:
    counter = int(time.time() if at is None else at) // mfa_settings.TOTP_PERIOD
    return format_hotp_value(hotp_value(secret, counter))


def totp_code_fresh(secret: str = TOTP_SECRET, *, margin: int = 5) -> str:
    """A code that stays valid for at least ``margin`` seconds: one computed in the last seconds
    of its 30-second window can expire before the server checks it (a flaky test), so wait for
    the next window instead."""
    period = mfa_settings.TOTP_PERIOD
    left = period - time.time() % period
    if left < margin:
        time.sleep(left + 0.05)
    return totp_code(secret)


def record_second_factor(client: Any, user: User) -> None:
    """Mark ``client``'s session as having passed TOTP, as allauth's TOTP step records it.

    For tests and benchmarks only (they sign in without typing codes); the app never calls it."""
    session = client.session
    now = time.time()
    records = list(session.get(AUTHENTICATION_METHODS_SESSION_KEY) or [])
    records += [
        {"method": "password", "at": now, "email": user.email},
        {"method": "mfa", "at": now, "type": "totp"},
    ]
    session[AUTHENTICATION_METHODS_SESSION_KEY] = records
    session["account_authentication_methods_user"] = str(user.pk)
    session.save()


def sign_in(client: Any, user: User, *, second_factor: bool = True) -> None:
    """``force_login``, then (by default) the TOTP step done in this session.

    ``second_factor=False`` is a session that signed in with the password alone.
    """
    client.force_login(user)
    if not second_factor:
        session = client.session
        session.pop(AUTHENTICATION_METHODS_SESSION_KEY, None)
        session.pop("account_authentication_methods_user", None)
        session.save()


def session_cookie(user: User, url: str) -> dict[str, str]:
    """The session cookie of ``user`` signed in as ``sign_in`` signs in, for a browser at ``url``
    (``context.add_cookies([session_cookie(user, live_server.url)])``): the browser tests start
    signed in without going through the sign-in pages."""
    client = Client()
    sign_in(client, user)
    return {"name": "sessionid", "value": client.cookies["sessionid"].value, "url": url}


def pdf_file(name: str = "certificate.pdf", content: bytes = PDF_BYTES) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type="application/pdf")


def active_dua() -> DUAVersion:
    dua = DUAVersion.objects.filter(is_active=True).first()
    if dua is None:  # the data migration seeds 1.0; a test may have deactivated it
        dua = DUAVersion.objects.create(version="test", text="Test DUA.", is_active=True)
    return dua


def make_user(
    email: str = "user@example.edu",
    *,
    roles: Iterable[str] = (),
    totp: bool = True,
    full_name: str = "Test User",
    password: str = PASSWORD,
    verified: bool = True,
    expires_on: date | None = None,
) -> User:
    """A user who can sign in; approved for ``roles`` if any are given."""
    user = User.objects.create_user(email, password, full_name=full_name)
    EmailAddress.objects.create(user=user, email=email, verified=verified, primary=True)
    if totp:
        TOTP.activate(user, TOTP_SECRET)
    roles = list(roles)
    if roles:
        make_approved(user, roles, expires_on=expires_on)
    return user


def application_details(user: User, **overrides: object) -> services.ApplicationDetails:
    today = timezone.localdate()
    values: dict[str, object] = {
        "full_name": user.full_name or "Test User",
        "institution": "Example University Hospital",
        "institutional_email": user.email,
        "research_use": "Evaluating LLM answers about patient records.",
        "requested_role": Role.CLINICIAN,
        "certificate_completed_on": today - timedelta(days=10),
        "certificate_expires_on": today + timedelta(days=730),
        "storage_attestation": True,
    }
    values.update(overrides)
    return services.ApplicationDetails(**values)  # type: ignore[arg-type]


def make_application(
    user: User, *, email_verified: bool = True, **overrides: object
) -> AccessApplication:
    """A pending application, submitted (and the active DUA signed) through the service, its
    institutional email verified through its link unless ``email_verified=False``."""
    details = application_details(user, **overrides)
    application = services.application_submit(
        user=user,
        details=details,
        certificate=pdf_file(),
        typed_name=details.full_name,
        dua_version=active_dua(),
    )
    if email_verified:
        token = services.institutional_email_token(application)
        application = services.application_email_verify(user=user, token=token)
    return application


def make_approved(
    user: User,
    roles: Iterable[str],
    *,
    expires_on: date | None = None,
    reviewer: User | None = None,
) -> AccessApplication:
    """Submit and approve an application. ``expires_on`` may be in the past (an expired one)."""
    application = make_application(user)
    future = timezone.localdate() + timedelta(days=365)
    application = services.application_approve(
        application=application,
        reviewer=reviewer or user,
        roles=list(roles),
        expires_on=future,
        notify=False,
        by_operator=reviewer is None,  # test fixtures: as the demo accounts are made
    )
    # Approval ends the account's sessions with a new session epoch: the caller's instance
    # signs in next, so it carries the new one.
    user.refresh_from_db(fields=["session_epoch"])
    if expires_on is not None and expires_on != future:
        # The service refuses past dates, as it should; tests need expired approvals too.
        AccessApplication.objects.filter(pk=application.pk).update(expires_on=expires_on)
        application.refresh_from_db()
        clear_cached_access(user)  # a queryset update sends no signal
    return application


def open_certificate(reviewer: User, application: AccessApplication) -> None:
    """What opening the certificate page records (approval requires it): a view, by
    ``reviewer``, of the bytes on file now (their sha256)."""
    from review.models import AuditEvent
    from review.services.audit import audit_record

    with application.certificate.open("rb") as handle:
        sha256 = services.certificate_sha256(handle)
    audit_record(
        action=AuditEvent.Action.CERTIFICATE_VIEWED,
        actor=reviewer,
        obj=application,
        details={"applicant": application.user.email, "sha256": sha256},
    )


def make_rejected(user: User, *, reason: str = "Not eligible.") -> AccessApplication:
    return services.application_reject(
        application=make_application(user), reviewer=user, reason=reason
    )


def make_revoked(user: User, roles: Iterable[str] = (Role.CLINICIAN,)) -> AccessApplication:
    return services.application_revoke(
        application=make_approved(user, roles), reviewer=user, reason="Left the institution."
    )


def study_for(dataset: Any) -> Any:
    """The dataset's latest study ("Round 1", created if the dataset has none)."""
    from review.services.studies import study_first_round

    return study_first_round(dataset=dataset)


def put_in_study(*instructions: Any, study: Any = None) -> Any:
    """Every response of ``instructions`` into ``study`` (default: their dataset's latest), as
    an admin's import does: the set clinicians of that study rank."""
    from review.models import ModelResponse, StudyResponse

    study = study or study_for(instructions[0].dataset)
    for response in ModelResponse.objects.filter(instruction__in=instructions):
        StudyResponse.objects.get_or_create(
            study=study, response=response, defaults={"instruction_id": response.instruction_id}
        )
    return study


def assign(instruction: Any, clinician: Any, *, study: Any = None, fill: bool = True) -> Any:
    """An assignment in ``study`` (default: the instruction's dataset's latest), with the
    instruction's responses in that study's set (unless ``fill=False``: the set as it is)."""
    from review.models import Assignment

    study = put_in_study(instruction, study=study) if fill else study
    return Assignment.objects.create(study=study, instruction=instruction, clinician=clinician)
