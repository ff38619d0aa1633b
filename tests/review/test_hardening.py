"""Issue 10's findings, one test (or a few) each: second factor per sign-in, protected factors,
limits per account and address, audited admin reads, fail-closed settings, smaller findings.

The multi-process ones (rate limits and TOTP replay under gunicorn) are in
test_multiprocess_limits.py; the settings ones in tests/test_settings.py.
"""

from datetime import timedelta

import pytest
from allauth.mfa.models import Authenticator
from django.urls import reverse
from django.utils import timezone

from review.access import user_access
from review.allauth_compat import TOTP
from review.models import AccessApplication, AuditEvent, Event, Role
from review.services import accounts as services
from tests import factories

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


def _note_url(world) -> str:
    event, _ = Event.objects.get_or_create(
        patient=world.patient, seq=1, defaults={"event_type": "note", "text": "Synthetic note."}
    )
    return reverse(
        "record_event", kwargs={"instruction_id": world.instruction.pk, "event_id": event.pk}
    )


# --- 1. the second factor belongs to the sign-in ------------------------------------------------
def test_a_password_only_session_gets_no_record_once_totp_is_enrolled_elsewhere(world, client):
    # The reported path: signed in with the password before TOTP existed, TOTP set up in another
    # session, then this session asked for a note (it used to get 200 with the note's text).
    Authenticator.objects.filter(user=world.clinician).delete()
    factories.sign_in(client, world.clinician, second_factor=False)
    TOTP.activate(world.clinician, factories.TOTP_SECRET)  # "elsewhere"
    response = client.get(_note_url(world))
    # A JSON endpoint: a JSON 401 that sends the page's sign-in window to the TOTP step.
    assert response.status_code == 401 and response.json()["error"] == "second_factor"
    assert response.json()["login_url"].startswith(reverse("mfa_reauthenticate"))
    assert b"Synthetic note" not in response.content
    page = client.get(reverse("clinician_queue"))
    assert page.status_code == 302
    assert page["Location"].startswith(reverse("mfa_reauthenticate"))


@pytest.mark.parametrize(
    ("kind", "url_name"),
    [("clinician", "clinician_queue"), ("researcher", "scoring_reports"), ("admin", "audit_log")],
)
def test_every_role_needs_the_second_factor_in_this_session(world, client, kind, url_name):
    factories.sign_in(client, getattr(world, kind), second_factor=False)
    response = client.get(reverse(url_name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("mfa_reauthenticate"))


def test_djangos_admin_refuses_a_password_only_session(world, client):
    factories.sign_in(client, world.admin, second_factor=False)
    assert client.get(reverse("admin:index"))["Location"].startswith(reverse("admin:login"))


def test_passing_totp_in_the_session_opens_the_records(world, client):
    factories.sign_in(client, world.clinician, second_factor=False)
    url = _note_url(world)
    step = client.get(url).json()["login_url"]
    response = client.post(step, {"code": factories.totp_code_fresh()})
    assert response.status_code == 302
    assert client.get(url).status_code == 200


@pytest.mark.django_db(transaction=True)  # allauth announces the new factor once it commits
def test_setting_up_totp_passes_the_second_factor_for_that_session_only(world, client):
    from review.allauth_compat import SECRET_SESSION_KEY

    Authenticator.objects.filter(user=world.clinician).delete()
    factories.sign_in(client, world.clinician, second_factor=False)
    other = client.__class__()
    factories.sign_in(other, world.clinician, second_factor=False)
    # allauth's set-up pages: the password again (no factor yet), then a code of the new secret.
    client.post(reverse("account_reauthenticate"), {"password": factories.PASSWORD})
    client.get(reverse("mfa_activate_totp"))
    code = factories.totp_code_fresh(client.session[SECRET_SESSION_KEY])
    assert client.post(reverse("mfa_activate_totp"), {"code": code}).status_code == 302
    assert client.get(_note_url(world)).status_code == 200
    # The other session did not show it; since issue 24 it is ended altogether.
    assert other.get(_note_url(world)).status_code == 401


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
