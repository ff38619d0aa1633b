"""In a real browser: sign up, verify, set up TOTP, apply, confirm the institutional email, get
approved, sign in again (approval ends the applicant's sessions), reach the queue; then be
revoked and turned away."""

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from review.models import AccessApplication, Role
from review.services import accounts as services
from tests import factories

EMAIL = "dana.clinician@hospital.example.edu"
PASSWORD = "Violet-Harbor-Lantern-42"
FULL_NAME = "Dana Clinician"


def sign_in(page, base: str, email: str, password: str) -> None:
    page.goto(base + reverse("account_login"))
    page.fill("input[name=login]", email)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_signup_to_queue_and_revocation(live_server, page, browser):
    base = live_server.url
    mail.outbox.clear()
    # A transactional test that ran before this one flushed the seeded DUA: publish one if so.
    factories.active_dua()

    # Sign up; the verification link arrives by email.
    page.goto(base + reverse("account_signup"))
    page.fill("input[name=email]", EMAIL)
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/accounts/confirm-email/"))
    assert len(mail.outbox) == 1
    link = re.search(r"https?://\S+/accounts/confirm-email/\S+", mail.outbox[0].body).group(0)
    page.goto(link)
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/accounts/login/"))

    # Sign in: not approved yet, so the application page.
    sign_in(page, base, EMAIL, PASSWORD)
    page.wait_for_url(base + reverse("application_status"))

    # Set up TOTP with the secret shown on the page.
    # allauth asks for the password again before adding a second factor.
    page.goto(base + reverse("mfa_activate_totp"))
    page.wait_for_url(re.compile(r"/accounts/reauthenticate/"))
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(base + reverse("mfa_activate_totp"))
    secret = page.input_value("#authenticator_secret")
    page.fill("input[name=code]", factories.totp_code_fresh(secret))
    page.click("main button[type=submit]")
    page.wait_for_url(lambda url: "/totp/activate" not in url)
    from review.models import AuditEvent

    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.MFA_CHANGED, actor_email=EMAIL, details__change="added"
    ).exists()

    # Apply, with a small PDF certificate and the DUA signature.
    today = timezone.localdate()
    page.goto(base + reverse("application_apply"))
    assert "Data Use Agreement" in page.inner_text(".dua")
    page.fill("input[name=full_name]", FULL_NAME)
    page.fill("input[name=institution]", "Example University Hospital")
    # Another address than the one signed up with (that one allauth verified already, which
    # counts): this one has to be proved by its own link.
    page.fill("input[name=institutional_email]", "dana.work@hospital.example.edu")
    page.select_option("select[name=requested_role]", "clinician")
    page.fill("textarea[name=research_use]", "Rank model answers for an evaluation.")
    page.set_input_files(
        "input[name=certificate]",
        {"name": "training.pdf", "mimeType": "application/pdf", "buffer": factories.PDF_BYTES},
    )
    page.fill("input[name=certificate_completed_on]", str(today - timedelta(days=20)))
    page.fill("input[name=certificate_expires_on]", str(today + timedelta(days=700)))
    page.check("input[name=storage_attestation]")
    page.fill("input[name=typed_name]", FULL_NAME)
    mail.outbox.clear()
    page.click("main button[type=submit]")
    page.wait_for_url(base + reverse("application_status"))
    assert "pending review" in page.inner_text("[data-testid=access-status]")
    application = AccessApplication.objects.get(user__email=EMAIL)

    # The institutional email gets a link; opening it (signed in) and confirming verifies it.
    assert "not confirmed yet" in page.inner_text("[data-testid=institutional-email]")
    (sent,) = [m for m in mail.outbox if m.to == ["dana.work@hospital.example.edu"]]
    link = re.search(r"https?://\S+/access/verify-email/\S+", sent.body).group(0)
    page.goto(link)
    page.click("[data-testid=verify-email]")
    page.wait_for_url(base + reverse("application_status"))
    assert "confirmed" in page.inner_text("[data-testid=institutional-email]")

    # An admin approves in the in-app queue, in their own browser session.
    admin = factories.make_user("boss@example.edu", roles=[Role.ADMIN], full_name="Boss")
    admin_context = browser.new_context()
    admin_page = admin_context.new_page()
    sign_in(admin_page, base, admin.email, factories.PASSWORD)
    admin_page.fill("input[name=code]", factories.totp_code_fresh())
    admin_page.click("main button[type=submit]")
    admin_page.wait_for_url(base + reverse("home"))
    admin_page.goto(base + reverse("admin_applications"))
    # Approval requires the certificate to have been opened (a download: fetched, not shown).
    certificate = admin_page.request.get(
        base + reverse("admin_application_certificate", args=[application.pk])
    )
    assert certificate.status == 200
    admin_page.click(f"a[href='{reverse('admin_application_detail', args=[application.pk])}']")
    admin_page.check("input[name=decision][value=approve]")
    admin_page.check("input[name=roles][value=clinician]")
    admin_page.click("[data-testid=decision-form] button[type=submit]")
    admin_page.wait_for_url(base + reverse("admin_applications"))
    admin_context.close()
    application.refresh_from_db()
    assert application.status == "approved"
    assert any("approved" in m.subject for m in mail.outbox)

    # Approval ended the applicant's session: they sign in again, password and TOTP, and now
    # reach their queue (or, before it exists, the clinician home).
    page.goto(base + reverse("home"))
    page.wait_for_url(re.compile(r"/accounts/login/"))
    sign_in(page, base, EMAIL, PASSWORD)
    page.wait_for_url(re.compile(r"/2fa/authenticate/"))
    page.fill("input[name=code]", factories.totp_code_fresh(secret))
    page.click("main button[type=submit]")
    page.wait_for_url(lambda url: "/2fa/" not in url)
    page.goto(base + reverse("home"))
    try:
        queue_url = base + reverse("clinician_queue")
    except Exception:
        queue_url = None
    if queue_url and page.url == queue_url:
        assert page.url == queue_url
    else:
        assert page.locator("[data-testid=clinician-home]").is_visible()

    # Revoked: turned away from the queue, to the application page with the reason.
    services.application_revoke(application=application, reviewer=admin, reason="Study closed.")
    page.goto(queue_url or base + reverse("home"))
    assert page.url == base + reverse("application_status")
    assert "Study closed." in page.inner_text("[data-testid=decision-reason]")
