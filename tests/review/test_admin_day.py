"""The admin's day without a browser: what the e2e tests check in Chromium, checked here too,
so that a machine without one still runs them."""

import pytest
from django.core import mail
from django.urls import reverse

from review.models import AccessApplication, AuditEvent, Review, Role
from review.services import accounts as services
from review.services.audit import audit_record
from review.services.reviews import review_get_or_start, review_reopen
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(db):
    return factories.make_user("admin@example.edu", roles=[Role.ADMIN], full_name="Ada Admin")


def test_every_current_admin_is_emailed_when_an_application_arrives(
    admin, django_capture_on_commit_callbacks
):
    other = factories.make_user("bo@example.edu", roles=[Role.ADMIN])
    expired = factories.make_user("old@example.edu", roles=[Role.ADMIN])
    AccessApplication.objects.filter(user=expired).update(expires_on="2020-01-01")
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        application = factories.make_application(
            factories.make_user("pat@hospital.example.edu", full_name="Pat Q")
        )
    to_admins = [m for m in mail.outbox if "awaiting review" in m.subject]
    assert sorted(m.to[0] for m in to_admins) == sorted([admin.email, other.email])
    body = to_admins[0].body
    assert reverse("admin_application_detail", args=[application.pk]) in body
    assert "pat@hospital.example.edu" not in body and "Pat Q" not in body


def test_an_operators_own_application_emails_no_admin(admin, django_capture_on_commit_callbacks):
    user = factories.make_user("op@example.edu")
    details = factories.application_details(user)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        services.application_submit(
            user=user,
            details=details,
            certificate=factories.pdf_file(),
            typed_name=details.full_name,
            dua_version=factories.active_dua(),
            send_email_link=False,
        )
    assert mail.outbox == []


def test_the_decision_form_starts_with_the_role_asked_for(client, admin):
    application = factories.make_application(
        factories.make_user("r@example.edu"), requested_role=Role.RESEARCHER
    )
    client.force_login(admin)
    form = client.get(reverse("admin_application_detail", args=[application.pk])).context[
        "decision_form"
    ]
    assert form.initial["roles"] == [Role.RESEARCHER]
    factories.open_certificate(admin, application)
    response = client.post(
        reverse("admin_application_detail", args=[application.pk]),
        {"decision": "approve", "roles": form.initial["roles"], "expires_on": "2099-01-01"},
    )
    assert response.status_code == 302
    application.refresh_from_db()
    assert application.status == "approved" and application.roles == [Role.RESEARCHER]


def test_the_queue_keeps_revoked_and_rejected_applications_and_filters_by_status(client, admin):
    revoked = factories.make_user("rev@example.edu", roles=[Role.CLINICIAN])
    services.application_revoke(
        application=AccessApplication.objects.get(user=revoked), reviewer=admin, reason="Left."
    )
    rejected = factories.make_application(factories.make_user("rej@example.edu"))
    services.application_reject(application=rejected, reviewer=admin, reason="No training.")
    client.force_login(admin)
    page = client.get(reverse("admin_applications")).content.decode()
    assert "rev@example.edu" in page and "rej@example.edu" in page and "No training." in page
    only = client.get(reverse("admin_applications") + "?status=rejected")
    assert [key for key, _, _ in only.context["sections"]] == ["rejected"]
    assert "rev@example.edu" not in only.content.decode()
    # Anything else shows every status.
    assert len(client.get(reverse("admin_applications") + "?status=x").context["sections"]) == 5


def test_the_navigation_counts_the_applications_awaiting_review(client, admin):
    factories.make_application(factories.make_user("p1@example.edu"))
    factories.make_application(factories.make_user("p2@example.edu"))
    client.force_login(admin)
    response = client.get(reverse("progress_index"))
    assert response.context["nav_pending_applications"] == 2
    assert 'data-testid="nav-pending-count">2' in response.content.decode()


def test_a_lone_admin_is_told_until_when_a_second_admin_must_exist(client, admin):
    ends = AccessApplication.objects.get(user=admin).access_ends_on()
    client.force_login(admin)
    response = client.get(reverse("application_status"))
    assert response.context["lone_admin_until"] == ends
    assert "You are the only admin" in response.content.decode()
    factories.make_user("bo@example.edu", roles=[Role.ADMIN])
    assert client.get(reverse("application_status")).context["lone_admin_until"] is None


def test_the_pending_page_says_who_decides_and_by_when(client, settings):
    settings.APPLICATION_DECISION_DAYS = 3
    application = factories.make_application(factories.make_user("p@example.edu"))
    client.force_login(application.user)
    response = client.get(reverse("application_status"))
    expected = response.context["decision_expected_by"]
    assert (expected - application.submitted_at).days == 3
    assert "An admin of this installation" in response.content.decode()


def test_a_reopened_review_emails_its_clinician_without_the_reason(
    admin, django_capture_on_commit_callbacks
):
    dataset = review_data.make_dataset("reopen")
    patient = review_data.make_record(dataset, "9000006", n_events=3)
    instruction = review_data.make_instruction(dataset, patient, "I-RE-1")
    clinician = factories.make_user("cleo@example.edu", roles=[Role.CLINICIAN])
    review = review_get_or_start(assignment=review_data.assign(instruction, clinician))
    Review.objects.filter(pk=review.pk).update(status=Review.Status.SUBMITTED)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert review_reopen(review=review, actor=admin, reason="Potassium 6.1 was missed.")
    assert [m.to for m in mail.outbox] == [[clinician.email]]
    body = mail.outbox[0].body
    assert "I-RE-1" in body and reverse("clinician_review", args=[instruction.pk]) in body
    assert "Potassium" not in body


def test_the_audit_log_names_a_patient_by_person_id(client, admin):
    dataset = review_data.make_dataset("audit")
    patient = review_data.make_record(dataset, "9000006", n_events=1)
    event = audit_record(
        action=AuditEvent.Action.RECORD_VIEWED, actor=admin, obj=patient, person_id="9000006"
    )
    assert event.object_label == "Patient 9000006"
    client.force_login(admin)
    page = client.get(reverse("audit_log")).content.decode()
    assert "Patient 9000006" in page and f"Patient {patient.pk}<" not in page
