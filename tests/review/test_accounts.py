"""Accounts: applications, their workflow, expiry, the DUA, certificates, home and security."""

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from unittest.mock import patch

import pytest
from allauth.mfa.models import Authenticator
from django.core import mail
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from review.access import user_access
from review.models import AccessApplication, AuditEvent, DUASignature, DUAVersion, Role
from review.services import accounts as services
from tests import factories

pytestmark = pytest.mark.django_db
Status = AccessApplication.Status


def actions() -> list[str]:
    return list(AuditEvent.objects.order_by("id").values_list("action", flat=True))


def form_data(**overrides):
    today = timezone.localdate()
    data = {
        "full_name": "Alex Example",
        "institution": "Example University Hospital",
        "institutional_email": "alex@hospital.example.edu",
        "requested_role": "clinician",
        "specialty": "Cardiology",
        "research_use": "Rank model answers for the MedAlign evaluation.",
        "certificate": factories.pdf_file(),
        "certificate_completed_on": (today - timedelta(days=5)).isoformat(),
        "certificate_expires_on": (today + timedelta(days=365)).isoformat(),
        "storage_attestation": "on",
        "typed_name": "alex  EXAMPLE",
    }
    data.update(overrides)
    return data


# --- applying ------------------------------------------------------------------------------------
def test_it_submits_an_application_with_a_dua_signature(client):
    user = factories.make_user("alex@example.edu", full_name="")
    client.force_login(user)
    response = client.post(reverse("application_apply"), form_data(), REMOTE_ADDR="10.1.2.3")
    assert response.status_code == 302
    assert response["Location"] == reverse("application_status")
    application = AccessApplication.objects.get(user=user)
    assert application.status == Status.PENDING
    assert application.certificate_content_type == "application/pdf"
    assert application.institutional_email == "alex@hospital.example.edu"
    signature = application.dua_signature
    assert signature.dua_version == DUAVersion.objects.get(is_active=True)
    assert signature.typed_name == "alex EXAMPLE"
    assert signature.ip_address == "10.1.2.3"
    assert signature.signed_at is not None
    user.refresh_from_db()
    assert user.full_name == "Alex Example"
    assert AuditEvent.Action.DUA_SIGNED in actions()
    assert AuditEvent.Action.APPLICATION_SUBMITTED in actions()
    # The status page shows the pending application; no second application can be opened.
    page = client.get(reverse("application_status"))
    assert b"pending review" in page.content
    assert client.get(reverse("application_apply")).status_code == 302


def test_the_apply_page_shows_the_full_dua_text(client):
    client.force_login(factories.make_user())
    response = client.get(reverse("application_apply"))
    dua = DUAVersion.objects.get(is_active=True)
    assert dua.version == "1.0"
    assert dua.text.strip().splitlines()[-1].strip().encode() in response.content


@pytest.mark.parametrize(
    "email", ["someone@gmail.com", "x@GMAIL.com", "y@mail.yahoo.com", "z@proton.me"]
)
def test_it_rejects_personal_mail_domains(client, email):
    client.force_login(factories.make_user())
    response = client.post(reverse("application_apply"), form_data(institutional_email=email))
    assert response.status_code == 200
    assert "institutional_email" in response.context["form"].errors
    assert not AccessApplication.objects.exists()


def test_admins_can_add_rejected_domains(client):
    from review.models import RejectedEmailDomain

    RejectedEmailDomain.objects.create(domain="example.edu")
    client.force_login(factories.make_user())
    response = client.post(reverse("application_apply"), form_data())
    assert "institutional_email" in response.context["form"].errors


def test_it_refuses_a_pdf_that_is_really_a_text_file(client):
    client.force_login(factories.make_user())
    fake = factories.pdf_file("certificate.pdf", b"I am plain text pretending to be a PDF")
    response = client.post(reverse("application_apply"), form_data(certificate=fake))
    assert "certificate" in response.context["form"].errors
    assert not AccessApplication.objects.exists()


def test_it_accepts_a_png_by_its_content_whatever_its_name(client):
    user = factories.make_user()
    client.force_login(user)
    png = factories.pdf_file("scan.txt", factories.PNG_BYTES)
    client.post(reverse("application_apply"), form_data(certificate=png))
    assert AccessApplication.objects.get(user=user).certificate_content_type == "image/png"


def test_it_refuses_an_oversized_certificate(client, settings):
    settings.MAX_UPLOAD_BYTES = 2048
    client.force_login(factories.make_user())
    big = factories.pdf_file(content=factories.PDF_BYTES + b"0" * 4096)
    response = client.post(reverse("application_apply"), form_data(certificate=big))
    assert "certificate" in response.context["form"].errors


def test_it_requires_a_matching_typed_name_and_the_attestation(client):
    client.force_login(factories.make_user())
    data = form_data(typed_name="Somebody Else")
    del data["storage_attestation"]
    response = client.post(reverse("application_apply"), data)
    errors = response.context["form"].errors
    assert "typed_name" in errors and "storage_attestation" in errors


def test_it_refuses_an_expired_certificate(client):
    client.force_login(factories.make_user())
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()
    response = client.post(
        reverse("application_apply"), form_data(certificate_expires_on=yesterday)
    )
    assert "certificate_expires_on" in response.context["form"].errors


def test_certificates_are_stored_privately(settings):
    application = factories.make_application(factories.make_user())
    path = Path(application.certificate.path)
    assert path.is_relative_to(Path(settings.PRIVATE_STORAGE_ROOT))
    assert "certificate" not in path.name or path.suffix == ""  # original name not kept
    assert not str(path).startswith(str(settings.STATIC_ROOT))


# --- the workflow --------------------------------------------------------------------------------
@pytest.fixture
def admin(db):
    return factories.make_user("admin@example.edu", roles=[Role.ADMIN])


@pytest.fixture
def pending(db):
    return factories.make_application(factories.make_user("pat@example.edu", full_name="Pat Q"))


def test_approve_grants_roles_until_the_expiry_and_emails_the_applicant(admin, pending):
    factories.open_certificate(admin, pending)
    mail.outbox.clear()
    expires = timezone.localdate() + timedelta(days=90)
    with patch("django.db.transaction.on_commit", lambda fn, **kw: fn()):
        services.application_approve(
            application=pending,
            reviewer=admin,
            roles=[Role.CLINICIAN, Role.RESEARCHER],
            expires_on=expires,
        )
    pending.refresh_from_db()
    assert pending.status == Status.APPROVED
    assert pending.reviewer == admin and pending.expires_on == expires
    access = user_access(pending.user)
    assert access.roles == {Role.CLINICIAN, Role.RESEARCHER}
    decision = AuditEvent.objects.get(
        action=AuditEvent.Action.APPLICATION_DECISION, object_id=str(pending.pk)
    )
    assert decision.actor == admin and decision.details["to"] == "approved"
    roles = AuditEvent.objects.get(action=AuditEvent.Action.ROLE_CHANGED, object_id=str(pending.pk))
    assert roles.details["after"] == ["clinician", "researcher"]
    assert len(mail.outbox) == 1
    assert mail.outbox[0].to == [pending.user.email]
    assert "approved" in mail.outbox[0].subject


def test_approving_an_admin_opens_djangos_admin(admin, pending):
    factories.open_certificate(admin, pending)
    services.application_approve(
        application=pending,
        reviewer=admin,
        roles=[Role.ADMIN],
        expires_on=timezone.localdate() + timedelta(days=30),
    )
    pending.user.refresh_from_db()
    assert pending.user.is_staff and pending.user.is_superuser
    services.application_revoke(application=pending, reviewer=admin, reason="Role ended.")
    pending.user.refresh_from_db()
    assert not pending.user.is_staff and not pending.user.is_superuser


def test_reject_records_the_reason_the_applicant_sees(client, admin, pending):
    services.application_reject(application=pending, reviewer=admin, reason="No IRB approval.")
    pending.refresh_from_db()
    assert pending.status == Status.REJECTED and pending.decision_reason == "No IRB approval."
    client.force_login(pending.user)
    page = client.get(reverse("application_status"))
    assert b"No IRB approval." in page.content
    assert reverse("application_apply").encode() in page.content  # may apply again
    event = AuditEvent.objects.filter(action=AuditEvent.Action.APPLICATION_DECISION).first()
    assert event.details["reason"] == "No IRB approval."


def test_request_changes_then_resubmit_returns_to_pending(client, admin, pending):
    services.application_request_changes(
        application=pending, reviewer=admin, reason="Upload the full certificate."
    )
    client.force_login(pending.user)
    page = client.get(reverse("application_status"))
    assert b"Upload the full certificate." in page.content
    assert reverse("application_resubmit").encode() in page.content
    form = client.get(reverse("application_resubmit")).context["form"]
    assert form.initial["institution"] == pending.institution
    data = form_data(full_name="Pat Q", typed_name="Pat Q", institution="New Institute")
    response = client.post(reverse("application_resubmit"), data)
    assert response.status_code == 302
    pending.refresh_from_db()
    assert pending.status == Status.PENDING and pending.institution == "New Institute"
    submitted = AuditEvent.objects.filter(action=AuditEvent.Action.APPLICATION_SUBMITTED)
    assert submitted.filter(details__resubmitted=True).count() == 1


def test_resubmit_may_keep_the_certificate_on_file(client, admin, pending):
    services.application_request_changes(application=pending, reviewer=admin, reason="Fix it.")
    old = pending.certificate.name
    client.force_login(pending.user)
    data = form_data(full_name="Pat Q", typed_name="Pat Q")
    del data["certificate"]
    assert client.post(reverse("application_resubmit"), data).status_code == 302
    pending.refresh_from_db()
    assert pending.certificate.name == old and pending.status == Status.PENDING


def test_revoke_ends_access_at_once(client, admin):
    user = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    client.force_login(user)
    assert client.get(reverse("home")).status_code in (200, 302)
    application = AccessApplication.objects.get(user=user)
    services.application_revoke(application=application, reviewer=admin, reason="Left.")
    response = client.get(reverse("home"))
    assert response["Location"] == reverse("application_status")
    assert b"Left." in client.get(reverse("application_status")).content
    revoke = AuditEvent.objects.filter(action=AuditEvent.Action.ROLE_CHANGED).first()  # newest
    assert revoke.details["after"] == []


def test_set_roles_changes_roles_and_is_audited(admin):
    user = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    application = AccessApplication.objects.get(user=user)
    services.application_set_roles(
        application=application,
        reviewer=admin,
        roles=[Role.RESEARCHER],
        expires_on=timezone.localdate() + timedelta(days=10),
    )
    assert user_access(user).roles == {Role.RESEARCHER}
    event = AuditEvent.objects.filter(action=AuditEvent.Action.ROLE_CHANGED).first()  # newest
    assert event.details["before"] == ["clinician"] and event.details["after"] == ["researcher"]


@pytest.mark.parametrize(
    ("start", "call"),
    [
        ("rejected", "approve"),
        ("rejected", "request_changes"),
        ("approved", "approve"),
        ("approved", "reject"),
        ("pending", "revoke"),
        ("changes_requested", "approve"),
        ("changes_requested", "revoke"),
        ("revoked", "approve"),
        ("revoked", "revoke"),
    ],
)
def test_it_refuses_transitions_the_workflow_does_not_allow(admin, pending, start, call):
    AccessApplication.objects.filter(pk=pending.pk).update(status=start)
    pending.refresh_from_db()
    kwargs = {"application": pending, "reviewer": admin}
    if call == "approve":
        fn = services.application_approve
        kwargs |= {"roles": ["clinician"], "expires_on": timezone.localdate() + timedelta(days=9)}
    else:
        fn = getattr(services, f"application_{call}")
        kwargs["reason"] = "because"
    with pytest.raises(services.TransitionNotAllowed):
        fn(**kwargs)
    pending.refresh_from_db()
    assert pending.status == start


def test_resubmitting_a_pending_application_is_refused(pending):
    with pytest.raises(services.TransitionNotAllowed):
        services.application_resubmit(
            application=pending,
            details=factories.application_details(pending.user),
            typed_name=pending.full_name,
            dua_version=factories.active_dua(),
        )


def test_decisions_need_a_reason_roles_and_a_future_expiry(admin, pending):
    with pytest.raises(services.AccountsError):
        services.application_reject(application=pending, reviewer=admin, reason="  ")
    with pytest.raises(services.AccountsError):
        services.application_approve(
            application=pending,
            reviewer=admin,
            roles=[],
            expires_on=timezone.localdate() + timedelta(days=1),
        )
    with pytest.raises(services.AccountsError):
        services.application_approve(
            application=pending,
            reviewer=admin,
            roles=["clinician"],
            expires_on=timezone.localdate(),
        )
    decisions = AuditEvent.objects.filter(action=AuditEvent.Action.APPLICATION_DECISION)
    assert not decisions.filter(object_id=str(pending.pk)).exists()


# --- the admin's queue (in the app and in Django's admin) ---------------------------------------
def test_admin_approves_from_the_in_app_queue(client, admin, pending):
    client.force_login(admin)
    certificate = reverse("admin_application_certificate", kwargs={"application_id": pending.pk})
    assert client.get(certificate).status_code == 200  # approval needs the certificate opened
    queue = client.get(reverse("admin_applications"))
    assert pending.user.email.encode() in queue.content
    url = reverse("admin_application_detail", kwargs={"application_id": pending.pk})
    expires = (timezone.localdate() + timedelta(days=200)).isoformat()
    response = client.post(
        url, {"decision": "approve", "roles": ["clinician", "admin"], "expires_on": expires}
    )
    assert response.status_code == 302
    pending.refresh_from_db()
    assert pending.status == Status.APPROVED and pending.roles == ["clinician", "admin"]


def test_the_queue_refuses_a_rejection_without_a_reason(client, admin, pending):
    client.force_login(admin)
    url = reverse("admin_application_detail", kwargs={"application_id": pending.pk})
    response = client.post(url, {"decision": "reject", "reason": ""})
    assert response.status_code == 200 and "reason" in response.context["decision_form"].errors
    pending.refresh_from_db()
    assert pending.status == Status.PENDING


def test_admin_revokes_from_the_in_app_queue(client, admin):
    user = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    application = AccessApplication.objects.get(user=user)
    client.force_login(admin)
    url = reverse("admin_application_revoke", kwargs={"application_id": application.pk})
    assert client.post(url, {"reason": "Misuse."}).status_code == 302
    application.refresh_from_db()
    assert application.status == Status.REVOKED and application.decision_reason == "Misuse."


def test_django_admin_actions_call_the_services(client, admin, pending):
    client.force_login(admin)
    factories.open_certificate(admin, pending)
    url = reverse("admin:review_accessapplication_changelist")
    expires = (timezone.localdate() + timedelta(days=30)).isoformat()
    first = client.post(url, {"action": "approve", "_selected_action": [pending.pk]})
    assert first.status_code == 200  # the intermediate page asks for roles and expiry
    response = client.post(
        url,
        {
            "action": "approve",
            "_selected_action": [pending.pk],
            "apply": "1",
            "roles": ["researcher"],
            "expires_on": expires,
        },
    )
    assert response.status_code == 302
    pending.refresh_from_db()
    assert pending.status == Status.APPROVED and pending.roles == ["researcher"]
    assert AuditEvent.objects.filter(action=AuditEvent.Action.APPLICATION_DECISION).exists()


def test_djangos_admin_closes_when_the_admin_approval_expires(client, admin):
    client.force_login(admin)
    assert client.get(reverse("admin:index")).status_code == 200
    application = AccessApplication.objects.get(user=admin)
    application.expires_on = timezone.localdate() - timedelta(days=1)
    application.save(update_fields=["expires_on"])  # any ORM save clears the cached access
    assert client.get(reverse("admin:index")).status_code == 302


def test_djangos_admin_login_goes_through_allauth(client):
    response = client.get(reverse("admin:login"))
    assert response["Location"].startswith(reverse("account_login"))


# --- expiry and the DUA --------------------------------------------------------------------------
def test_access_ends_when_the_approval_expires(client):
    today = timezone.localdate()
    user = factories.make_user("c@example.edu", roles=[Role.CLINICIAN], expires_on=today)
    assert user_access(user, today=today).is_approved  # the last day still counts
    tomorrow = today + timedelta(days=1)
    assert user_access(user, today=tomorrow).reason == "approval expired"
    AccessApplication.objects.filter(user=user).update(expires_on=today - timedelta(days=1))
    client.force_login(user)
    assert client.get(reverse("home"))["Location"] == reverse("application_status")
    page = client.get(reverse("application_status"))
    assert b"approval expired" in page.content
    assert reverse("application_apply").encode() in page.content  # renewal is a new application


def test_access_ends_when_the_training_certificate_expires(client):
    user = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    AccessApplication.objects.filter(user=user).update(
        certificate_expires_on=timezone.localdate() - timedelta(days=1)
    )
    assert user_access(user).reason == "training certificate expired"
    client.force_login(user)
    assert client.get(reverse("home"))["Location"] == reverse("application_status")


def test_publishing_a_dua_suspends_access_until_the_user_re_signs(client, admin):
    user = factories.make_user("c@example.edu", roles=[Role.CLINICIAN], full_name="Casey Doe")
    old = DUAVersion.objects.get(is_active=True)
    new = services.dua_publish(version="2.0", text="New terms.", actor=admin)
    old.refresh_from_db()
    assert new.is_active and not old.is_active and new.published_at is not None
    published = AuditEvent.objects.get(action=AuditEvent.Action.DUA_PUBLISHED)
    assert published.details == {"version": "2.0", "replaces": ["1.0"]}
    assert user_access(user).reason == "new DUA version not signed"

    client.force_login(user)
    assert client.get(reverse("home"))["Location"] == reverse("application_status")
    status = client.get(reverse("application_status"))
    assert reverse("dua_sign").encode() in status.content
    page = client.get(reverse("dua_sign"))
    assert b"New terms." in page.content
    wrong = client.post(reverse("dua_sign"), {"typed_name": "Someone Else", "agree": "on"})
    assert wrong.status_code == 200 and not DUASignature.objects.filter(dua_version=new).exists()
    right = client.post(reverse("dua_sign"), {"typed_name": "casey doe", "agree": "on"})
    assert right.status_code == 302
    assert DUASignature.objects.filter(user=user, dua_version=new).exists()
    assert user_access(user, today=timezone.localdate()).is_approved  # uncached
    signed = AuditEvent.objects.filter(action=AuditEvent.Action.DUA_SIGNED).first()  # newest
    assert signed.actor == user and signed.details == {"version": "2.0"}


def test_admin_publishes_a_dua_from_the_app(client, admin):
    client.force_login(admin)
    form = {"version": "1.1", "title": "DUA", "text": "Terms 1.1"}
    # The first POST previews the difference; only a confirmed publish publishes.
    preview = client.post(reverse("admin_dua_publish"), form)
    assert preview.status_code == 200 and preview.context["diff"]
    unconfirmed = client.post(reverse("admin_dua_publish"), {**form, "action": "publish"})
    assert unconfirmed.status_code == 200
    assert DUAVersion.objects.get(is_active=True).version != "1.1"
    response = client.post(
        reverse("admin_dua_publish"), {**form, "action": "publish", "confirm": "on"}
    )
    assert response.status_code == 302 and response["Location"] == reverse("dua_sign")
    assert DUAVersion.objects.get(is_active=True).version == "1.1"


def test_a_dua_version_with_the_same_text_is_refused(client, admin):
    client.force_login(admin)
    current = DUAVersion.objects.get(is_active=True)
    response = client.post(
        reverse("admin_dua_publish"),
        {
            "version": "9.9",
            "title": "DUA",
            "text": current.text,
            "action": "publish",
            "confirm": "on",
        },
    )
    assert response.status_code == 200 and "same as the active" in response.content.decode()
    # As a browser sends it: the textarea's lines end in CRLF.
    response = client.post(
        reverse("admin_dua_publish"),
        {"version": "9.9", "title": "DUA", "text": current.text.replace("\n", "\r\n") + "\r\n"},
    )
    assert "same as the active" in response.content.decode()
    assert DUAVersion.objects.get(is_active=True) == current


def test_a_dua_version_label_in_use_is_refused_at_the_preview(client, admin):
    client.force_login(admin)
    current = DUAVersion.objects.get(is_active=True)
    response = client.post(
        reverse("admin_dua_publish"), {"version": current.version, "title": "DUA", "text": "New."}
    )
    assert response.context["form"].errors["version"] and not response.context["preview"]


def test_an_inactive_dua_cannot_be_signed(admin):
    old = DUAVersion.objects.get(is_active=True)
    services.dua_publish(version="9", text="x", actor=admin)
    old.refresh_from_db()
    with pytest.raises(services.AccountsError):
        services.dua_sign(user=admin, version=old, typed_name=admin.full_name)


# --- certificates --------------------------------------------------------------------------------
def test_certificates_are_streamed_to_admins_and_the_view_is_audited(client, admin, pending):
    client.force_login(admin)
    url = reverse("admin_application_certificate", kwargs={"application_id": pending.pk})
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Security-Policy"].startswith("sandbox")
    assert b"".join(response.streaming_content).startswith(b"%PDF-")
    event = AuditEvent.objects.get(action=AuditEvent.Action.CERTIFICATE_VIEWED)
    assert event.actor == admin and event.object_id == str(pending.pk)


@pytest.mark.parametrize("roles", [[Role.CLINICIAN], [Role.RESEARCHER]])
def test_certificates_are_refused_to_everyone_else(client, pending, roles):
    client.force_login(factories.make_user("someone@example.edu", roles=roles))
    url = reverse("admin_application_certificate", kwargs={"application_id": pending.pk})
    missing = reverse("admin_application_certificate", kwargs={"application_id": pending.pk + 99})
    # Not for their role, said the same way whether the application exists or not.
    there, nowhere = client.get(url), client.get(missing)
    assert there.status_code == nowhere.status_code == 403
    assert there.content.split(b"<main")[1] == nowhere.content.split(b"<main")[1]
    client.force_login(pending.user)  # not even the applicant's own (unapproved: sent away)
    assert client.get(url).status_code == 302
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.CERTIFICATE_VIEWED).exists()


# --- home ----------------------------------------------------------------------------------------
def test_home_sends_the_unapproved_to_their_application(client):
    client.force_login(factories.make_user())
    assert client.get(reverse("home"))["Location"] == reverse("application_status")


def test_home_sends_clinicians_without_totp_to_set_it_up(client):
    client.force_login(factories.make_user(roles=[Role.CLINICIAN], totp=False))
    assert client.get(reverse("home"))["Location"] == reverse("mfa_activate_totp")


def test_home_shows_admins_their_dashboard(client, admin):
    client.force_login(admin)
    response = client.get(reverse("home"))
    assert response.status_code == 200
    for name in ("admin_applications", "audit_log", "admin:index"):
        assert reverse(name).encode() in response.content


def test_researchers_need_totp_too(client):
    # Researchers download study data: the same second factor as clinicians and admins.
    user = factories.make_user(roles=[Role.RESEARCHER], totp=False)
    assert user_access(user).needs_mfa
    client.force_login(user)
    assert client.get(reverse("home"))["Location"] == reverse("mfa_activate_totp")


# --- demo accounts -------------------------------------------------------------------------------
def test_demo_accounts_are_approved_with_totp_and_idempotent(capsys):
    from review.demo.accounts import DEMO_ACCOUNTS, demo_accounts, demo_totp_secret

    lines = demo_accounts()
    again = demo_accounts()
    assert AccessApplication.objects.count() == len(DEMO_ACCOUNTS)
    assert len(lines) == len(again)
    for spec in DEMO_ACCOUNTS:
        user = AccessApplication.objects.get(user__email=spec.email).user
        assert user_access(user).roles == set(spec.roles)
        assert not user_access(user).needs_mfa
        assert user.check_password("medalign-demo-2024")
        assert Authenticator.objects.filter(user=user, type="recovery_codes").exists()
        assert any(demo_totp_secret(spec.email) in line for line in lines)
    email = DEMO_ACCOUNTS[1].email
    # A frozen clock: the command and the check must not straddle a 30-second window.
    with patch("time.time", return_value=1_900_000_000.0):
        call_command("demo_totp", email)
        code = capsys.readouterr().out.split()[0]
        assert code == factories.totp_code(demo_totp_secret(email))
    # The demo's known secret still works with secrets encrypted at rest.
    stored = Authenticator.objects.get(user__email=email, type="totp").data["secret"]
    assert stored.startswith("fernet:") and demo_totp_secret(email) not in stored


# --- security ------------------------------------------------------------------------------------
def test_idle_sessions_are_signed_out(client, settings):
    settings.SESSION_IDLE_TIMEOUT_MINUTES = 30
    user = factories.make_user(roles=[Role.RESEARCHER], totp=False)
    start = 1_900_000_000.0
    with patch("time.time", return_value=start):
        client.force_login(user)  # the session's lifetime counts from its sign-in
        assert client.get(reverse("application_status")).status_code == 200
    with patch("time.time", return_value=start + 29 * 60):
        assert client.get(reverse("application_status")).status_code == 200
    # 29 minutes later the clock was refreshed; 31 idle minutes after that, the session ends.
    with patch("time.time", return_value=start + 60 * 60):
        response = client.get(reverse("application_status"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("account_login"))
    assert AuditEvent.objects.filter(action=AuditEvent.Action.LOGOUT).exists()


def test_error_pages_show_no_request_text(client):
    response = client.get("/no-such-page-P-SECRET-123/")
    assert response.status_code == 404
    assert b"P-SECRET-123" not in response.content
    assert b"MedAlign Review" in response.content


def test_the_500_template_renders_without_context():
    from django.template.loader import get_template

    html = get_template("500.html").render({})
    assert "Something went wrong" in html


def test_csp_is_enforced_when_not_debug(client, settings):
    settings.DEBUG = False
    response = client.get(reverse("account_login"))
    assert "Content-Security-Policy" in response.headers
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    env = {
        **os.environ,
        "DEBUG": "false",
        "SECRET_KEY": "x" * 60 + "-not-a-real-key-but-long-and-random-enough-9f8e7d",
        "MFA_ENCRYPTION_KEY": "r5y0Hn6E5lqHx2a7wQ7mV9mXg0m7iYt3h8N6sXk2c1A=",
        "ALLOWED_HOSTS": "example.org",
        "DATA_DIR": str(tmp_path),
    }
    env.pop("DATABASE_URL", None)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set by the browser fixtures, never in production
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_readme_lists_the_demo_accounts():
    from review.demo.accounts import DEMO_ACCOUNTS, DEMO_PASSWORD, demo_totp_secret

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Demo accounts", 1)[1].split("\n## ", 1)[0]
    assert DEMO_PASSWORD in section
    for spec in DEMO_ACCOUNTS:
        assert spec.email in section and demo_totp_secret(spec.email) in section


# --- applying: certificates that decode, research use within its limit ---------------------------
@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("scan.png", b"\x89PNG\r\n\x1a\n" + b"\x13garbage" * 200),
        ("scan.jpg", b"\xff\xd8\xff\xe0" + b"\x13garbage" * 200),
        ("certificate.pdf", b"%PDF-1.7\n" + b"\x13garbage" * 200),
    ],
)
def test_a_corrupt_certificate_is_refused(world, client, name, content):
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


def test_research_use_has_a_length_limit(world):
    from review.forms.accounts import ApplicationForm

    form = ApplicationForm(data={"research_use": "x" * 200_000})
    form.is_valid()
    assert "at most 5000 characters" in str(form.errors["research_use"])
    user = factories.make_user("long@example.edu")
    with pytest.raises(services.AccountsError, match="5000 characters"):
        factories.make_application(user, research_use="x" * 200_000)


# --- sign-up: a known email costs the same as a new one ------------------------------------------
def test_signing_up_with_a_known_email_costs_the_same_password_hashing(world, client, monkeypatch):
    # A new account hashes its password (hundreds of milliseconds with the real hasher); a known
    # email used to skip it, so the answer's timing told whether the address had an account.
    from django.contrib.auth.hashers import MD5PasswordHasher
    from django.test import Client

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


# --- four eyes: no admin approves or extends their own access ------------------------------------
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
