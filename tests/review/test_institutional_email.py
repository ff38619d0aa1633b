"""The institutional email an applicant names is confirmed by a link sent to it (signed by
review.services.accounts.institutional_email_token, opened by the application_verify_email
view): approval waits for it; a link works only for its own application and address; an address
the account has already verified is not asked again.
"""

import re
from datetime import timedelta

import pytest
from allauth.account.models import EmailAddress
from django.core import mail
from django.test import Client, TestCase
from django.urls import reverse
from django.utils import timezone

from review.models import AccessApplication, AuditEvent
from review.services import accounts as services
from tests import factories

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


def _applied_through_the_page(client, user, institutional_email: str):  # noqa: ANN001, ANN202
    mail.outbox.clear()
    client.force_login(user)
    today = timezone.localdate()
    # The link is mailed once the application's transaction commits.
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = _apply(client, user, institutional_email, today)
    assert response.status_code == 302, response.context["form"].errors
    return AccessApplication.objects.get(user=user, status="pending")


def _apply(client, user, institutional_email, today):  # noqa: ANN001, ANN202
    return client.post(
        reverse("application_apply"),
        {
            "full_name": user.full_name,
            "institution": "Example University Hospital",
            "institutional_email": institutional_email,
            "requested_role": "clinician",
            "research_use": "Rank model answers.",
            "certificate": factories.pdf_file(),
            "certificate_completed_on": today - timedelta(days=3),
            "certificate_expires_on": today + timedelta(days=300),
            "storage_attestation": "on",
            "typed_name": user.full_name,
        },
    )


def test_the_institutional_email_gets_a_link_and_approval_waits_for_it(world, client):
    user = factories.make_user("new-applicant@example.edu", full_name="Nia Applicant")
    application = _applied_through_the_page(client, user, "nia@hospital.example.org")
    sent = [m for m in mail.outbox if m.to == ["nia@hospital.example.org"]]
    assert len(sent) == 1 and "hospital.example.org" not in sent[0].subject
    link = re.search(r"https?://\S+/access/verify-email/\S+", sent[0].body).group(0)
    factories.open_certificate(world.admin, application)
    with pytest.raises(services.AccountsError, match="institutional email"):
        services.application_approve(
            application=application,
            reviewer=world.admin,
            roles=["clinician"],
            expires_on=application.certificate_expires_on,
        )
    path = link.split("testserver", 1)[-1] if "testserver" in link else "/" + link.split("/", 3)[3]
    assert client.get(path).status_code == 200  # a confirmation page: nothing changes on GET
    application.refresh_from_db()
    assert application.institutional_email_verified_at is None
    assert client.post(path).status_code == 302
    application.refresh_from_db()
    assert application.institutional_email_verified_at is not None
    assert AuditEvent.objects.filter(action=Action.EMAIL_VERIFIED, actor=user).exists()
    services.application_approve(
        application=application,
        reviewer=world.admin,
        roles=["clinician"],
        expires_on=application.certificate_expires_on,
    )


def test_a_verification_link_works_only_for_its_own_application_and_address(world, client):
    user = factories.make_user("link-owner@example.edu", full_name="Lee Owner")
    application = _applied_through_the_page(client, user, "lee@hospital.example.org")
    token = services.institutional_email_token(application)
    other = Client()
    other.force_login(world.researcher)
    url = reverse("application_verify_email", args=[token])
    assert other.post(url).status_code == 400  # someone else's link
    assert client.post(url[:-3] + "xx/").status_code == 400  # tampered
    application.institutional_email = "someone-else@hospital.example.org"
    application.save(update_fields=["institutional_email"])
    assert client.post(url).status_code == 400  # the address changed since it was sent
    application.refresh_from_db()
    assert application.institutional_email_verified_at is None


def test_an_institutional_email_the_account_already_verified_is_not_asked_again(world, client):
    # Walk-through finding: an applicant who signed up with their hospital address (verified by
    # allauth's link minutes before) was told it was "not confirmed yet" and sent a second link.
    user = factories.make_user("sam@hospital.example.org", full_name="Sam Same")
    application = _applied_through_the_page(client, user, "Sam@Hospital.example.org")
    assert application.institutional_email_verified_at is not None
    assert [m for m in mail.outbox if "verify-email" in m.body] == []
    # An address the account has but never verified proves nothing.
    other = factories.make_user("uv@example.edu", full_name="Una Verified")
    EmailAddress.objects.create(user=other, email="uv@hospital.example.org", verified=False)
    pending = _applied_through_the_page(client, other, "uv@hospital.example.org")
    assert pending.institutional_email_verified_at is None
