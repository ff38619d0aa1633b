"""LOCAL_PASSWORDS=false: only identity providers sign people in, and local sign-up is closed;
an operator's one-time break-glass link (manage.py sso_break_glass) lets one account in with its
password and TOTP, once."""

from io import StringIO
from urllib.parse import urlsplit

import pytest
from django.core import signing
from django.core.management import CommandError, call_command
from django.urls import reverse

from review.models import AuditEvent, Role
from tests import factories
from tests.sso.fixtures import use_providers

pytestmark = pytest.mark.django_db
PROVIDER = {
    "id": "hospital",
    "protocol": "oidc",
    "name": "Hospital sign-in",
    "server_url": "http://127.0.0.1:9",  # never reached: these tests stop at the app's pages
    "client_id": "hospital",
    "client_secret_env": "TEST_SSO_HOSPITAL_SECRET",
}


@pytest.fixture(autouse=True)
def _only_sso(settings):
    use_providers(settings, [PROVIDER])
    settings.LOCAL_PASSWORDS = False


def password_sign_in(client, email: str):
    return client.post(reverse("account_login"), {"login": email, "password": factories.PASSWORD})


def break_glass_link(email: str) -> str:
    out, err = StringIO(), StringIO()
    call_command("sso_break_glass", email, stdout=out, stderr=err)
    return urlsplit(out.getvalue().strip()).path


def test_the_sign_in_page_offers_only_the_providers(client):
    page = client.get(reverse("account_login")).content.decode()
    assert "Hospital sign-in" in page
    assert 'name="password"' not in page
    assert "sign up" not in page


def test_local_sign_up_is_closed(client):
    response = client.post(
        reverse("account_signup"),
        {
            "email": "x@example.edu",
            "password1": "a-long-password-1",
            "password2": "a-long-password-1",
        },
    )
    assert "closed" in response.content.decode().lower()
    assert not factories.User.objects.filter(email="x@example.edu").exists()


def test_a_password_sign_in_is_refused_and_audited(client):
    factories.make_user("admin@example.edu", roles=[Role.ADMIN])

    response = password_sign_in(client, "admin@example.edu")

    assert response.status_code == 200
    assert "Password sign-in is turned off here" in response.content.decode()
    assert "_auth_user_id" not in client.session
    event = AuditEvent.objects.get(action=AuditEvent.Action.LOGIN_FAILED)
    assert event.details == {"reason": "local passwords are off"}


def test_the_break_glass_link_lets_one_account_in_with_password_and_totp_once(client):
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    factories.make_user("other@example.edu", roles=[Role.CLINICIAN])
    link = break_glass_link("admin@example.edu")

    opened = client.get(link)
    assert opened.status_code == 302 and opened["Location"] == reverse("account_login")
    assert 'name="password"' in client.get(reverse("account_login")).content.decode()
    # Only the account the link names.
    assert "turned off here" in password_sign_in(client, "other@example.edu").content.decode()
    response = password_sign_in(client, "admin@example.edu")
    assert response.status_code == 302 and response["Location"] == reverse("mfa_authenticate")
    client.post(reverse("mfa_authenticate"), {"code": factories.totp_code_fresh()})
    assert client.get(reverse("admin_applications")).status_code == 200

    again = client.get(link)
    assert again.status_code == 400 and "used already" in again.content.decode()
    steps = [
        e.details["step"] for e in AuditEvent.objects.filter(action=AuditEvent.Action.BREAK_GLASS)
    ]
    assert sorted(steps) == ["issued", "opened", "refused"]
    assert AuditEvent.objects.filter(actor=admin, action=AuditEvent.Action.BREAK_GLASS).count() == 3


def test_an_expired_or_forged_break_glass_link_is_refused(client, monkeypatch, settings):
    factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    real_time = signing.time.time
    monkeypatch.setattr(
        signing.time, "time", lambda: real_time() - settings.SSO_BREAK_GLASS_MINUTES * 60 - 5
    )
    link = break_glass_link("admin@example.edu")
    monkeypatch.setattr(signing.time, "time", real_time)

    assert "has expired" in client.get(link).content.decode()
    forged = client.get(reverse("sso_break_glass", args=["abc:def"]))
    assert forged.status_code == 400 and "not a valid" in forged.content.decode()
    assert "_auth_user_id" not in client.session


def test_the_command_names_what_is_missing():
    with pytest.raises(CommandError, match="no account"):
        break_glass_link("nobody@example.edu")
    user = factories.make_user("sso-only@example.edu")
    user.set_unusable_password()
    user.save()
    with pytest.raises(CommandError, match="has no password here"):
        break_glass_link("sso-only@example.edu")
