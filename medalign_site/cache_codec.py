"""What the shared cache holds: JSON, signed for the key it was written under, never a pickle.

Django's cache backends pickle what they store, and unpickling runs code: anyone who could write
to Redis (or to the database cache's table) could make a web process run a command of theirs
the next time it read a session or an access entry. Every value the app
writes is therefore JSON (with dates and datetimes tagged), signed with Django's ``Signer``
(HMAC-SHA256 under ``SECRET_KEY``) over the full cache key, the value's expiry and the JSON. A
value is read back only if its signature holds for the key it is read from and it has not
expired, so a value planted by someone without the key is a miss (the app then reads the
database), never code and never data: a forged access entry or session cannot grant anything,
a valid entry copied under another user's key is refused, and a captured entry replayed after
its lifetime is refused too.
"""

import json
import logging
import time
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.core import signing
from django.utils.crypto import constant_time_compare

logger = logging.getLogger(__name__)

SALT = "medalign_site.cache"


class CacheValueRefused(ValueError):
    """A stored value this app did not write (or wrote for another key), or one that expired."""


def _default(value: Any) -> Any:
    # The access entry carries the user's and the application's rows (review.access).
    if isinstance(value, datetime):
        return {"$dt": value.isoformat()}
    if isinstance(value, date):
        return {"$d": value.isoformat()}
    raise TypeError(f"the shared cache stores JSON, not {type(value).__name__}")


def _object_hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        if "$dt" in obj:
            return datetime.fromisoformat(obj["$dt"])
        if "$d" in obj:
            return date.fromisoformat(obj["$d"])
    return obj


_signers: dict[str, signing.Signer] = {}


def _signer() -> signing.Signer:
    # One per SECRET_KEY (tests change settings); building one is cheap but not free.
    key = settings.SECRET_KEY
    signer = _signers.get(key)
    if signer is None:
        signer = _signers[key] = signing.Signer(key=key, salt=SALT, algorithm="sha256")
    return signer


def _signature(key: str, expires: int, payload: str) -> str:
    return _signer().signature(f"{key}\n{expires}\n{payload}")


def encode(key: str, value: Any, *, expires_at: float | None) -> str:
    """``value`` as stored under ``key``: ``expiry:signature:json``. ``expires_at`` is a Unix
    time, or None for a value without expiry (stored as 0)."""
    expires = 0 if expires_at is None else int(expires_at) + 1
    payload = json.dumps(value, default=_default, separators=(",", ":"), ensure_ascii=False)
    return f"{expires}:{_signature(key, expires, payload)}:{payload}"


def decode(key: str, stored: bytes | str) -> Any:
    """The value stored under ``key``, or ``CacheValueRefused``. Nothing is evaluated before the
    signature is checked, and the JSON parser builds only plain values."""
    try:
        text = stored.decode() if isinstance(stored, bytes) else stored
        raw_expires, signature, payload = text.split(":", 2)
        expires = int(raw_expires)
    except (UnicodeDecodeError, ValueError):
        raise CacheValueRefused("not a value this app wrote") from None
    if not constant_time_compare(signature, _signature(key, expires, payload)):
        raise CacheValueRefused("not a value this app wrote")
    if expires and expires < time.time():
        raise CacheValueRefused("expired")
    return json.loads(payload, object_hook=_object_hook)


def decode_or_miss(key: str, stored: bytes | str) -> tuple[bool, Any]:
    """(True, value), or (False, None) for a refused value, which is logged: a refusal other
    than expiry means someone else wrote to the cache (or SECRET_KEY changed)."""
    try:
        return True, decode(key, stored)
    except CacheValueRefused as exc:
        if str(exc) != "expired":
            # The key is not logged: a session's cache key holds its session id.
            logger.warning(
                "shared cache: refused a value this app did not write (%d bytes)", len(stored)
            )
        return False, None
