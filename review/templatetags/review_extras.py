"""Small presentation filters for the app's templates."""

from django import template

register = template.Library()


@register.filter
def chunked(value: str, size: int = 4) -> str:
    """'ABCDEFGH' -> 'ABCD EFGH': long codes (a TOTP secret) read, copy and wrap in groups."""
    text = str(value or "")
    size = max(1, int(size))
    return " ".join(text[i : i + size] for i in range(0, len(text), size))
