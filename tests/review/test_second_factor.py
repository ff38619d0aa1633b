"""No side door past the second factor: it belongs to the sign-in, in every role.

Clinicians, researchers and admins reach protected pages, Django's admin included, only in a
session that passed TOTP (or a recovery code) itself; setting TOTP up counts for that session
only.

The reported path: a session signed in with the password while the account was an applicant
outlived the approval and the TOTP enrolment done elsewhere, re-authenticated with the password,
read the recovery codes and used one to pass the second factor; nothing was audited. Now the
account's other sessions end when a factor is added and when access is approved; the recovery
codes and TOTP deactivation need the second factor shown in this session, recently, not the
password; failed codes, lockouts, recovery-code views and uses are audited.
"""

import time

import pytest
from allauth.account.authentication import AUTHENTICATION_METHODS_SESSION_KEY
from allauth.mfa.models import Authenticator
from django.test import Client
from django.urls import reverse

from review.allauth_compat import RecoveryCodes
from review.models import AuditEvent, Role
from review.services import accounts as services
from tests import factories

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action

GUARDED = (
    "mfa_view_recovery_codes",
    "mfa_generate_recovery_codes",
    "mfa_download_recovery_codes",
    "mfa_deactivate_totp",
)


def _signed_out(client: Client) -> bool:
    response = client.get(reverse("application_status"))
    return response.status_code == 302 and response["Location"].startswith(reverse("account_login"))


def _add_totp_from(client: Client, user) -> None:  # noqa: ANN001
    """Set TOTP up in ``client``'s session through allauth's own pages: re-authenticate with the
    password (no factor yet), open the set-up page, type the code of the secret it shows."""
    from review.allauth_compat import SECRET_SESSION_KEY

    _reauthenticate_with_password(client)
    assert client.get(reverse("mfa_activate_totp")).status_code == 200
    secret = client.session[SECRET_SESSION_KEY]
    response = client.post(
        reverse("mfa_activate_totp"), {"code": factories.totp_code_fresh(secret)}
    )
    assert response.status_code == 302, response.status_code
    assert Authenticator.objects.filter(user=user, type="totp").exists()


def _age_the_second_factor(client: Client, seconds: int = 3600) -> None:
    session = client.session
    records = session[AUTHENTICATION_METHODS_SESSION_KEY]
    for record in records:
        record["at"] -= seconds
    session[AUTHENTICATION_METHODS_SESSION_KEY] = records
    session.save()


def _reauthenticate_with_password(client: Client) -> None:
    response = client.post(reverse("account_reauthenticate"), {"password": factories.PASSWORD})
    assert response.status_code == 302, response.status_code


# --- sessions end when a factor is added and when access is approved ---------------------------
def test_approving_access_ends_the_applicants_sessions(world, client):
    factories.sign_in(client, world.applicant, second_factor=False)
    assert not _signed_out(client)
    factories.open_certificate(world.admin, world.pending_application)
    services.application_approve(
        application=world.pending_application,
        reviewer=world.admin,
        roles=[Role.CLINICIAN],
        expires_on=world.pending_application.certificate_expires_on,
    )
    assert _signed_out(client)
    assert AuditEvent.objects.filter(action=Action.SESSIONS_ENDED, actor=world.applicant).exists()


@pytest.mark.django_db(transaction=True)  # allauth announces a new factor once it commits
def test_adding_a_factor_ends_the_accounts_other_sessions_and_keeps_this_one(world):
    user = world.clinician
    Authenticator.objects.filter(user=user).delete()
    here, elsewhere = Client(), Client()
    factories.sign_in(here, user, second_factor=False)
    factories.sign_in(elsewhere, user, second_factor=False)
    _add_totp_from(here, user)
    assert _signed_out(elsewhere)
    assert not _signed_out(here)
    # The session that set TOTP up has shown it: it reaches the records.
    assert here.get(reverse("clinician_queue")).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_reported_path_no_longer_reads_the_recovery_codes(world):
    # An applicant's password-only session; approval and enrolment happen elsewhere.
    user = world.applicant
    Authenticator.objects.filter(user=user).delete()
    stale = Client()
    factories.sign_in(stale, user, second_factor=False)
    factories.open_certificate(world.admin, world.pending_application)
    services.application_approve(
        application=world.pending_application,
        reviewer=world.admin,
        roles=[Role.ADMIN],
        expires_on=world.pending_application.certificate_expires_on,
    )
    user.refresh_from_db()
    enrolling = Client()
    factories.sign_in(enrolling, user, second_factor=False)
    _add_totp_from(enrolling, user)
    RecoveryCodes.activate(user)
    # The stale session is gone: re-authenticating with the password leads nowhere.
    response = stale.post(reverse("account_reauthenticate"), {"password": factories.PASSWORD})
    assert response.status_code == 302 and response["Location"].startswith(reverse("account_login"))
    codes = stale.get(reverse("mfa_view_recovery_codes"))
    assert codes.status_code == 302
    assert codes["Location"].startswith(reverse("account_login"))


# --- the recovery codes and TOTP deactivation need the second factor, not the password ---------
@pytest.mark.parametrize("url_name", GUARDED)
def test_a_password_only_session_cannot_reach_the_factors_with_its_password(
    world, client, url_name
):
    user = world.clinician
    RecoveryCodes.activate(user)
    factories.sign_in(client, user, second_factor=False)
    _reauthenticate_with_password(client)
    response = client.get(reverse(url_name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("mfa_reauthenticate"))
    assert not AuditEvent.objects.filter(action=Action.RECOVERY_CODES_VIEWED).exists()


@pytest.mark.parametrize("url_name", GUARDED)
def test_a_second_factor_long_ago_and_a_fresh_password_is_not_enough(world, client, url_name):
    user = world.clinician
    RecoveryCodes.activate(user)
    client.force_login(user)  # password and TOTP, an hour ago
    _age_the_second_factor(client)
    _reauthenticate_with_password(client)
    response = client.get(reverse(url_name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("mfa_reauthenticate"))


def test_the_codes_show_after_the_totp_step_and_the_view_is_audited(world, client):
    user = world.clinician
    RecoveryCodes.activate(user)
    client.force_login(user)
    _age_the_second_factor(client)
    url = reverse("mfa_view_recovery_codes")
    step = client.get(url)["Location"]
    assert step.startswith(reverse("mfa_reauthenticate"))
    assert client.post(step, {"code": factories.totp_code_fresh()}).status_code == 302
    page = client.get(url)
    assert page.status_code == 200
    codes = RecoveryCodes(Authenticator.objects.get(user=user, type="recovery_codes"))
    assert codes.get_unused_codes()[0] in page.content.decode()
    viewed = AuditEvent.objects.get(action=Action.RECOVERY_CODES_VIEWED)
    assert viewed.actor == user
    assert codes.get_unused_codes()[0] not in str(viewed.details)


def test_deactivating_totp_after_the_totp_step_works(world, client):
    user = world.clinician
    client.force_login(user)
    _age_the_second_factor(client)
    url = reverse("mfa_deactivate_totp")
    step = client.get(url)["Location"]
    assert client.post(step, {"code": factories.totp_code_fresh()}).status_code == 302
    assert client.post(url).status_code == 302
    assert not Authenticator.objects.filter(user=user, type="totp").exists()


# --- audit: failed codes, lockouts, recovery-code uses ---------------------------------------
def test_a_wrong_code_at_the_totp_step_is_audited(world, client):
    factories.sign_in(client, world.clinician, second_factor=False)
    response = client.post(reverse("mfa_reauthenticate"), {"code": "000000"})
    assert response.status_code == 200
    failed = AuditEvent.objects.get(action=Action.MFA_FAILED)
    assert failed.actor == world.clinician
    assert "000000" not in str(failed.details)


def test_a_wrong_code_at_sign_in_is_audited(world, client):
    user = world.clinician
    response = client.post(
        reverse("account_login"), {"login": user.email, "password": factories.PASSWORD}
    )
    assert response["Location"].startswith(reverse("mfa_authenticate"))
    client.post(reverse("mfa_authenticate"), {"code": "000000"})
    failed = AuditEvent.objects.get(action=Action.MFA_FAILED)
    assert failed.actor == user


def test_the_lockout_is_audited_and_says_how_long_it_lasts(world, client):
    factories.sign_in(client, world.clinician, second_factor=False)
    for _ in range(5):
        client.post(reverse("mfa_reauthenticate"), {"code": "000000"})
    assert AuditEvent.objects.filter(action=Action.MFA_FAILED).count() == 5
    locked = client.post(reverse("mfa_reauthenticate"), {"code": factories.totp_code_fresh()})
    text = locked.content.decode()
    assert "Too many wrong codes" in text
    assert "5 minutes" in text  # ACCOUNT_RATE_LIMITS: 5 per 5 minutes per account
    event = AuditEvent.objects.get(action=Action.MFA_LOCKED)
    assert event.actor == world.clinician and event.details["seconds"] <= 300


def test_a_password_lockout_is_audited_and_says_how_long_it_lasts(world, client):
    for _ in range(5):
        client.post(reverse("account_login"), {"login": world.clinician.email, "password": "x"})
    locked = client.post(
        reverse("account_login"), {"login": world.clinician.email, "password": "x"}
    )
    assert "Try again in 5 minutes" in locked.content.decode()
    event = AuditEvent.objects.get(action=Action.LOGIN_LOCKED)
    assert event.actor_email == world.clinician.email


def test_using_a_recovery_code_is_audited(world, client):
    user = world.clinician
    codes = RecoveryCodes.activate(user)
    code = codes.get_unused_codes()[0]
    factories.sign_in(client, user, second_factor=False)
    assert client.post(reverse("mfa_reauthenticate"), {"code": code}).status_code == 302
    used = AuditEvent.objects.get(action=Action.RECOVERY_CODE_USED)
    assert used.actor == user and code not in str(used.details)
    assert client.get(reverse("clinician_queue")).status_code == 200


def test_the_sign_in_time_of_records_is_what_the_guard_reads(world, client):
    # A session that passed TOTP just now reaches the codes page without another step.
    RecoveryCodes.activate(world.clinician)
    client.force_login(world.clinician)
    session = client.session
    session[AUTHENTICATION_METHODS_SESSION_KEY].append(
        {"method": "password", "at": time.time(), "reauthenticated": True}
    )
    session.save()
    assert client.get(reverse("mfa_view_recovery_codes")).status_code == 200


# --- the second factor belongs to the sign-in, in every role ----------------------------------
def test_a_password_only_session_gets_no_record_once_totp_is_enrolled_elsewhere(world, client):
    from review.allauth_compat import TOTP
    from tests.review.review_data import note_url

    # The reported path: signed in with the password before TOTP existed, TOTP set up in another
    # session, then this session asked for a note (it used to get 200 with the note's text).
    Authenticator.objects.filter(user=world.clinician).delete()
    factories.sign_in(client, world.clinician, second_factor=False)
    TOTP.activate(world.clinician, factories.TOTP_SECRET)  # "elsewhere"
    response = client.get(note_url(world))
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
    from tests.review.review_data import note_url

    factories.sign_in(client, world.clinician, second_factor=False)
    url = note_url(world)
    step = client.get(url).json()["login_url"]
    response = client.post(step, {"code": factories.totp_code_fresh()})
    assert response.status_code == 302
    assert client.get(url).status_code == 200


@pytest.mark.django_db(transaction=True)  # allauth announces the new factor once it commits
def test_setting_up_totp_passes_the_second_factor_for_that_session_only(world, client):
    from review.allauth_compat import SECRET_SESSION_KEY
    from tests.review.review_data import note_url

    Authenticator.objects.filter(user=world.clinician).delete()
    factories.sign_in(client, world.clinician, second_factor=False)
    other = client.__class__()
    factories.sign_in(other, world.clinician, second_factor=False)
    # allauth's set-up pages: the password again (no factor yet), then a code of the new secret.
    client.post(reverse("account_reauthenticate"), {"password": factories.PASSWORD})
    client.get(reverse("mfa_activate_totp"))
    code = factories.totp_code_fresh(client.session[SECRET_SESSION_KEY])
    assert client.post(reverse("mfa_activate_totp"), {"code": code}).status_code == 302
    assert client.get(note_url(world)).status_code == 200
    # The other session did not show it, and a factor added ends the account's other sessions.
    assert other.get(note_url(world)).status_code == 401
