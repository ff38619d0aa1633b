"""Django's admin of accounts (review/admin/accounts.py): second factors shown without their
secrets, email addresses read-only, and every change audited, a removed TOTP included."""

import pytest
from allauth.account.models import EmailAddress
from allauth.mfa.models import Authenticator
from django.urls import reverse

from review.models import AuditEvent
from tests import factories

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


def test_the_admin_never_shows_a_totp_secret(world, client):
    client.force_login(world.admin)
    authenticator = Authenticator.objects.get(user=world.clinician, type="totp")
    page = client.get(reverse("admin:mfa_authenticator_change", args=[authenticator.pk]))
    assert page.status_code == 200
    assert factories.TOTP_SECRET.encode() not in page.content
    assert authenticator.data["secret"].encode() not in page.content
    response = client.post(
        reverse("admin:mfa_authenticator_change", args=[authenticator.pk]),
        {"data": '{"secret": "AAAA"}'},
    )
    assert response.status_code == 403


def test_admins_cannot_change_or_verify_an_email_address(world, client):
    client.force_login(world.admin)
    address = EmailAddress.objects.get(user=world.clinician)
    url = reverse("admin:account_emailaddress_change", args=[address.pk])
    response = client.post(
        url, {"user": world.admin.pk, "email": "attacker@example.org", "verified": "on"}
    )
    assert response.status_code == 403
    address.refresh_from_db()
    assert address.email == "clinician@example.edu"
    assert client.get(reverse("admin:account_emailaddress_add")).status_code == 403


def test_an_admin_removing_a_users_totp_is_audited(world, client):
    client.force_login(world.admin)
    authenticator = Authenticator.objects.get(user=world.clinician, type="totp")
    response = client.post(
        reverse("admin:mfa_authenticator_delete", args=[authenticator.pk]), {"post": "yes"}
    )
    assert response.status_code == 302
    event = AuditEvent.objects.get(action=Action.MFA_CHANGED, actor=world.admin)
    assert event.details["user"] == world.clinician.email
    assert event.details["change"] == "removed by an admin"


def test_admin_changes_are_audited(world, client):
    client.force_login(world.admin)
    url = reverse("admin:review_user_change", args=[world.clinician_other.pk])
    response = client.post(url, {"full_name": "Renamed", "is_active": "on"})
    assert response.status_code == 302
    event = AuditEvent.objects.get(action=Action.ADMIN_CHANGED, object_type="User")
    assert event.actor == world.admin and event.details["change"] == "changed"
