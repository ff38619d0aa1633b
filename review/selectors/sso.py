"""Reads for single sign-on: accounts by email, and the identities joined to an account."""

from allauth.account.models import EmailAddress
from allauth.socialaccount.models import SocialAccount
from django.conf import settings
from django.db.models import Q

from review.models import User


def user_with_email(email: str) -> User | None:
    """The account holding ``email`` (its sign-in address, or any address allauth keeps for
    it, verified or not), or None."""
    email = email.strip()
    if not email:
        return None
    found = User.objects.filter(email__iexact=email).first()
    if found is not None:
        return found
    address = EmailAddress.objects.filter(email__iexact=email).select_related("user").first()
    return address.user if address is not None else None


def identity_provider_ids_for(user: User) -> list[str]:
    """The configured identity providers this account is joined to (by their ids)."""
    configured = list(settings.SSO_IDENTITY_PROVIDERS)
    if not configured:
        return []
    return sorted(
        SocialAccount.objects.filter(user=user, provider__in=configured)
        .values_list("provider", flat=True)
        .distinct()
    )


def users_signed_in_as(provider_id: str, *, sub: str = "", sid: str = "") -> list[User]:
    """The accounts an identity provider means by a subject (``sub``) or by a session id of its
    own (``sid``, as its ID tokens carried it)."""
    match = Q()
    if sub:
        match |= Q(uid=sub)
    if sid:
        match |= Q(extra_data__id_token__sid=sid)
    if not match:
        return []
    ids = SocialAccount.objects.filter(match, provider=provider_id).values_list(
        "user_id", flat=True
    )
    return list(User.objects.filter(pk__in=list(ids)))
