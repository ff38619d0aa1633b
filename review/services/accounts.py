"""Writes for access applications, roles and the DUA. Every status change happens here.

The allowed transitions are those documented on ``AccessApplication`` (see its docstring); a
transition outside them raises ``TransitionNotAllowed``. Each decision writes the audit trail in
the same transaction and emails the applicant once the transaction commits (no patient data is
ever put in these emails: they carry a status, a reason written by an admin and a link).
"""

import hashlib
import io
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth import update_session_auth_hash
from django.core import signing
from django.core.files import File
from django.core.mail import send_mail
from django.db import transaction
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from review.access import (
    BLIND_ROLES,
    UNBLINDING_ROLES,
    clear_all_cached_access,
    clear_cached_access,
)
from review.models import (
    AccessApplication,
    AuditEvent,
    DUASignature,
    DUAVersion,
    Role,
    User,
)
from review.selectors.accounts import (
    admins_current,
    application_open_for_user,
    email_domain_is_rejected,
)
from review.services.audit import audit_record, client_ip
from review.signals import access_changed
from review.site import site_url

Status = AccessApplication.Status

# Mirrors the docstring of AccessApplication.Status; kept next to the code that enforces it.
TRANSITIONS: dict[str, frozenset[str]] = {
    Status.PENDING: frozenset({Status.APPROVED, Status.REJECTED, Status.CHANGES_REQUESTED}),
    Status.CHANGES_REQUESTED: frozenset({Status.PENDING}),
    Status.APPROVED: frozenset({Status.REVOKED}),
    Status.REJECTED: frozenset(),
    Status.REVOKED: frozenset(),
}

# Magic numbers of the certificate formats we accept. The browser's content type and the file
# name are attacker-controlled, so only the first bytes of the content decide.
_CERTIFICATE_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "application/pdf"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
)


class AccountsError(ValueError):
    """A request the accounts workflow refuses; the message is safe to show to the user."""


class TransitionNotAllowed(AccountsError):
    def __init__(self, application: AccessApplication, target: str) -> None:
        super().__init__(
            f"An application that is {application.get_status_display().lower()} cannot become "
            f"{Status(target).label.lower()}."
        )
        self.application = application
        self.target = target


@dataclass(frozen=True)
class ApplicationDetails:
    """What the applicant states; validated by the form, re-checked here where it matters."""

    full_name: str
    institution: str
    institutional_email: str
    research_use: str
    requested_role: str
    certificate_completed_on: date
    certificate_expires_on: date
    storage_attestation: bool
    specialty: str = ""


def certificate_sniff(file: File) -> str | None:
    """The certificate's real content type from its first bytes, or None if not accepted."""
    file.seek(0)
    head = file.read(16)
    file.seek(0)
    for magic, content_type in _CERTIFICATE_SIGNATURES:
        if head.startswith(magic):
            return content_type
    return None


# An image certificate is a scan: far below this; a bomb (a small file of huge dimensions)
# is refused before its pixels are decoded.
_MAX_CERTIFICATE_PIXELS = 50_000_000


def certificate_decodes(file: File, content_type: str) -> bool:
    """Whether the whole file reads as the ``content_type`` its first bytes claim: a PDF with at
    least one page (pypdf), or a PNG or JPEG whose pixels decode (Pillow). A valid header
    followed by garbage was accepted and approvable."""
    file.seek(0)
    data = file.read(settings.MAX_UPLOAD_BYTES + 1)
    file.seek(0)
    try:
        if content_type == "application/pdf":
            import pypdf

            return len(pypdf.PdfReader(io.BytesIO(data), strict=False).pages) >= 1
        from PIL import Image

        expected = {"image/png": "PNG", "image/jpeg": "JPEG"}[content_type]
        with Image.open(io.BytesIO(data)) as image:
            if image.format != expected:
                return False
            width, height = image.size
            if width * height > _MAX_CERTIFICATE_PIXELS:
                return False
            image.load()
        return True
    except Exception:  # noqa: BLE001 - any parser error means "cannot be read"
        return False


CERTIFICATE_UNREADABLE = (
    "The certificate cannot be read as the PDF, PNG or JPEG it starts like: upload the file "
    "again, or a new scan or export of it."
)


def names_match(typed: str, expected: str) -> bool:
    # Whitespace and letter case are not part of a signature; everything else is.
    def norm(value: str) -> str:
        return " ".join(value.split()).casefold()

    return bool(norm(typed)) and norm(typed) == norm(expected)


# --- applicant -----------------------------------------------------------------------------------
@transaction.atomic
def application_submit(
    *,
    user: User,
    details: ApplicationDetails,
    certificate: File,
    typed_name: str,
    dua_version: DUAVersion,
    request: HttpRequest | None = None,
    send_email_link: bool = True,
) -> AccessApplication:
    """A new application (status pending), with the applicant's signature of the active DUA.

    The institutional email is sent a link that proves the applicant reads it
    (``application_email_link_send``); ``send_email_link=False`` for an operator's commands
    (bootstrap_admin, the demo), whose approvals do not wait for it.
    """
    if application_open_for_user(user) is not None:
        raise AccountsError("You already have an application under review.")
    _check_details(details, typed_name=typed_name)
    content_type = _check_certificate(certificate)
    # The application states the name the DUA signature must match, so record it first.
    _set_full_name(user, details.full_name)
    signature = dua_sign(user=user, version=dua_version, typed_name=typed_name, request=request)
    application = AccessApplication(
        user=user, status=Status.PENDING, dua_signature=signature, submitted_at=timezone.now()
    )
    _apply_details(application, details)
    application.certificate_content_type = content_type
    _store_certificate(application, certificate)
    if _verified_already(user, application.institutional_email):
        application.institutional_email_verified_at = timezone.now()
    application.save()
    audit_record(
        action=AuditEvent.Action.APPLICATION_SUBMITTED,
        actor=user,
        request=request,
        obj=application,
        details={"requested_role": details.requested_role},
    )
    if send_email_link:
        # An operator's own application (send_email_link=False) is approved on the spot: no
        # admin needs telling.
        application_admins_notify(application=application, request=request)
    if send_email_link and application.institutional_email_verified_at is None:
        application_email_link_send(application=application, request=request)
    return application


@transaction.atomic
def application_resubmit(
    *,
    application: AccessApplication,
    details: ApplicationDetails,
    typed_name: str,
    dua_version: DUAVersion,
    certificate: File | None = None,
    request: HttpRequest | None = None,
) -> AccessApplication:
    """changes_requested -> pending, with the applicant's corrections."""
    application = _lock(application)
    _check_transition(application, Status.PENDING)
    _check_details(details, typed_name=typed_name)
    if certificate is not None:
        application.certificate_content_type = _check_certificate(certificate)
        _store_certificate(application, certificate)
    _set_full_name(application.user, details.full_name)
    application.dua_signature = dua_sign(
        user=application.user, version=dua_version, typed_name=typed_name, request=request
    )
    if details.institutional_email.lower() != application.institutional_email:
        application.institutional_email_verified_at = None  # a new address proves nothing yet
    _apply_details(application, details)
    if application.institutional_email_verified_at is None and _verified_already(
        application.user, application.institutional_email
    ):
        application.institutional_email_verified_at = timezone.now()
    application.status = Status.PENDING
    application.submitted_at = timezone.now()
    application.save()
    audit_record(
        action=AuditEvent.Action.APPLICATION_SUBMITTED,
        actor=application.user,
        request=request,
        obj=application,
        details={"resubmitted": True, "requested_role": details.requested_role},
    )
    application_admins_notify(application=application, request=request)
    if application.institutional_email_verified_at is None:
        application_email_link_send(application=application, request=request)
    return application


def application_admins_notify(
    *, application: AccessApplication, request: HttpRequest | None = None
) -> None:
    """Email every current admin (the applicant aside) that an application awaits a decision,
    once the transaction commits. The mail names the application and what it asks for, links
    to it, and carries nothing else (the applicant's details are read in the app)."""
    recipients = list(admins_current(exclude=application.user).values_list("email", flat=True))
    if not recipients:
        return
    context = {
        "application_id": application.pk,
        "requested_role": Role(application.requested_role).label,
        "resubmitted": application.decided_at is not None,
        "email_verified": application.institutional_email_verified_at is not None,
        "detail_url": site_url(request)
        + reverse("admin_application_detail", args=[application.pk]),
        "site_name": settings.SITE_NAME,
    }

    def send() -> None:
        subject = render_to_string("review/accounts/email/arrived_subject.txt", context)
        body = render_to_string("review/accounts/email/arrived_message.txt", context)
        # One message per admin: no admin learns the others' addresses.
        for to in recipients:
            send_mail(
                settings.ACCOUNT_EMAIL_SUBJECT_PREFIX + " ".join(subject.split()), body, None, [to]
            )

    transaction.on_commit(send)


# --- the institutional email: a link sent to it proves the applicant reads it -------------------
INSTITUTIONAL_EMAIL_SALT = "review.institutional_email"
INSTITUTIONAL_EMAIL_LINK_DAYS = 7


def institutional_email_token(application: AccessApplication) -> str:
    """Django-signed (HMAC, SECRET_KEY) application id and address: nothing is stored, and the
    token is void once the address changes or INSTITUTIONAL_EMAIL_LINK_DAYS have passed."""
    return signing.dumps(
        {"a": application.pk, "e": application.institutional_email},
        salt=INSTITUTIONAL_EMAIL_SALT,
    )


def application_email_link_check(*, user: User, token: str) -> AccessApplication:
    """The user's application the token was made for, if it still names its current address;
    ``AccountsError`` otherwise. Changes nothing."""
    try:
        data = signing.loads(
            token,
            salt=INSTITUTIONAL_EMAIL_SALT,
            max_age=timedelta(days=INSTITUTIONAL_EMAIL_LINK_DAYS),
        )
    except signing.BadSignature:  # tampered, or expired (SignatureExpired)
        raise AccountsError(
            "This link is not valid or has expired: send a new one from your application page."
        ) from None
    application = AccessApplication.objects.filter(
        pk=data.get("a") if isinstance(data, dict) else None, user=user
    ).first()
    if application is None or application.institutional_email != data.get("e"):
        raise AccountsError(
            "This link is not for the institutional email of your current application: sign "
            "in with the account that applied, or send a new link from your application page."
        )
    return application


@transaction.atomic
def application_email_verify(
    *, user: User, token: str, request: HttpRequest | None = None
) -> AccessApplication:
    """Mark the institutional email of the user's application verified (audited)."""
    application = _lock(application_email_link_check(user=user, token=token))
    if application.institutional_email_verified_at is None:
        application.institutional_email_verified_at = timezone.now()
        application.save(update_fields=["institutional_email_verified_at"])
        audit_record(
            action=AuditEvent.Action.EMAIL_VERIFIED,
            actor=user,
            request=request,
            obj=application,
            details={"institutional_email": application.institutional_email},
        )
    return application


def application_email_link_send(
    *, application: AccessApplication, request: HttpRequest | None = None
) -> None:
    """Email the application's institutional address its link, once the transaction commits."""
    base = site_url(request)
    url = base + reverse("application_verify_email", args=[institutional_email_token(application)])
    to, name = application.institutional_email, application.full_name

    def send() -> None:
        context = {
            "full_name": name,
            "verify_url": url,
            "site_name": settings.SITE_NAME,
            "days": INSTITUTIONAL_EMAIL_LINK_DAYS,
        }
        subject = render_to_string("review/accounts/email/institutional_subject.txt", context)
        body = render_to_string("review/accounts/email/institutional_message.txt", context)
        send_mail(
            settings.ACCOUNT_EMAIL_SUBJECT_PREFIX + " ".join(subject.split()), body, None, [to]
        )

    transaction.on_commit(send)


# --- admin decisions -----------------------------------------------------------------------------
@transaction.atomic
def application_approve(
    *,
    application: AccessApplication,
    reviewer: User,
    roles: Iterable[str],
    expires_on: date,
    request: HttpRequest | None = None,
    notify: bool = True,
    by_operator: bool = False,
) -> AccessApplication:
    """pending -> approved with the given roles, until ``expires_on`` (inclusive).

    The reviewer must be another admin, and must have opened the applicant's training
    certificate (an audited CERTIFICATE_VIEWED event) before approving. ``by_operator=True`` is
    for management commands run on the server by its operator (``bootstrap_admin``, the demo
    accounts), where no other admin exists yet; the audit trail records it as such.
    ``notify=False`` skips the applicant's email (demo accounts, which have no mailbox).
    """
    application = _lock(application)
    _check_transition(application, Status.APPROVED)
    if not by_operator:
        _check_not_own(application, reviewer)
        _check_certificate_opened(application, reviewer)
        if application.institutional_email_verified_at is None:
            raise AccountsError(
                "The applicant's institutional email is not verified yet: they were sent a "
                "link to it (and can send it again from their application page)."
            )
    role_set = _check_roles(roles)
    if expires_on <= timezone.localdate():
        raise AccountsError("The approval must expire after today.")
    application.is_clinician = Role.CLINICIAN in role_set
    application.is_researcher = Role.RESEARCHER in role_set
    application.is_admin = Role.ADMIN in role_set
    application.is_adjudicator = Role.ADJUDICATOR in role_set
    application.expires_on = expires_on
    _decide(
        application,
        Status.APPROVED,
        reviewer=reviewer,
        reason="",
        request=request,
        notify=notify,
        by_operator=by_operator,
    )
    _role_changed(application, reviewer, before=[], request=request)
    # A session signed in while the account was an applicant (password only, perhaps before any
    # second factor existed) must not carry on into approved access: the user signs in again.
    user_sessions_end(user=application.user, reason="access approved", request=request)
    return application


@transaction.atomic
def application_reject(
    *,
    application: AccessApplication,
    reviewer: User,
    reason: str,
    request: HttpRequest | None = None,
) -> AccessApplication:
    """pending -> rejected, with a reason the applicant sees."""
    application = _lock(application)
    _check_transition(application, Status.REJECTED)
    _decide(
        application, Status.REJECTED, reviewer=reviewer, reason=_reason(reason), request=request
    )
    return application


@transaction.atomic
def application_request_changes(
    *,
    application: AccessApplication,
    reviewer: User,
    reason: str,
    request: HttpRequest | None = None,
) -> AccessApplication:
    """pending -> changes_requested, with a reason telling the applicant what to fix."""
    application = _lock(application)
    _check_transition(application, Status.CHANGES_REQUESTED)
    _decide(
        application,
        Status.CHANGES_REQUESTED,
        reviewer=reviewer,
        reason=_reason(reason),
        request=request,
    )
    return application


@transaction.atomic
def application_revoke(
    *,
    application: AccessApplication,
    reviewer: User,
    reason: str,
    request: HttpRequest | None = None,
) -> AccessApplication:
    """approved -> revoked, at any time, with a reason. Access ends on the next request."""
    application = _lock(application)
    _check_transition(application, Status.REVOKED)
    before = application.roles
    application.revoked_at = timezone.now()
    _decide(application, Status.REVOKED, reviewer=reviewer, reason=_reason(reason), request=request)
    _role_changed(application, reviewer, before=before, after=[], request=request)
    return application


@transaction.atomic
def application_set_roles(
    *,
    application: AccessApplication,
    reviewer: User,
    roles: Iterable[str],
    expires_on: date,
    request: HttpRequest | None = None,
) -> AccessApplication:
    """Change an approved application's roles or renew its expiry (no status change)."""
    application = _lock(application)
    _check_not_own(application, reviewer)
    if application.status != Status.APPROVED:
        raise AccountsError("Only an approved application's roles can be changed.")
    role_set = _check_roles(roles)
    if expires_on <= timezone.localdate():
        raise AccountsError("The approval must expire after today.")
    before = application.roles
    application.is_clinician = Role.CLINICIAN in role_set
    application.is_researcher = Role.RESEARCHER in role_set
    application.is_admin = Role.ADMIN in role_set
    application.is_adjudicator = Role.ADJUDICATOR in role_set
    application.expires_on = expires_on
    application.save(
        update_fields=["is_clinician", "is_researcher", "is_admin", "is_adjudicator", "expires_on"]
    )
    _sync_staff(application.user)
    _role_changed(application, reviewer, before=before, request=request)
    return application


# --- sessions ------------------------------------------------------------------------------------
@transaction.atomic
def user_sessions_end(
    *,
    user: User,
    reason: str,
    keep: HttpRequest | None = None,
    request: HttpRequest | None = None,
) -> None:
    """End every session of ``user`` at its next request, except ``keep``'s (the session that
    made the change, when it is the user's own), and audit it.

    A new session epoch changes the check value every session carries
    (``User.get_session_auth_hash``): Django signs a session out whose value no longer matches,
    wherever it is stored. Saving the user clears the cached user row (review.receivers).
    """
    fresh = User.objects.select_for_update().get(pk=user.pk)
    fresh.session_epoch = secrets.token_hex(16)
    fresh.save(update_fields=["session_epoch"])
    # The caller's instance too (it may sign in next, as tests and the demo do).
    user.session_epoch = fresh.session_epoch
    user.__dict__.pop("_session_auth_hash", None)
    kept = (
        keep is not None
        and getattr(keep, "user", None) is not None
        and keep.user.is_authenticated
        and keep.user.pk == user.pk
    )
    if kept:
        update_session_auth_hash(keep, fresh)  # type: ignore[arg-type]
    audit_record(
        action=AuditEvent.Action.SESSIONS_ENDED,
        actor=fresh,
        request=request or keep,
        details={"reason": reason, "this_session_kept": kept},
    )


# --- DUA -----------------------------------------------------------------------------------------
@transaction.atomic
def dua_sign(
    *,
    user: User,
    version: DUAVersion,
    typed_name: str,
    request: HttpRequest | None = None,
) -> DUASignature:
    """The user's signature of the active DUA version (idempotent: signing twice is a no-op)."""
    if not version.is_active:
        raise AccountsError("Only the active version of the agreement can be signed.")
    expected = user.full_name
    if expected and not names_match(typed_name, expected):
        raise AccountsError("Type your full name exactly as given in your application.")
    existing = DUASignature.objects.filter(user=user, dua_version=version).first()
    if existing is not None:
        return existing
    signature = DUASignature.objects.create(
        user=user,
        dua_version=version,
        typed_name=" ".join(typed_name.split()),
        signed_at=timezone.now(),
        ip_address=client_ip(request),
    )
    clear_cached_access(user)
    audit_record(
        action=AuditEvent.Action.DUA_SIGNED,
        actor=user,
        request=request,
        obj=signature,
        details={"version": version.version},
    )
    return signature


@transaction.atomic
def dua_publish(
    *,
    version: str,
    text: str,
    actor: User,
    title: str = "",
    request: HttpRequest | None = None,
) -> DUAVersion:
    """Publish a new DUA version: it becomes the only active one, and every user must re-sign."""
    version = version.strip()
    if not version or not text.strip():
        raise AccountsError("A version label and the agreement's text are required.")
    if DUAVersion.objects.filter(version=version).exists():
        raise AccountsError(f"Version {version} already exists.")
    previous = list(
        DUAVersion.objects.select_for_update()
        .filter(is_active=True)
        .values_list("version", flat=True)
    )
    # Deactivate first: a partial unique constraint allows one active version at a time.
    DUAVersion.objects.filter(is_active=True).update(is_active=False)
    dua = DUAVersion(version=version, text=text, is_active=True, published_at=timezone.now())
    if title:
        dua.title = title
    dua.save()
    clear_all_cached_access()  # everyone must sign the new version before their next page
    audit_record(
        action=AuditEvent.Action.DUA_PUBLISHED,
        actor=actor,
        request=request,
        obj=dua,
        details={"version": version, "replaces": previous},
    )
    return dua


# --- helpers -------------------------------------------------------------------------------------
def _check_not_own(application: AccessApplication, reviewer: User) -> None:
    # Four eyes: an admin cannot grant, extend or widen their own access.
    if application.user_id == reviewer.pk:
        raise AccountsError("Another admin must approve, extend or change your own access.")


def _lock(application: AccessApplication) -> AccessApplication:
    # Two admins deciding at once must not both succeed: re-read the row under a lock.
    return (
        AccessApplication.objects.select_for_update().select_related("user").get(pk=application.pk)
    )


def _check_transition(application: AccessApplication, target: str) -> None:
    if target not in TRANSITIONS[application.status]:
        raise TransitionNotAllowed(application, target)


def _check_roles(roles: Iterable[str]) -> set[str]:
    role_set = set(roles)
    if not role_set:
        raise AccountsError("Choose at least one role.")
    unknown = role_set - set(Role.values)
    if unknown:
        raise AccountsError(f"Unknown role(s): {', '.join(sorted(unknown))}.")
    if settings.FORBID_CLINICIAN_RESEARCHER and role_set & BLIND_ROLES:
        other = sorted(str(r) for r in role_set & UNBLINDING_ROLES)
        if other:
            raise AccountsError(
                "This installation forbids a clinician account that can read model names "
                f"(FORBID_CLINICIAN_RESEARCHER): {' and '.join(other)} access shows which "
                "model wrote each response (exports, the studies pages, the Django admin). "
                "Approve clinician access on its own, or the other roles without it."
            )
    return role_set


def _reason(reason: str) -> str:
    reason = reason.strip()
    if not reason:
        raise AccountsError("Give a reason: the applicant will see it.")
    return reason


RESEARCH_USE_MAX_CHARS = 5000


def _check_details(details: ApplicationDetails, *, typed_name: str) -> None:
    if len(details.research_use) > RESEARCH_USE_MAX_CHARS:
        raise AccountsError(
            f"Describe the research use in at most {RESEARCH_USE_MAX_CHARS} characters."
        )
    if not details.storage_attestation:
        raise AccountsError("You must attest to encrypted, access-controlled storage.")
    if email_domain_is_rejected(details.institutional_email):
        raise AccountsError("Use your institutional email address, not a personal one.")
    if not names_match(typed_name, details.full_name):
        raise AccountsError("The typed signature must match your full name.")
    today = timezone.localdate()
    if details.certificate_completed_on > today:
        raise AccountsError("The training completion date cannot be in the future.")
    if details.certificate_expires_on <= today:
        raise AccountsError("The training certificate has expired.")


def certificate_sha256(file: File) -> str:
    """The sha256 of a certificate's bytes, read in chunks; the file is left at its start."""
    digest = hashlib.sha256()
    file.seek(0)
    for chunk in file.chunks():
        digest.update(chunk)
    file.seek(0)
    return digest.hexdigest()


def _store_certificate(application: AccessApplication, certificate: File) -> None:
    """Save the file with its sha256 and the time it came: approval needs a view of this one."""
    application.certificate_sha256 = certificate_sha256(certificate)
    application.certificate_uploaded_at = timezone.now()
    application.certificate.save("certificate", certificate, save=False)


def certificate_view_record(
    *, application: AccessApplication, sha256: str, request: HttpRequest | None = None
) -> None:
    """Audit an admin's view of the certificate, with the sha256 of the bytes served. An
    application stored before certificates were hashed takes the hash of its file now."""
    if not application.certificate_sha256:
        application.certificate_sha256 = sha256
        application.certificate_uploaded_at = application.certificate_uploaded_at or (
            application.submitted_at
        )
        application.save(update_fields=["certificate_sha256", "certificate_uploaded_at"])
    audit_record(
        action=AuditEvent.Action.CERTIFICATE_VIEWED,
        request=request,
        obj=application,
        details={"applicant": application.user.email, "sha256": sha256},
    )


def _check_certificate_opened(application: AccessApplication, reviewer: User) -> None:
    """The reviewer opened the certificate now on file: a view (CERTIFICATE_VIEWED, with the
    sha256 of the bytes served) after its upload and of the same bytes. A view of the file an
    applicant replaced when resubmitting approved a certificate nobody had seen."""
    views = AuditEvent.objects.filter(
        action=AuditEvent.Action.CERTIFICATE_VIEWED,
        actor=reviewer,
        object_type="AccessApplication",
        object_id=str(application.pk),
    )
    current = views.filter(details__sha256=application.certificate_sha256)
    if application.certificate_uploaded_at is not None:
        current = current.filter(created_at__gte=application.certificate_uploaded_at)
    if application.certificate_sha256 and current.exists():
        return
    if views.exists():
        raise AccountsError(
            "The applicant's training certificate was replaced after you opened it: open the "
            "current one before approving the application."
        )
    raise AccountsError(
        "Open the applicant's training certificate before approving the application."
    )


def _check_certificate(certificate: File) -> str:
    if certificate.size is not None and certificate.size > settings.MAX_UPLOAD_BYTES:
        raise AccountsError("The certificate file is too large.")
    content_type = certificate_sniff(certificate)
    if content_type is None:
        raise AccountsError("The certificate must be a PDF, PNG or JPEG file.")
    if not certificate_decodes(certificate, content_type):
        raise AccountsError(CERTIFICATE_UNREADABLE)
    return content_type


def _verified_already(user: User, address: str) -> bool:
    """The account's own address, verified by allauth's link: the same proof the institutional
    link would give, so the applicant is not sent a second one."""
    return EmailAddress.objects.filter(user=user, email__iexact=address, verified=True).exists()


def _apply_details(application: AccessApplication, details: ApplicationDetails) -> None:
    application.full_name = " ".join(details.full_name.split())
    application.institution = details.institution
    application.institutional_email = details.institutional_email.lower()
    application.research_use = details.research_use
    application.requested_role = details.requested_role
    application.specialty = details.specialty
    application.certificate_completed_on = details.certificate_completed_on
    application.certificate_expires_on = details.certificate_expires_on
    application.storage_attestation = details.storage_attestation


def _set_full_name(user: User, full_name: str) -> None:
    full_name = " ".join(full_name.split())
    if user.full_name != full_name:
        user.full_name = full_name
        user.save(update_fields=["full_name"])


def _decide(
    application: AccessApplication,
    status: str,
    *,
    reviewer: User,
    reason: str,
    request: HttpRequest | None,
    notify: bool = True,
    by_operator: bool = False,
) -> None:
    previous = application.status
    application.status = status
    application.reviewer = reviewer
    application.decided_at = timezone.now()
    application.decision_reason = reason
    application.save()
    _sync_staff(application.user)
    audit_record(
        action=AuditEvent.Action.APPLICATION_DECISION,
        actor=reviewer,
        request=request,
        obj=application,
        details={
            "applicant": application.user.email,
            "from": previous,
            "to": status,
            "reason": reason,
            "roles": application.roles,
            "expires_on": application.expires_on.isoformat() if application.expires_on else None,
            **({"by_operator": True} if by_operator else {}),
        },
    )
    if notify:
        # The address of the request that decided (SITE_URL first): the mail is sent after
        # commit, when the request may be gone, and a worker has none.
        base = site_url(request)
        transaction.on_commit(lambda: _email_decision(application.pk, base_url=base))


def _role_changed(
    application: AccessApplication,
    reviewer: User,
    *,
    before: list[str],
    after: list[str] | None = None,
    request: HttpRequest | None,
) -> None:
    # Whatever was granted under the previous access (API tokens) ends with it.
    access_changed.send(sender=AccessApplication, user=application.user, reason="access changed")
    audit_record(
        action=AuditEvent.Action.ROLE_CHANGED,
        actor=reviewer,
        request=request,
        obj=application,
        details={
            "user": application.user.email,
            "before": [str(r) for r in before],
            "after": [str(r) for r in (application.roles if after is None else after)],
            "expires_on": application.expires_on.isoformat() if application.expires_on else None,
        },
    )


def _sync_staff(user: User) -> None:
    """Django's admin is for approved admins only: keep is_staff/is_superuser in step.

    The admin site also checks ``user_access`` on every request (review.admin_site), so an
    expired approval closes it at once even though these flags are only updated on decisions.
    """
    clear_cached_access(user)
    is_admin = AccessApplication.objects.filter(
        user=user, status=Status.APPROVED, is_admin=True
    ).exists()
    if user.is_staff != is_admin or user.is_superuser != is_admin:
        user.is_staff = is_admin
        user.is_superuser = is_admin
        user.save(update_fields=["is_staff", "is_superuser"])


def _email_decision(application_id: int, *, base_url: str) -> None:
    application = AccessApplication.objects.select_related("user").get(pk=application_id)
    context = {
        "application": application,
        "status_url": base_url + reverse("application_status"),
        "site_name": settings.SITE_NAME,
        "roles": [Role(r).label for r in application.roles],
    }
    subject = render_to_string("review/accounts/email/decision_subject.txt", context)
    body = render_to_string("review/accounts/email/decision_message.txt", context)
    send_mail(
        settings.ACCOUNT_EMAIL_SUBJECT_PREFIX + " ".join(subject.split()),
        body,
        None,
        [application.user.email],
    )
