"""Reads for accounts, applications, the DUA and the audit trail."""

from datetime import date, datetime, time

from django.db.models import Q, QuerySet
from django.utils import timezone

from review.models import AccessApplication, AuditEvent, DUASignature, DUAVersion, User

OPEN_STATUSES = (
    AccessApplication.Status.PENDING,
    AccessApplication.Status.CHANGES_REQUESTED,
)


def email_domain(email: str) -> str:
    return email.rsplit("@", 1)[-1].strip().lower().rstrip(".")


def email_domain_is_rejected(email: str) -> bool:
    """True for a listed domain or any subdomain of one (``mail.gmail.com`` too)."""
    from review.models import RejectedEmailDomain

    domain = email_domain(email)
    parts = domain.split(".")
    candidates = {".".join(parts[i:]) for i in range(len(parts) - 1)}
    return RejectedEmailDomain.objects.filter(domain__in=candidates).exists()


def dua_active() -> DUAVersion | None:
    return DUAVersion.objects.filter(is_active=True).first()


def dua_signature_for(user: User, version: DUAVersion) -> DUASignature | None:
    return DUASignature.objects.filter(user=user, dua_version=version).first()


def application_latest_for_user(user: User) -> AccessApplication | None:
    return (
        AccessApplication.objects.filter(user=user)
        .select_related("reviewer", "dua_signature__dua_version")
        .order_by("-submitted_at", "-id")
        .first()
    )


def application_open_for_user(user: User) -> AccessApplication | None:
    """The user's application awaiting a decision or their changes, if any."""
    return (
        AccessApplication.objects.filter(user=user, status__in=OPEN_STATUSES)
        .order_by("-submitted_at", "-id")
        .first()
    )


def applications_for_queue() -> dict[str, QuerySet[AccessApplication]]:
    """The admin queue: awaiting review, waiting for the applicant, and approved ones."""
    base = AccessApplication.objects.select_related("user", "reviewer").order_by("submitted_at")
    return {
        "pending": base.filter(status=AccessApplication.Status.PENDING),
        "changes_requested": base.filter(status=AccessApplication.Status.CHANGES_REQUESTED),
        "approved": base.filter(status=AccessApplication.Status.APPROVED).order_by("expires_on"),
    }


def application_get(*, application_id: int) -> AccessApplication | None:
    return (
        AccessApplication.objects.select_related("user", "reviewer", "dua_signature__dua_version")
        .filter(pk=application_id)
        .first()
    )


def applications_history_for_user(user: User) -> QuerySet[AccessApplication]:
    return AccessApplication.objects.filter(user=user).select_related("reviewer")


def audit_events(
    *,
    actor: str = "",
    action: str = "",
    date_from: date | None = None,
    date_to: date | None = None,
    person_id: str = "",
) -> QuerySet[AuditEvent]:
    """Audit events filtered as the admin's audit page asks; newest first."""
    qs = AuditEvent.objects.select_related("actor")
    if actor:
        qs = qs.filter(Q(actor_email__icontains=actor) | Q(actor__email__icontains=actor))
    if action:
        qs = qs.filter(action=action)
    tz = timezone.get_current_timezone()
    if date_from:
        qs = qs.filter(created_at__gte=datetime.combine(date_from, time.min, tzinfo=tz))
    if date_to:
        qs = qs.filter(created_at__lte=datetime.combine(date_to, time.max, tzinfo=tz))
    if person_id:
        qs = qs.filter(person_id=person_id)
    return qs.order_by("-created_at", "-id")
