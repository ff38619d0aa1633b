"""URLs of ids alone, reversed once per process and filled in on every call.

A ``reverse()`` walks the resolver's candidates, converts and quotes each argument and checks the
result against the pattern: about a tenth of a millisecond here, and the review page builds a
dozen (its links, the navigation bar, its script's endpoints). For a route whose arguments are
all integers the answer is the same string with the ids in different places, so the route is
reversed once with stand-in ids and later calls only format the real ones in. The key holds the
script prefix and the thread's urlconf, the two things besides the arguments that ``reverse()``
reads for a name without a namespace.

``url_for`` serves views; the ``{% url %}`` builtin (review/templatetags/cached_url.py) serves
templates. A route that is not made of ids alone, or a name that does not reverse, goes to
``reverse()`` every time, so errors are Django's own.
"""

import functools

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse

# Ten digits, more than any id a converter could mistake for part of the route.
_ID_STAND_IN = 2_146_483_647


@functools.lru_cache(maxsize=512)
def _pattern(name: str, n_ids: int, prefix: str, urlconf: object) -> str | None:
    """The route with ``{}`` where each id goes; None when it cannot be built that way."""
    del prefix  # part of the key: reverse() reads it itself
    try:
        path = reverse(name, urlconf=urlconf, args=[_ID_STAND_IN] * n_ids)  # type: ignore[arg-type]
    except NoReverseMatch:
        return None
    stand_in = str(_ID_STAND_IN)
    if path.count(stand_in) != n_ids or "{" in path or "}" in path:
        return None
    return path.replace(stand_in, "{}")


def url_for(name: str, *ids: int) -> str:
    """``reverse(name, args=ids)`` for a route (without a namespace) of integer ids."""
    pattern = _pattern(name, len(ids), get_script_prefix(), get_urlconf())
    if pattern is None or any(int(i) < 0 for i in ids):
        # A negative id is no <int:> id: reverse() refuses it, and so must this.
        return reverse(name, args=ids)
    return pattern.format(*(int(i) for i in ids))


def clear() -> None:
    """Forget every route (tests that change the URLconf)."""
    _pattern.cache_clear()


@receiver(setting_changed)
def _urlconf_changed(*, setting: str, **_: object) -> None:
    if setting == "ROOT_URLCONF":  # override_settings in tests; never in a running server
        clear()
