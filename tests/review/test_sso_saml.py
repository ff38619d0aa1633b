"""Sign-in through SAML 2.0 against pysaml2's IdP on loopback (tests/sso/saml_idp.py): the same
rules as OpenID Connect, with the assertion's AuthnContextClassRef as its MFA claim."""

import base64
from urllib.parse import urlsplit

import pytest
from allauth.account.models import EmailAddress
from allauth.socialaccount.models import SocialAccount
from django.urls import reverse

from review.models import AuditEvent, Role, User
from tests import factories
from tests.sso.fixtures import provider_entries, saml_sign_in, use_providers

pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("sso")]


@pytest.fixture(autouse=True)
def _providers(settings, saml_idp, client):
    use_providers(settings, provider_entries(saml=saml_idp))
    # python3-saml reads the Host header itself (browsers always send one), and wants a name
    # with a dot in it.
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "review.test"]
    client.defaults["HTTP_HOST"] = "review.test"


def at_idp(client, org: str, email: str) -> tuple[str, dict[str, str]]:
    """Press the provider's button and sign in at the IdP: where its page posts, and what."""
    response = client.post(reverse("saml_login", args=[org]))
    assert response.status_code == 302, response.content[:300]
    return saml_sign_in(response["Location"], email)


def post_back(client, acs: str, fields: dict[str, str]):
    """The IdP's page posts to the ACS; allauth then finishes on a GET of its own."""
    answer = client.post(urlsplit(acs).path, fields)
    assert answer.status_code == 302, answer.content[:300]
    return client.get(answer["Location"])


def sign_in(client, org: str, email: str):
    return post_back(client, *at_idp(client, org, email))


def nothing_stored_for(email: str) -> bool:
    return not (
        User.objects.filter(email__iexact=email).exists()
        or EmailAddress.objects.filter(email__iexact=email).exists()
        or SocialAccount.objects.exists()
    )


def refusal() -> AuditEvent:
    return AuditEvent.objects.get(action=AuditEvent.Action.SSO_REFUSED)


def test_a_new_person_signs_in_and_lands_on_the_application_pages(client):
    response = sign_in(client, "university", "new.scholar@university.example")

    assert response.status_code == 302
    user = User.objects.get(email="new.scholar@university.example")
    assert EmailAddress.objects.get(user=user).verified
    assert SocialAccount.objects.get(user=user).uid == "u-new"  # the persistent NameID
    assert client.get(reverse("home"))["Location"] == reverse("application_status")


def test_a_trusted_idps_mfa_context_stands_for_totp(client):
    user = factories.make_user("clinician@university.example", roles=[Role.CLINICIAN])

    sign_in(client, "university", "clinician@university.example")

    assert SocialAccount.objects.get(user=user).provider == "university"
    assert client.get(reverse("clinician_queue")).status_code == 200
    event = AuditEvent.objects.get(action=AuditEvent.Action.SSO_LOGIN, actor=user)
    assert event.details == {"provider": "university", "second_factor": "idp"}


def test_a_password_only_context_still_asks_totp(client):
    factories.make_user("clinician2@university.example", roles=[Role.CLINICIAN])

    response = sign_in(client, "university", "clinician2@university.example")

    assert response["Location"] == reverse("mfa_authenticate")
    assert client.get(reverse("clinician_queue")).status_code == 302


def test_an_untrusted_idps_mfa_context_still_asks_totp(client):
    sign_in(client, "college", "clinician@university.example")
    user = User.objects.get(email="clinician@university.example")
    assert not EmailAddress.objects.get(user=user).verified  # not trusted for email either
    EmailAddress.objects.filter(user=user).update(verified=True)
    factories.TOTP.activate(user, factories.TOTP_SECRET)
    factories.make_approved(user, [Role.CLINICIAN])

    response = sign_in(client, "college", "clinician@university.example")

    assert response["Location"] == reverse("mfa_authenticate")
    assert client.get(reverse("clinician_queue")).status_code == 302


def test_a_sign_in_the_idp_refuses_is_refused_with_nothing_stored(client):
    response = sign_in(client, "university", "refused@university.example")

    assert response.status_code == 401
    assert "did not sign you in" in response.content.decode()
    assert nothing_stored_for("refused@university.example")
    assert refusal().details["reason"] == "refused_by_provider"


def test_a_tampered_response_is_refused_with_nothing_stored(client):
    acs, fields = at_idp(client, "university", "new.scholar@university.example")
    xml = base64.b64decode(fields["SAMLResponse"]).decode()
    assert "new.scholar@university.example" in xml
    # Someone between the IdP and the app names another person in the signed assertion.
    forged = xml.replace("new.scholar@university.example", "dean@university.example")
    fields["SAMLResponse"] = base64.b64encode(forged.encode()).decode()

    response = post_back(client, acs, fields)

    assert response.status_code == 401
    assert "did not carry its valid signature" in response.content.decode()
    assert nothing_stored_for("dean@university.example")
    assert refusal().details["reason"] == "invalid_signature"


def test_an_expired_assertion_is_refused_with_nothing_stored(client):
    response = sign_in(client, "university", "late@university.example")

    assert response.status_code == 401
    assert "had expired" in response.content.decode()
    assert nothing_stored_for("late@university.example")
    assert refusal().details["reason"] == "expired"


def test_a_response_for_another_provider_or_none_is_refused(client):
    acs, fields = at_idp(client, "university", "new.scholar@university.example")
    # The answer to the university's request, posted to an IdP this installation does not
    # have: not found; to the college's ACS: not the answer to any request of the college's.
    assert post_back(client, acs.replace("/university/", "/elsewhere/"), fields).status_code == 404
    response = post_back(client, acs.replace("/university/", "/college/"), fields)
    assert response.status_code == 401
    assert nothing_stored_for("new.scholar@university.example")
