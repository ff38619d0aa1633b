"""Fixtures for the review app's tests. Account helpers live in tests/factories.py."""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.core.cache import cache
from django.utils import timezone

from review.models import Adjudication, Dataset, Instruction, Patient, Role
from tests import factories


@pytest.fixture(autouse=True)
def _private_storage_and_clean_cache(request, settings, tmp_path):
    # Certificates go to a throwaway private folder; allauth's rate limits live in the cache.
    settings.PRIVATE_STORAGE_ROOT = tmp_path / "private"
    settings.MEDIA_ROOT = tmp_path / "private"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    # Real password hashing costs ~100 ms a user; these tests make dozens of users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # The cache is the database cache (shared by processes): only tests with a database use it.
    marker = request.node.get_closest_marker("django_db")
    transactional = "transactional_db" in request.fixturenames or bool(
        marker and marker.kwargs.get("transaction")
    )
    uses_db = bool(marker) or "db" in request.fixturenames or transactional
    if uses_db:
        request.getfixturevalue("transactional_db" if transactional else "db")
        cache.clear()
    yield
    if uses_db:
        cache.clear()


@pytest.fixture
def world(db):
    """One user of each kind and one object of each kind, for the authorization matrix.

    Kinds: anonymous, applicant (pending), rejected, expired, revoked, clinician_other (approved,
    not assigned), clinician (approved, assigned to ``instruction``), researcher, admin,
    adjudicator (adjudicating ``instruction``, which they never reviewed).
    Features add the objects their URLs need here (a review, a scoring run…).
    """
    yesterday = timezone.localdate() - timedelta(days=1)
    w = SimpleNamespace()
    w.applicant = factories.make_user("applicant@example.edu", full_name="Pat Applicant")
    w.pending_application = factories.make_application(w.applicant)
    w.rejected = factories.make_user("rejected@example.edu", full_name="Ray Rejected")
    factories.make_rejected(w.rejected)
    w.expired = factories.make_user(
        "expired@example.edu", roles=[Role.CLINICIAN], expires_on=yesterday
    )
    w.revoked = factories.make_user("revoked@example.edu", full_name="Rene Revoked")
    factories.make_revoked(w.revoked)
    w.clinician_other = factories.make_user("other@example.edu", roles=[Role.CLINICIAN])
    w.clinician = factories.make_user("clinician@example.edu", roles=[Role.CLINICIAN])
    w.researcher = factories.make_user("researcher@example.edu", roles=[Role.RESEARCHER])
    w.admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    w.adjudicator = factories.make_user("adjudicator@example.edu", roles=[Role.ADJUDICATOR])
    w.anonymous = None

    w.dataset = Dataset.objects.create(name="matrix", is_synthetic=True)
    w.patient = Patient.objects.create(dataset=w.dataset, person_id="P-MATRIX-1")
    w.instruction = Instruction.objects.create(
        dataset=w.dataset,
        instruction_id="I-MATRIX-1",
        question="Synthetic question?",
        patient=w.patient,
        person_id=w.patient.person_id,
    )
    w.assignment = factories.assign(w.instruction, w.clinician)
    # The adjudicator resolves a disagreement on the clinician's instruction (not theirs).
    w.adjudication = Adjudication.objects.create(
        study=w.assignment.study, instruction=w.instruction, adjudicator=w.adjudicator
    )
    return w
