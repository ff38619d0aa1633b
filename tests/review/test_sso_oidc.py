"""Sign-in through OpenID Connect, against allauth's own OpenID Provider running in a second
process (tests/sso): SSO proves who someone is, the DUA still grants access, and the app's TOTP
asks unless a provider trusted for it asserted multi-factor sign-in."""

from urllib.parse import parse_qs, urlsplit

import pytest
from allauth.account.models import EmailAddress
from allauth.socialaccount.models import SocialAccount
from django.urls import reverse

from review.models import AuditEvent, Role, User
from tests import factories
from tests.sso.fixtures import (
    oidc_come_back,
    oidc_sign_in,
    oidc_start,
    provider_entries,
    use_providers,
)

pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("sso")]


@pytest.fixture(autouse=True)
def _providers(settings, oidc_idp):
    use_providers(settings, provider_entries(oidc_idp))


start, come_back = oidc_start, oidc_come_back


def sign_in(client, provider_id: str, email: str):
    return come_back(client, oidc_sign_in(start(client, provider_id), email))


def nothing_stored_for(email: str) -> bool:
    return not (
        User.objects.filter(email__iexact=email).exists()
        or EmailAddress.objects.filter(email__iexact=email).exists()
        or SocialAccount.objects.filter(extra_data__id_token__email=email).exists()
    )


def refusals(reason: str) -> list[AuditEvent]:
    return [
        e
        for e in AuditEvent.objects.filter(action=AuditEvent.Action.SSO_REFUSED)
        if e.details.get("reason") == reason
    ]


# --- a new person ----------------------------------------------------------------------------
def test_a_new_person_signs_in_and_lands_on_the_application_and_dua_pages(client):
    response = sign_in(client, "hospital", "new.person@hospital.example")

    assert response.status_code == 302
    user = User.objects.get(email="new.person@hospital.example")
    assert not user.has_usable_password()  # signs in through the provider only
    assert user.full_name == "Nia New"
    assert EmailAddress.objects.get(user=user).verified  # a provider trusted for email
    assert SocialAccount.objects.get(user=user).provider == "hospital"
    # Signed in, and nothing more: the application and the DUA come first, as after a sign-up.
    home = client.get(reverse("home"))
    assert home.status_code == 302 and home["Location"] == reverse("application_status")
    assert client.get(reverse("clinician_queue")).status_code == 302
    event = AuditEvent.objects.get(action=AuditEvent.Action.SSO_LOGIN, actor=user)
    assert event.details == {"provider": "hospital", "second_factor": "none"}


def test_an_approved_account_needs_its_dua_and_approval_whatever_the_provider_says(client):
    sign_in(client, "hospital", "new.person@hospital.example")
    user = User.objects.get(email="new.person@hospital.example")
    # Only the app's approval opens the clinician pages; the provider's MFA is not asked here.
    factories.make_approved(user, [Role.CLINICIAN])
    client.logout()
    sign_in(client, "hospital", "new.person@hospital.example")
    # Approved without TOTP and without the provider's MFA: TOTP must be set up first.
    response = client.get(reverse("clinician_queue"))
    assert response.status_code == 302 and response["Location"] == reverse("mfa_activate_totp")


# --- joining an existing account -------------------------------------------------------------
def test_a_trusted_provider_joins_the_account_with_that_verified_email_and_totp_asks(client):
    user = factories.make_user("clinician2@hospital.example", roles=[Role.CLINICIAN])

    response = sign_in(client, "hospital", "clinician2@hospital.example")

    assert SocialAccount.objects.get(provider="hospital").user == user
    assert User.objects.filter(email__iexact="clinician2@hospital.example").count() == 1
    assert AuditEvent.objects.filter(action=AuditEvent.Action.SSO_LINKED, actor=user).exists()
    # The provider asserted no multi-factor sign-in: the app's TOTP step asks.
    assert response.status_code == 302 and response["Location"] == reverse("mfa_authenticate")
    assert client.get(reverse("clinician_queue")).status_code == 302
    done = client.post(reverse("mfa_authenticate"), {"code": factories.totp_code_fresh()})
    assert done.status_code == 302
    assert client.get(reverse("clinician_queue")).status_code == 200
    event = AuditEvent.objects.get(action=AuditEvent.Action.SSO_LOGIN, actor=user)
    assert event.details["second_factor"] == "totp"


def test_an_account_made_with_an_unconfirmed_address_loses_its_password_when_joined(client):
    # Someone made an account in the clinician's name and could not confirm the address: it
    # waits, with the maker's password, for the clinician's first sign-in.
    planted = factories.make_user("clinician2@hospital.example", verified=False)

    sign_in(client, "hospital", "clinician2@hospital.example")

    planted.refresh_from_db()
    assert SocialAccount.objects.get(provider="hospital").user == planted
    assert not planted.has_usable_password()
    event = AuditEvent.objects.get(action=AuditEvent.Action.SSO_LINKED)
    assert event.details["address_confirmed_here"] is False


def test_an_untrusted_provider_never_joins_an_account_by_its_email(client):
    factories.make_user("clinician2@hospital.example", roles=[Role.CLINICIAN])
    accounts = User.objects.count()

    response = sign_in(client, "partner", "clinician2@hospital.example")

    assert response.status_code == 401
    assert "not trusted to prove email addresses" in response.content.decode()
    assert not SocialAccount.objects.exists()
    assert User.objects.count() == accounts
    assert "_auth_user_id" not in client.session
    assert refusals("email_in_use")[0].details["provider"] == "partner"


def test_an_untrusted_provider_makes_a_new_account_whose_email_is_confirmed_by_email(
    client, mailoutbox
):
    response = sign_in(client, "partner", "mallory@partner.example")

    user = User.objects.get(email="mallory@partner.example")
    assert not EmailAddress.objects.get(user=user).verified
    # As after a local sign-up: a link is sent, and nobody is signed in until it is opened.
    assert response.status_code == 302
    assert response["Location"] == reverse("account_email_verification_sent")
    assert "_auth_user_id" not in client.session
    assert mailoutbox and mailoutbox[0].to == ["mallory@partner.example"]


# --- the second factor -----------------------------------------------------------------------
def test_a_trusted_providers_mfa_stands_for_totp(client):
    user = factories.make_user("clinician@hospital.example", roles=[Role.CLINICIAN])

    response = sign_in(client, "hospital", "clinician@hospital.example")

    assert response.status_code == 302 and response["Location"] != reverse("mfa_authenticate")
    assert client.get(reverse("clinician_queue")).status_code == 200
    event = AuditEvent.objects.get(action=AuditEvent.Action.SSO_LOGIN, actor=user)
    assert event.details == {"provider": "hospital", "second_factor": "idp"}


def test_a_trusted_providers_mfa_needs_no_totp_set_up_here(client):
    factories.make_user("admin@hospital.example", roles=[Role.ADMIN], totp=False)
    User.objects.filter(email="admin@hospital.example").update(is_staff=True)

    sign_in(client, "hospital", "admin@hospital.example")

    assert client.get(reverse("admin_applications")).status_code == 200
    assert client.get(reverse("admin:index")).status_code == 200


def test_an_untrusted_providers_mfa_does_not_stand_for_totp(client):
    # A first sign-in through the untrusted provider made the account; its address was then
    # confirmed and the account approved, with TOTP.
    sign_in(client, "partner", "clinician@hospital.example")
    user = User.objects.get(email="clinician@hospital.example")
    EmailAddress.objects.filter(user=user).update(verified=True)
    factories.TOTP.activate(user, factories.TOTP_SECRET)
    factories.make_approved(user, [Role.CLINICIAN])

    response = sign_in(client, "partner", "clinician@hospital.example")

    # The provider asserted MFA (amr "mfa"), but this installation does not trust it for that.
    assert SocialAccount.objects.get(user=user).extra_data["id_token"]["amr"] == [
        "pwd",
        "otp",
        "mfa",
    ]
    assert response.status_code == 302 and response["Location"] == reverse("mfa_authenticate")
    assert client.get(reverse("clinician_queue")).status_code == 302


# --- refusals: nothing is stored -------------------------------------------------------------
def test_a_sign_in_the_provider_refuses_is_refused_here_with_nothing_stored(client):
    authorize = start(client, "hospital")
    state = parse_qs(urlsplit(authorize).query)["state"][0]
    # What the provider sends back when it refuses (the user disabled there, or consent denied).
    response = client.get(
        reverse("openid_connect_callback", args=["hospital"]),
        {"error": "access_denied", "state": state},
    )
    assert response.status_code == 401
    assert "did not sign you in" in response.content.decode()
    assert not User.objects.exists() and not SocialAccount.objects.exists()
    assert refusals("refused_by_provider")[0].details["error"] == "access_denied"


def test_an_answer_to_a_sign_in_this_browser_did_not_start_is_refused(client):
    # A code (valid or not) with a state this session never stashed: a sign-in started in
    # another browser and sent to this one, or a replay.
    response = client.get(
        reverse("openid_connect_callback", args=["hospital"]), {"code": "x", "state": "y"}
    )
    assert response.status_code == 401
    assert "does not match one started in this browser" in response.content.decode()
    assert refusals("state")
    assert not User.objects.exists()


def test_a_person_disabled_at_the_provider_loses_access_at_the_next_sign_in(client, oidc_idp):
    user = factories.make_user("clinician2@hospital.example", roles=[Role.CLINICIAN])
    sign_in(client, "hospital", "clinician2@hospital.example")
    client.logout()
    disabled = {"email": "clinician2@hospital.example", "password": "x", "active": False}
    oidc_idp.setup({"users": [disabled]})
    try:
        # The provider no longer signs them in…
        assert oidc_sign_in(start(client, "hospital"), "clinician2@hospital.example") == ""
        # …and the password they had here no longer does either.
        response = client.post(
            reverse("account_login"),
            {"login": "clinician2@hospital.example", "password": factories.PASSWORD},
        )
        assert response.status_code == 200
        assert "signs in through Hospital sign-in" in response.content.decode()
        assert "_auth_user_id" not in client.session
        assert refusals("password_for_sso_account")[0].actor_email == user.email
    finally:
        oidc_idp.setup({"users": [{**disabled, "password": "idp-password-123", "active": True}]})


def test_a_tampered_id_token_is_refused_with_nothing_stored(client):
    # The provider's "tampered" client gets ID tokens changed after signing (amr: "mfa" added),
    # as a proxy between the two could change them.
    response = sign_in(client, "tampered", "new.person@hospital.example")

    assert response.status_code == 401
    assert "did not carry its valid signature" in response.content.decode()
    assert nothing_stored_for("new.person@hospital.example")
    assert refusals("invalid_signature")


def test_an_expired_id_token_is_refused_with_nothing_stored(client):
    response = sign_in(client, "expired", "new.person@hospital.example")

    assert response.status_code == 401
    assert "had expired" in response.content.decode()
    assert nothing_stored_for("new.person@hospital.example")
    assert refusals("expired")


def test_an_unknown_provider_is_not_found(client):
    assert client.post(reverse("openid_connect_login", args=["elsewhere"])).status_code == 404
    callback = client.get(reverse("openid_connect_callback", args=["elsewhere"]), {"code": "x"})
    assert callback.status_code == 404


def test_a_provider_added_in_the_database_is_not_used(client, oidc_idp):
    from allauth.socialaccount.models import SocialApp

    # Only SSO_PROVIDERS names providers: a row in Django's admin is one nobody set trust for.
    SocialApp.objects.create(
        provider="openid_connect",
        provider_id="rogue",
        name="Rogue",
        client_id="hospital",
        secret="secret-hospital",
        settings={"server_url": oidc_idp.base_url},
    )
    assert client.post(reverse("openid_connect_login", args=["rogue"])).status_code == 404


def test_the_sign_in_page_shows_each_providers_button(client):
    page = client.get(reverse("account_login")).content.decode()
    assert "Hospital sign-in" in page and "Partner sign-in" in page
    assert 'name="password"' in page  # local passwords stay on unless turned off


def test_a_signed_in_session_cannot_join_a_provider_identity_to_its_account(client):
    # A session that showed only a password could otherwise join an identity at a provider
    # trusted for MFA, and later sign in through it without the account's TOTP.
    user = factories.make_user("clinician2@hospital.example", roles=[Role.CLINICIAN])
    factories.sign_in(client, user, second_factor=False)
    response = client.post(
        reverse("openid_connect_login", args=["hospital"]), {"process": "connect"}
    )
    back = come_back(client, oidc_sign_in(response["Location"], "clinician@hospital.example"))

    assert back.status_code == 401
    assert "not from a signed-in session" in back.content.decode()
    assert not SocialAccount.objects.exists()
    assert refusals("connect")
