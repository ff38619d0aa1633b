"""Signal receivers that write the audit trail for sign-in, failed sign-in and sign-out.

Connected in ReviewConfig.ready(). Application decisions, role changes and DUA events are audited
by the services that make them (in the same transaction), not here.
"""

from typing import Any

from allauth.mfa.signals import authenticator_added, authenticator_removed, authenticator_reset
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest

from review.models import AuditEvent
from review.services.audit import audit_record


@receiver(user_logged_in, dispatch_uid="review.audit_login")
def on_login(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    audit_record(action=AuditEvent.Action.LOGIN, actor=user, request=request)


@receiver(user_login_failed, dispatch_uid="review.audit_login_failed")
def on_login_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    # Django has already masked the password; the attempted address is what an admin needs.
    attempted = str(credentials.get("email") or credentials.get("username") or "")[:254]
    audit_record(
        action=AuditEvent.Action.LOGIN_FAILED,
        actor_email=attempted,
        request=request,
    )


@receiver(user_logged_out, dispatch_uid="review.audit_logout")
def on_logout(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    if user is None:
        return
    audit_record(action=AuditEvent.Action.LOGOUT, actor=user, request=request)


def _mfa_changed(change: str):  # noqa: ANN202 - a signal receiver
    def receive(
        sender: Any, request: HttpRequest | None, user: Any, authenticator: Any, **kwargs: Any
    ) -> None:
        audit_record(
            action=AuditEvent.Action.MFA_CHANGED,
            actor=user,
            request=request,
            details={"change": change, "type": getattr(authenticator, "type", "")},
        )

    return receive


# TOTP set up or removed, recovery codes regenerated: who changed their second factor, and when.
authenticator_added.connect(
    _mfa_changed("added"), dispatch_uid="review.audit_mfa_added", weak=False
)
authenticator_removed.connect(
    _mfa_changed("removed"), dispatch_uid="review.audit_mfa_removed", weak=False
)
authenticator_reset.connect(
    _mfa_changed("reset"), dispatch_uid="review.audit_mfa_reset", weak=False
)
