"""Approval opens the current certificate.

After an applicant resubmitted with a new training certificate, an admin's approval went
through on a view of the old file: any certificate view of the application counted. Now each
view's audit event holds the sha256 of the bytes served, the application the sha256 and upload
time of its file, and approval needs a view of those bytes after that time.
"""

import hashlib
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from review.models import AuditEvent, Role
from review.services import accounts as services
from tests import factories

pytestmark = pytest.mark.django_db

OLD_PDF = factories.PDF_BYTES
NEW_PDF = factories.PDF_BYTES + b"\n% the renewed certificate\n"


@pytest.fixture(autouse=True)
def _private_storage(settings, tmp_path):
    settings.PRIVATE_STORAGE_ROOT = settings.MEDIA_ROOT = tmp_path / "private"


@pytest.fixture
def admin_client(db):
    factories.make_user("first-admin@example.edu", roles=[Role.ADMIN])
    admin = factories.make_user("approver@example.edu", roles=[Role.ADMIN])
    client = Client()
    client.force_login(admin)
    return admin, client


def _open(client: Client, application) -> bytes:  # noqa: ANN001
    response = client.get(reverse("admin_application_certificate", args=[application.pk]))
    assert response.status_code == 200
    return b"".join(response.streaming_content)


def _approve(application, admin):  # noqa: ANN001, ANN202
    return services.application_approve(
        application=application,
        reviewer=admin,
        roles=[Role.CLINICIAN],
        expires_on=timezone.localdate() + timedelta(days=30),
    )


def _resubmit(application, certificate_bytes: bytes | None):  # noqa: ANN001, ANN202
    user = application.user
    return services.application_resubmit(
        application=application,
        details=factories.application_details(user),
        typed_name=user.full_name,
        dua_version=factories.active_dua(),
        certificate=factories.pdf_file(content=certificate_bytes) if certificate_bytes else None,
    )


def test_a_view_of_the_replaced_certificate_does_not_approve_the_new_one(admin_client):
    admin, client = admin_client
    applicant = factories.make_user("renewed@example.edu", full_name="Rene Newed")
    application = factories.make_application(applicant)
    assert _open(client, application) == OLD_PDF
    application = services.application_request_changes(
        application=application, reviewer=admin, reason="The certificate has expired."
    )
    application = _resubmit(application, NEW_PDF)
    with pytest.raises(services.AccountsError, match="replaced after you opened it"):
        _approve(application, admin)
    assert _open(client, application) == NEW_PDF
    event = AuditEvent.objects.filter(action=AuditEvent.Action.CERTIFICATE_VIEWED).first()
    assert event.details["sha256"] == hashlib.sha256(NEW_PDF).hexdigest()
    _approve(application, admin)


def test_a_resubmission_that_keeps_the_file_keeps_the_view(admin_client):
    admin, client = admin_client
    applicant = factories.make_user("kept@example.edu", full_name="Kay Kept")
    application = factories.make_application(applicant)
    _open(client, application)
    application = services.application_request_changes(
        application=application, reviewer=admin, reason="Say which institution."
    )
    application = _resubmit(application, None)  # the certificate on file is kept
    _approve(application, admin)


def test_a_view_logged_without_the_files_hash_is_not_enough(admin_client):
    # Views audited before the hash was recorded name no bytes: the admin opens the file again.
    admin, client = admin_client
    applicant = factories.make_user("old-view@example.edu", full_name="Olive View")
    application = factories.make_application(applicant)
    from review.services.audit import audit_record

    audit_record(action=AuditEvent.Action.CERTIFICATE_VIEWED, actor=admin, obj=application)
    with pytest.raises(services.AccountsError, match="replaced after you opened it"):
        _approve(application, admin)
    _open(client, application)
    _approve(application, admin)


def test_the_migration_hashes_certificates_already_on_file(admin_client):
    from importlib import import_module

    from django.apps import apps

    from review.models import AccessApplication

    applicant = factories.make_user("stored@example.edu", full_name="Stu Red")
    application = factories.make_application(applicant)
    AccessApplication.objects.filter(pk=application.pk).update(
        certificate_sha256="", certificate_uploaded_at=None
    )
    import_module("review.migrations.0020_certificate_sha256").hash_certificates(apps, None)
    application.refresh_from_db()
    assert application.certificate_sha256 == hashlib.sha256(OLD_PDF).hexdigest()
    assert application.certificate_uploaded_at == application.submitted_at


def test_approval_requires_the_certificate_to_have_been_opened(world, client):
    from review.access import user_access

    pending = world.pending_application
    with pytest.raises(services.AccountsError, match="certificate"):
        services.application_approve(
            application=pending,
            reviewer=world.admin,
            roles=[Role.CLINICIAN],
            expires_on=timezone.localdate() + timedelta(days=30),
        )
    client.force_login(world.admin)
    url = reverse("admin_application_certificate", kwargs={"application_id": pending.pk})
    assert client.get(url).status_code == 200
    services.application_approve(
        application=pending,
        reviewer=world.admin,
        roles=[Role.CLINICIAN],
        expires_on=timezone.localdate() + timedelta(days=30),
    )
    assert user_access(pending.user).is_clinician
