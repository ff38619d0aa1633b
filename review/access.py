"""Who may see what. Views reach protected objects only through these helpers.

Objects a user may not see raise Http404, the same as missing ones, so existence never leaks.
"""

from dataclasses import dataclass, field
from datetime import date

from django.utils import timezone

from review.models import AccessApplication, DUASignature, DUAVersion, Role, User


@dataclass(frozen=True)
class UserAccess:
    roles: frozenset[str] = field(default_factory=frozenset)
    application: AccessApplication | None = None
    reason: str = ""

    @property
    def is_approved(self) -> bool:
        return bool(self.roles)

    @property
    def is_clinician(self) -> bool:
        return Role.CLINICIAN in self.roles

    @property
    def is_researcher(self) -> bool:
        return Role.RESEARCHER in self.roles

    @property
    def is_admin(self) -> bool:
        return Role.ADMIN in self.roles


def user_access(user: User, *, today: date | None = None) -> UserAccess:
    """The roles a user holds right now: approved, unexpired, certificate valid, DUA signed."""
    if not user.is_authenticated or not user.is_active:
        return UserAccess(reason="not signed in")
    cached = getattr(user, "_access_cache", None)
    if cached is not None and today is None:
        return cached
    today = today or timezone.localdate()
    application = (
        AccessApplication.objects.filter(user=user, status=AccessApplication.Status.APPROVED)
        .order_by("-decided_at")
        .first()
    )
    result = _evaluate(user, application, today)
    user._access_cache = result  # type: ignore[attr-defined]
    return result


def _evaluate(user: User, application: AccessApplication | None, today: date) -> UserAccess:
    if application is None:
        return UserAccess(reason="no approved application")
    if application.expires_on is not None and application.expires_on < today:
        return UserAccess(application=application, reason="approval expired")
    if application.certificate_expires_on < today:
        return UserAccess(application=application, reason="training certificate expired")
    active = DUAVersion.objects.filter(is_active=True).values_list("id", flat=True).first()
    if (
        active is not None
        and not DUASignature.objects.filter(user=user, dua_version_id=active).exists()
    ):
        return UserAccess(application=application, reason="new DUA version not signed")
    return UserAccess(roles=frozenset(application.roles), application=application)
