"""Text PostgreSQL can store.

PostgreSQL refuses a NUL character in ``text`` and in ``jsonb`` (``\\u0000`` too), and a lone
surrogate (half of a UTF-16 pair, which JSON can escape and browsers send from broken pastes)
has no UTF-8 form at all; SQLite stores both. Text from a request is checked with ``storable``
where it arrives, so it is refused by name with a 400 instead of failing as a 500 on one
database and not the other.
"""

UNSTORABLE = "holds a character that cannot be stored (a NUL, or half of a surrogate pair)"


def storable(text: str) -> bool:
    """Whether PostgreSQL can store ``text`` (in linear time: two passes in C)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
