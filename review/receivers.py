"""Signal receivers: the audit trail for sign-in, failed sign-in, sign-out and second-factor
changes; and the clearing of cached access evaluations whenever a row they depend on changes.

Connected in ReviewConfig.ready(). Application decisions, role changes and DUA events are audited
by the services that make them (in the same transaction), not here. Cache clearing is also here
(as well as in the services) because it must hold for every write path, admin and shell included:
a stale "approved" must never outlive a revocation.
"""

import time
from typing import Any

from allauth.account.signals import user_logged_in as allauth_user_logged_in
from allauth.mfa.models import Authenticator
from allauth.mfa.signals import (
    authentication_failed,
    authenticator_added,
    authenticator_removed,
    authenticator_reset,
    authenticator_used,
)
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import HttpRequest

from medalign_site.middleware import SIGNED_IN_AT_KEY
from review.access import (
    IDP_SECOND_FACTOR,
    clear_all_cached_access,
    clear_cached_access,
    second_factor_passed,
)
from review.allauth_compat import record_authentication
from review.models import AccessApplication, AuditEvent, DUASignature, DUAVersion, ErrorTag, User
from review.selectors.reviews import error_tags_forget
from review.services.accounts import user_sessions_end
from review.services.audit import audit_record
from review.services.sso import sso_sign_in_record


@receiver(user_logged_in, dispatch_uid="review.audit_login")
def on_login(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    audit_record(action=AuditEvent.Action.LOGIN, actor=user, request=request)
    if request is not None and hasattr(request, "session"):
        # The session's absolute lifetime counts from here (medalign_site.middleware).
        request.session[SIGNED_IN_AT_KEY] = int(time.time())


@receiver(allauth_user_logged_in, dispatch_uid="review.audit_sso_login")
def on_sso_login(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    # Sent once every step of the sign-in is done (the TOTP step included): which provider,
    # and what stood for the second factor.
    sociallogin = kwargs.get("sociallogin")
    if sociallogin is None:
        return
    if second_factor_passed(request, types=frozenset({IDP_SECOND_FACTOR})):
        second_factor = "idp"
    elif second_factor_passed(request):
        second_factor = "totp"
    else:
        second_factor = "none"
    sso_sign_in_record(
        request=request,
        user=user,
        provider_id=sociallogin.account.provider,
        second_factor=second_factor,
    )


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


@receiver(authenticator_added, dispatch_uid="review.totp_activation_passes_second_factor")
def on_totp_activated(
    sender: Any, request: HttpRequest | None, user: Any, authenticator: Any, **kwargs: Any
) -> None:
    # Activating TOTP means typing a valid code from the new authenticator, in this session: the
    # session has shown the second factor, as at sign-in. Other sessions of the account have not.
    if request is None or getattr(authenticator, "type", "") != Authenticator.Type.TOTP:
        return
    record_authentication(request, user, "mfa", id=authenticator.pk, type=authenticator.type)


@receiver(authenticator_added, dispatch_uid="review.factor_added_ends_other_sessions")
def on_factor_added(
    sender: Any, request: HttpRequest | None, user: Any, authenticator: Any, **kwargs: Any
) -> None:
    # A session signed in before the factor existed (with the password alone) must not live on
    # beside it; the session that added the factor is kept.
    user_sessions_end(
        user=user,
        reason=f"second factor added ({getattr(authenticator, 'type', '')})",
        keep=request,
    )


@receiver(authentication_failed, dispatch_uid="review.audit_mfa_failed")
def on_mfa_failed(
    sender: Any, request: HttpRequest | None, user: Any, authenticator: Any, **kwargs: Any
) -> None:
    # The code itself is never recorded.
    audit_record(
        action=AuditEvent.Action.MFA_FAILED,
        actor=user,
        request=request,
        details={
            "type": getattr(authenticator, "type", ""),
            "step": "session" if kwargs.get("reauthentication") else "sign-in",
        },
    )


@receiver(authenticator_used, dispatch_uid="review.audit_recovery_code_used")
def on_factor_used(
    sender: Any, request: HttpRequest | None, user: Any, authenticator: Any, **kwargs: Any
) -> None:
    if getattr(authenticator, "type", "") != Authenticator.Type.RECOVERY_CODES:
        return
    audit_record(
        action=AuditEvent.Action.RECOVERY_CODE_USED,
        actor=user,
        request=request,
        details={
            "step": "session" if kwargs.get("reauthenticated") else "sign-in",
            "codes_left": len(authenticator.wrap().get_unused_codes()),
        },
    )


# --- cached access evaluations (review.access.user_access) --------------------------------------
def _clear_for_user_row(sender: Any, instance: Any, **kwargs: Any) -> None:
    clear_cached_access(user_id=instance.user_id)


def _clear_for_user(sender: Any, instance: User, **kwargs: Any) -> None:
    clear_cached_access(user_id=instance.pk)


def _clear_everyone(sender: Any, **kwargs: Any) -> None:
    clear_all_cached_access()


for _model in (AccessApplication, DUASignature, Authenticator):
    post_save.connect(_clear_for_user_row, sender=_model, dispatch_uid=f"review.access_{_model}")
    post_delete.connect(
        _clear_for_user_row, sender=_model, dispatch_uid=f"review.access_del_{_model}"
    )
# The entry also carries the user row (review.auth_backends): any save or deletion of it.
post_save.connect(_clear_for_user, sender=User, dispatch_uid="review.access_user")
post_delete.connect(_clear_for_user, sender=User, dispatch_uid="review.access_user_del")
post_save.connect(_clear_everyone, sender=DUAVersion, dispatch_uid="review.access_dua")
post_delete.connect(_clear_everyone, sender=DUAVersion, dispatch_uid="review.access_dua_del")


@receiver(post_save, sender=ErrorTag, dispatch_uid="review.error_tags_saved")
@receiver(post_delete, sender=ErrorTag, dispatch_uid="review.error_tags_deleted")
def on_error_tag_change(sender: Any, **kwargs: Any) -> None:
    # This process's copy of the tags (review.selectors.reviews.error_tags) is stale now.
    error_tags_forget()
