"""Issue 10's findings, one test (or a few) each: second factor per sign-in, protected factors,
limits per account and address, audited admin reads, fail-closed settings, smaller findings.

The multi-process ones (rate limits and TOTP replay under gunicorn) are in
test_multiprocess_limits.py; the settings ones in tests/test_settings.py.
"""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from review.access import user_access
from review.models import AccessApplication, AuditEvent, Role
from review.services import accounts as services
from tests import factories

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


# --- 8. smaller findings --------------------------------------------------------------------------
def test_an_admin_cannot_approve_or_extend_their_own_access(world):
    with pytest.raises(services.AccountsError, match="Another admin"):
        services.application_set_roles(
            application=AccessApplication.objects.get(user=world.admin, status="approved"),
            reviewer=world.admin,
            roles=[Role.ADMIN, Role.CLINICIAN],
            expires_on=timezone.localdate() + timedelta(days=3000),
        )
    own = factories.make_application(factories.make_user("second@example.edu"))
    factories.open_certificate(own.user, own)
    with pytest.raises(services.AccountsError, match="Another admin"):
        services.application_approve(
            application=own,
            reviewer=own.user,
            roles=[Role.ADMIN],
            expires_on=timezone.localdate() + timedelta(days=30),
        )


def test_approval_requires_the_certificate_to_have_been_opened(world, client):
    pending = world.pending_application
    with pytest.raises(services.AccountsError, match="certificate"):
        services.application_approve(
            application=pending,
            reviewer=world.admin,
            roles=[Role.CLINICIAN],
            expires_on=timezone.localdate() + timedelta(days=30),
        )
    client.force_login(world.admin)
    url = reverse("admin_application_certificate", kwargs={"application_id": pending.pk})
    assert client.get(url).status_code == 200
    services.application_approve(
        application=pending,
        reviewer=world.admin,
        roles=[Role.CLINICIAN],
        expires_on=timezone.localdate() + timedelta(days=30),
    )
    assert user_access(pending.user).is_clinician
