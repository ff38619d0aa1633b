"""Single sign-on in Chromium, against allauth's OpenID Provider in a second process: the
hospital's button, the provider's own sign-in page, back to the clinician's queue without the
TOTP step (the provider is trusted for MFA and asserted it), and the session ended by the
provider's back-channel logout when the person signs out there."""

import pytest
from django.urls import reverse

from review.models import AuditEvent, Role
from tests import factories
from tests.e2e.test_accessibility import assert_no_axe_violations
from tests.sso.fixtures import PASSWORD, oidc_spec, provider_entries, use_providers

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.xdist_group("sso"),
]


@pytest.fixture
def backchannel(oidc_idp, live_server):
    """The hospital's client at the provider, told this app's address (the provider matches
    a "localhost" callback by its port too) and where its back-channel logout is."""
    spec = oidc_spec()
    for client in spec["clients"]:
        if client["id"] == "hospital":
            client["redirect_uris"].append(
                live_server.url + reverse("openid_connect_callback", args=["hospital"])
            )
            client["backchannel_logout_uri"] = live_server.url + reverse(
                "sso_backchannel_logout", args=["hospital"]
            )
    oidc_idp.setup({"clients": spec["clients"]})
    yield
    oidc_idp.setup({"clients": oidc_spec()["clients"]})


def test_a_clinician_signs_in_through_the_hospital_and_is_signed_out_by_it(
    live_server,
    page,
    settings,
    oidc_idp,
    backchannel,
):
    use_providers(settings, provider_entries(oidc_idp))
    factories.active_dua()
    factories.make_user("clinician@hospital.example", roles=[Role.CLINICIAN])
    violations: list[str] = []
    page.on(
        "console", lambda m: violations.append(m.text) if "Content Security" in m.text else None
    )

    page.goto(live_server.url + reverse("account_login"))
    assert_no_axe_violations(page, "sign-in with identity providers")
    page.get_by_role("link", name="Hospital sign-in").click()
    assert_no_axe_violations(page, "identity provider confirmation")
    page.get_by_role("button", name="Continue").click()
    # The provider's own sign-in page (another origin).
    page.wait_for_url(f"{oidc_idp.base_url}/**")
    page.fill("input[name=login]", "clinician@hospital.example")
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign In").click()

    # Back at the app, past the second factor: the provider asserted MFA and is trusted for it.
    page.wait_for_url(live_server.url + reverse("clinician_queue"))
    assert page.get_by_role("heading", level=1).is_visible()
    assert not violations, violations

    # Signing out at the provider ends the session here, through its back channel.
    idp = page.context.new_page()
    idp.goto(f"{oidc_idp.base_url}/accounts/logout/")
    idp.get_by_role("button", name="Sign Out").click()
    idp.wait_for_url(f"{oidc_idp.base_url}/**")
    page.reload()
    assert page.url.startswith(live_server.url + reverse("account_login"))
    assert AuditEvent.objects.filter(action=AuditEvent.Action.SSO_LOGOUT).count() == 1

    # A refused sign-in says why, in the app's layout.
    callback = reverse("openid_connect_callback", args=["hospital"])
    page.goto(f"{live_server.url}{callback}?code=x&state=not-this-browsers")
    assert "does not match one started in this browser" in page.get_by_role("alert").inner_text()
    assert_no_axe_violations(page, "sign-in refused")
