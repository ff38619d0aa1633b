"""Signals the review app sends for other apps to act on (the scoring app ends API tokens)."""

from django.dispatch import Signal

# A user's access changed: approved, revoked, roles or expiry changed (review.services.accounts,
# in the transaction that made the change). Arguments: ``user``, ``reason``.
access_changed = Signal()
