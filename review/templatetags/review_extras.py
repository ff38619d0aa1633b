"""Small presentation filters for the app's templates."""

from django import template
from django.utils.html import conditional_escape, format_html

register = template.Library()


@register.filter
def chunked(value: str, size: int = 4) -> str:
    """'ABCDEFGH' -> 'ABCD EFGH': long codes (a TOTP secret) read, copy and wrap in groups."""
    text = str(value or "")
    size = max(1, int(size))
    return " ".join(text[i : i + size] for i in range(0, len(text), size))


@register.filter
def email_wrap(value: str) -> str:
    """An email address that may wrap before its "@" on a narrow screen (no CSS needed)."""
    local, at, domain = str(value or "").partition("@")
    if not at:
        return conditional_escape(value)
    return format_html("{}<wbr>@{}", local, domain)
