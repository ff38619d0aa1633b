"""Authentication backends that take the signed-in user from the shared access entry.

Every request reads its user: Django's ``get_user`` asks the session's backend for the row, a
query of its own on every request of the annotation path. The access evaluation that follows
(review.access.user_access) already lives in the shared cache, cleared whenever anything it
depends on changes; the user row now travels in the same entry, cleared the same way and also
whenever the row itself is saved or deleted (review.receivers). One cache read then gives a
request both. A miss (no entry, another day, a new DUA version, ACCESS_CACHE_SECONDS=0) reads
the database as before; Django's session checks (the session hash, ``is_active``) run on the
cached user exactly as on a fresh one.
"""

from typing import Any

from allauth.account.auth_backends import AuthenticationBackend as AllauthBackend
from django.contrib.auth.backends import ModelBackend as DjangoModelBackend

from review.access import cached_user
from review.models import User


class _CachedUser:
    def get_user(self, user_id: Any) -> User | None:
        user, generation = cached_user(user_id)
        if user is None:
            fresh: User | None = super().get_user(user_id)  # type: ignore[misc]
            if fresh is not None:
                # Read in this generation: its row may go into the entry this request writes.
                fresh._access_generation = generation
            return fresh
        return user if self.user_can_authenticate(user) else None  # type: ignore[attr-defined]


class ModelBackend(_CachedUser, DjangoModelBackend):
    """Django's backend (the admin's sign-in, ``force_login``) with the cached user."""


class AuthenticationBackend(_CachedUser, AllauthBackend):  # type: ignore[misc]
    """allauth's backend (email and password sign-in) with the cached user."""
