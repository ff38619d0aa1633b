"""Reads for accounts, applications, the DUA and the audit trail."""

import difflib
from dataclasses import dataclass
from datetime import date, datetime, time

from django.db.models import Q, QuerySet
from django.utils import timezone

from review.models import (
    AccessApplication,
    AuditEvent,
    DUASignature,
    DUAVersion,
    RejectedEmailDomain,
    User,
)

OPEN_STATUSES = (
    AccessApplication.Status.PENDING,
    AccessApplication.Status.CHANGES_REQUESTED,
)


def email_domain(email: str) -> str:
    return email.rsplit("@", 1)[-1].strip().lower().rstrip(".")


def email_domain_is_rejected(email: str) -> bool:
    """True for a listed domain or any subdomain of one (``mail.gmail.com`` too)."""
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


# The queue's sections, in the order the page shows them: the ones waiting for an admin first,
# then those waiting for the applicant, the approved, and the closed ones (kept: an admin looks
# up who was refused or revoked, and why).
QUEUE_SECTIONS: tuple[tuple[str, str], ...] = (
    (AccessApplication.Status.PENDING, "Awaiting review"),
    (AccessApplication.Status.CHANGES_REQUESTED, "Waiting for the applicant's changes"),
    (AccessApplication.Status.APPROVED, "Approved"),
    (AccessApplication.Status.REVOKED, "Revoked"),
    (AccessApplication.Status.REJECTED, "Rejected"),
)


def applications_for_queue(*, status: str = "") -> dict[str, QuerySet[AccessApplication]]:
    """The admin queue, one queryset per status (every status, or only ``status``): oldest
    first while waiting, soonest to end for the approved, latest decision first once closed."""
    base = AccessApplication.objects.select_related("user", "reviewer").order_by("submitted_at")
    order = {
        AccessApplication.Status.APPROVED: ("expires_on", "id"),
        AccessApplication.Status.REVOKED: ("-decided_at", "-id"),
        AccessApplication.Status.REJECTED: ("-decided_at", "-id"),
    }
    return {
        key: base.filter(status=key).order_by(*order.get(key, ("submitted_at", "id")))
        for key, _ in QUEUE_SECTIONS
        if not status or key == status
    }


def applications_pending_count() -> int:
    """How many applications wait for an admin's decision (the navigation shows it)."""
    return AccessApplication.objects.filter(status=AccessApplication.Status.PENDING).count()


def admins_current(*, exclude: User | None = None) -> QuerySet[User]:
    """Active accounts whose approved, unexpired application grants the admin role."""
    today = timezone.localdate()
    users = User.objects.filter(
        is_active=True,
        applications__status=AccessApplication.Status.APPROVED,
        applications__is_admin=True,
        applications__expires_on__gte=today,
        applications__certificate_expires_on__gte=today,
    ).distinct()
    if exclude is not None:
        users = users.exclude(pk=exclude.pk)
    return users.order_by("email")


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


@dataclass(frozen=True)
class DiffLine:
    """One line of the comparison of two agreement texts: kept (" "), added ("+") or removed
    ("-"), with the line numbers it has in the old and the new text."""

    kind: str
    text: str
    old_number: int | None
    new_number: int | None


def dua_text_diff(old: str, new: str, *, context: int = 2) -> list[DiffLine | None]:
    """The changed lines of ``new`` against ``old`` with ``context`` lines around each change
    (difflib's grouping, as ``diff -u`` shows it); ``None`` separates groups. Empty when equal."""
    a, b = old.splitlines(), new.splitlines()
    lines: list[DiffLine | None] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        if lines:
            lines.append(None)
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [DiffLine(" ", a[i], i + 1, j1 + (i - i1) + 1) for i in range(i1, i2)]
                continue
            lines += [DiffLine("-", a[i], i + 1, None) for i in range(i1, i2)]
            lines += [DiffLine("+", b[j], None, j + 1) for j in range(j1, j2)]
    return lines


def users_with_access_count() -> int:
    """Accounts whose approval is current: a new DUA version suspends each until they sign."""
    today = timezone.localdate()
    return (
        AccessApplication.objects.filter(
            status=AccessApplication.Status.APPROVED,
            expires_on__gte=today,
            certificate_expires_on__gte=today,
            user__is_active=True,
        )
        .values("user")
        .distinct()
        .count()
    )
