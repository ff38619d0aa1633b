from typing import Any

from allauth.account.adapter import DefaultAccountAdapter
from allauth.core import context as allauth_context

from review.site import site_identity, site_url


class AccountAdapter(DefaultAccountAdapter):
    """Project account adapter (hook point for signup rules)."""

    def send_mail(self, template_prefix: str, email: str, context: dict[str, Any]) -> None:
        # Without django.contrib.sites allauth names the site after the request's host
        # ("Hello from localhost:8000!"); every email names MedAlign Review and its address.
        request = allauth_context.request
        context = {
            **context,
            "current_site": site_identity(request),
            "site_url": site_url(request),
        }
        super().send_mail(template_prefix, email, context)
