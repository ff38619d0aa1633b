"""The site's name and absolute address, for emails (which are read outside the browser, so
every link in them must be absolute and say which site sent it)."""

from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest

DEFAULT_SITE_URL = "http://localhost:8000"


@dataclass(frozen=True)
class SiteIdentity:
    """Stands in for django.contrib.sites' Site in allauth's email templates."""

    name: str
    domain: str


def site_url(request: HttpRequest | None = None) -> str:
    """The site's base URL without a trailing slash.

    ``SITE_URL`` when it is set (a deployment behind a proxy knows its public address best);
    else the address the request came to; else the local default, for mail sent from a worker.
    """
    configured = getattr(settings, "SITE_URL", "")
    if configured:
        return configured.rstrip("/")
    if request is not None:
        return request.build_absolute_uri("/").rstrip("/")
    return DEFAULT_SITE_URL


def site_identity(request: HttpRequest | None = None) -> SiteIdentity:
    return SiteIdentity(name=settings.SITE_NAME, domain=urlsplit(site_url(request)).netloc)


def absolute(path: str, request: HttpRequest | None = None) -> str:
    return site_url(request) + path
