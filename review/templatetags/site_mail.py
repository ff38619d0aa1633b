"""Whether this server prints its emails instead of sending them (the console backend, as
``make demo`` and an unconfigured server run): then the pages that wait for an email say where
its link is."""

from django import template
from django.conf import settings

register = template.Library()

CONSOLE_BACKEND = "django.core.mail.backends.console.EmailBackend"


@register.simple_tag
def emails_printed() -> bool:
    return bool(settings.EMAIL_BACKEND == CONSOLE_BACKEND)
