"""The scoring app's signal receivers: API tokens end with the access, roles or password they
were made under. Connected in ScoringConfig.ready()."""

from typing import Any

from allauth.account.signals import password_changed, password_reset, password_set
from django.dispatch import receiver

from review.signals import access_changed
from scoring.reports.services import api_tokens_revoke_for_user


@receiver(access_changed, dispatch_uid="scoring.tokens_end_with_access")
def on_access_changed(sender: Any, user: Any, reason: str, **kwargs: Any) -> None:
    # Approved again after a revocation, a token from before must not come back to life.
    api_tokens_revoke_for_user(user=user, reason=reason)


@receiver(password_changed, dispatch_uid="scoring.tokens_end_with_password_changed")
@receiver(password_reset, dispatch_uid="scoring.tokens_end_with_password_reset")
@receiver(password_set, dispatch_uid="scoring.tokens_end_with_password_set")
def on_password_changed(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    api_tokens_revoke_for_user(user=user, reason="password changed")
