"""Issue 10's findings, one test (or a few) each: second factor per sign-in, protected factors,
limits per account and address, audited admin reads, fail-closed settings, smaller findings.

The multi-process ones (rate limits and TOTP replay under gunicorn) are in
test_multiprocess_limits.py; the settings ones in tests/test_settings.py.
"""

import pytest
from django.urls import reverse

from review.models import AuditEvent

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


# --- 4. client addresses: X-Forwarded-For only from trusted proxies; limits per address --------
def test_the_audit_trail_ignores_x_forwarded_for_unless_a_proxy_is_trusted(world, client):
    client.post(
        reverse("account_login"),
        {"login": "nobody@example.edu", "password": "wrong"},
        HTTP_X_FORWARDED_FOR="203.0.113.9",
    )
    assert AuditEvent.objects.get(action=Action.LOGIN_FAILED).ip_address == "127.0.0.1"


def test_behind_one_trusted_proxy_the_audit_trail_records_the_client(world, client, settings):
    settings.ALLAUTH_TRUSTED_PROXY_COUNT = 1
    client.post(
        reverse("account_login"),
        {"login": "nobody@example.edu", "password": "wrong"},
        HTTP_X_FORWARDED_FOR="198.51.100.1, 203.0.113.9",  # spoofed first hop, then the client
    )
    assert AuditEvent.objects.get(action=Action.LOGIN_FAILED).ip_address == "203.0.113.9"
