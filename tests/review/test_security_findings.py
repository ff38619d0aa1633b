"""Issue 24's lower findings (4) and applicants' findings (5), one test (or a few) each.

The second factor's are in test_second_factor.py, the cache's in tests/test_cache.py and
test_multiprocess_limits.py, the record reads' in test_audit.py.
"""

import pytest
from django.test import Client
from django.urls import reverse

from review.models import AuditEvent
from tests import factories

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


# --- 4. a NUL byte in a parameter is a 400, never a 500 (PostgreSQL refuses NUL in text) ---------
def test_a_nul_byte_in_a_record_parameter_is_refused_not_a_server_error(world, client):
    import json

    client.force_login(world.clinician)
    events = reverse("record_events", args=[world.instruction.pk])
    assert client.get(events, {"type": "note\x00"}).status_code == 400
    search = client.post(
        reverse("record_search", args=[world.instruction.pk]),
        json.dumps({"q": "chest\x00pain"}),
        content_type="application/json",
    )
    assert search.status_code == 400
    assert client.get(reverse("clinician_queue"), {"category": "x\x00"}).status_code == 200


# --- 4. sign-up takes as long for a known email as for a new one ---------------------------------
def test_signing_up_with_a_known_email_costs_the_same_password_hashing(world, client, monkeypatch):
    # A new account hashes its password (hundreds of milliseconds with the real hasher); a known
    # email used to skip it, so the answer's timing told whether the address had an account.
    from django.contrib.auth.hashers import MD5PasswordHasher

    calls: list[int] = []
    real_encode = MD5PasswordHasher.encode

    def counting(self, password, salt):  # noqa: ANN001, ANN202
        calls.append(1)
        return real_encode(self, password, salt)

    monkeypatch.setattr(MD5PasswordHasher, "encode", counting)

    def sign_up(email: str) -> int:
        calls.clear()
        response = Client().post(
            reverse("account_signup"),
            {
                "email": email,
                "password1": "a-long-new-passphrase",
                "password2": "a-long-new-passphrase",
            },
        )
        assert response.status_code == 302  # the same answer either way
        return len(calls)

    new, known = sign_up("someone-new@example.edu"), sign_up(world.clinician.email)
    assert new >= 1 and known == new


# --- 5. a certificate must decode as the PDF or image it claims to be ---------------------------
@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("scan.png", b"\x89PNG\r\n\x1a\n" + b"\x13garbage" * 200),
        ("scan.jpg", b"\xff\xd8\xff\xe0" + b"\x13garbage" * 200),
        ("certificate.pdf", b"%PDF-1.7\n" + b"\x13garbage" * 200),
    ],
)
def test_a_corrupt_certificate_is_refused(world, client, name, content):
    from review.models import AccessApplication
    from review.services import accounts as services

    user = factories.make_user("corrupt@example.edu")
    with pytest.raises(services.AccountsError, match="cannot be read"):
        services.application_submit(
            user=user,
            details=factories.application_details(user),
            certificate=factories.pdf_file(name, content),
            typed_name=user.full_name,
            dua_version=factories.active_dua(),
        )
    from review.forms.accounts import ApplicationForm

    form = ApplicationForm(data={}, files={"certificate": factories.pdf_file(name, content)})
    form.is_valid()
    assert "cannot be read" in str(form.errors["certificate"])
    assert not AccessApplication.objects.filter(user=user).exists()


@pytest.mark.parametrize("kind", ["pdf", "png", "jpeg"])
def test_a_real_certificate_of_each_kind_is_accepted(world, kind):
    from review.services import accounts as services

    content = {
        "pdf": factories.PDF_BYTES,
        "png": factories.PNG_BYTES,
        "jpeg": factories.JPEG_BYTES,
    }[kind]
    user = factories.make_user(f"{kind}@example.edu")
    application = services.application_submit(
        user=user,
        details=factories.application_details(user),
        certificate=factories.pdf_file(f"c.{kind}", content),
        typed_name=user.full_name,
        dua_version=factories.active_dua(),
    )
    assert application.certificate_content_type.endswith(kind)


# --- 5. the institutional email is verified by a link sent to it -------------------------------
def _applied_through_the_page(client, user, institutional_email: str):  # noqa: ANN001, ANN202
    from datetime import timedelta

    from django.core import mail
    from django.test import TestCase
    from django.utils import timezone

    from review.models import AccessApplication

    mail.outbox.clear()
    client.force_login(user)
    today = timezone.localdate()
    # The link is mailed once the application's transaction commits.
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = _apply(client, user, institutional_email, today, timedelta)
    assert response.status_code == 302, response.context["form"].errors
    return AccessApplication.objects.get(user=user, status="pending")


def _apply(client, user, institutional_email, today, timedelta):  # noqa: ANN001, ANN202
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
    import re

    from django.core import mail

    from review.services import accounts as services

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
    from review.services import accounts as services

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


# --- 5. "research use" has a length limit --------------------------------------------------------
def test_research_use_has_a_length_limit(world):
    from review.forms.accounts import ApplicationForm
    from review.services import accounts as services

    form = ApplicationForm(data={"research_use": "x" * 200_000})
    form.is_valid()
    assert "at most 5000 characters" in str(form.errors["research_use"])
    user = factories.make_user("long@example.edu")
    with pytest.raises(services.AccountsError, match="5000 characters"):
        factories.make_application(user, research_use="x" * 200_000)


# --- 5. decision emails link to SITE_URL, else the address of the deciding request --------------
@pytest.mark.parametrize(
    ("site_url", "expected"),
    [
        ("", "http://review.example.org/access/"),
        ("https://medalign.example.edu", "https://medalign.example.edu/access/"),
    ],
)
def test_decision_emails_link_to_the_sites_address(
    world, client, settings, django_capture_on_commit_callbacks, site_url, expected
):
    from django.core import mail

    settings.SITE_URL = site_url
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "review.example.org"]
    client.force_login(world.admin)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("admin_application_detail", args=[world.pending_application.pk]),
            {"decision": "reject", "reason": "Not eligible."},
            HTTP_HOST="review.example.org",
        )
    assert response.status_code == 302
    decision = [m for m in mail.outbox if m.to == [world.applicant.email]]
    assert len(decision) == 1
    assert expected in decision[0].body and "localhost:8000" not in decision[0].body


def test_an_institutional_email_the_account_already_verified_is_not_asked_again(world, client):
    # Walk-through finding: an applicant who signed up with their hospital address (verified by
    # allauth's link minutes before) was told it was "not confirmed yet" and sent a second link.
    from django.core import mail

    user = factories.make_user("sam@hospital.example.org", full_name="Sam Same")
    application = _applied_through_the_page(client, user, "Sam@Hospital.example.org")
    assert application.institutional_email_verified_at is not None
    assert [m for m in mail.outbox if "verify-email" in m.body] == []
    # An address the account has but never verified proves nothing.
    other = factories.make_user("uv@example.edu", full_name="Una Verified")
    from allauth.account.models import EmailAddress

    EmailAddress.objects.create(user=other, email="uv@hospital.example.org", verified=False)
    pending = _applied_through_the_page(client, other, "uv@hospital.example.org")
    assert pending.institutional_email_verified_at is None
