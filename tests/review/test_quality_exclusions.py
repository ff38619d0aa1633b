"""Watching quality without judging people by one number: flags carry their evidence, nobody is
excluded automatically, and every exclusion is an admin's, with a reason, audited and lifted the
same way; the admin's quality page shows it all at any size."""

import pytest
from django.urls import reverse

from review.models import AuditEvent, ClinicianExclusion
from review.selectors.quality import study_quality
from review.services import quality as services
from review.services.reviews import review_get_or_start
from tests import factories
from tests.review.quality_data import RELEASE, make_world, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def w():
    w = make_world(n_instructions=8, n_clinicians=3, prefix="X")
    for instruction in w.instructions:
        for clinician in w.clinicians[:2]:
            submit(factories.assign(instruction, clinician), RELEASE)
        # The third ranks whatever is shown first best and marks it correct.
        review_assignment = factories.assign(instruction, w.clinicians[2])
        review = review_get_or_start(assignment=review_assignment)
        shown = dict(instruction.responses.values_list("id", "model_name"))
        first_favoured = {shown[int(r)]: (k + 1, k == 0) for k, r in enumerate(review.shown_order)}
        submit(review_assignment, first_favoured)
    return w


def test_flags_carry_evidence_and_exclude_nobody(w, client):
    data = study_quality(w.study)
    flagged = {c.email: c for c in data.clinicians if c.quality.flags}
    assert set(flagged) == {w.clinicians[2].email}
    flags = {f.kind: f for f in flagged[w.clinicians[2].email].quality.flags}
    assert "position" in flags and flags["position"].evidence["chance"] == pytest.approx(0.25)
    factories.sign_in(client, w.admin)
    page = client.get(reverse("admin_quality", args=[w.dataset.pk])).content.decode()
    assert "Ranks the response shown first among the best in 100% of reviews" in page
    assert "nobody's reviews leave a report unless an admin decides" in page
    assert not ClinicianExclusion.objects.exists()


def test_an_exclusion_needs_a_reason_is_audited_and_lifted_the_same_way(w, client):
    factories.sign_in(client, w.admin)
    target = w.clinicians[2]
    url = reverse("admin_quality_exclude", args=[w.study.pk])
    client.post(url, {"clinician": target.pk, "reason": "  "})
    assert not ClinicianExclusion.objects.exists()
    client.post(url, {"clinician": target.pk, "reason": "Ranks by position; spoke with them."})
    exclusion = ClinicianExclusion.objects.get()
    assert exclusion.is_active and exclusion.excluded_by == w.admin
    event = AuditEvent.objects.get(action="clinician_excluded")
    assert event.details["reason"] == "Ranks by position; spoke with them."
    assert (
        event.details["submitted_reviews"] == 8 and event.details["clinician"] == target.pseudonym
    )
    with pytest.raises(services.QualityError, match="already left out"):
        services.clinician_exclude(study=w.study, clinician=target, reason="Again.", actor=w.admin)
    page = client.get(reverse("admin_quality", args=[w.dataset.pk])).content.decode()
    assert 'data-testid="excluded"' in page and "Ranks by position; spoke with them." in page
    client.post(
        reverse("admin_quality_readmit", args=[exclusion.pk]),
        {"reason": "Retrained; their later reviews look sound."},
    )
    exclusion.refresh_from_db()
    assert not exclusion.is_active and exclusion.lift_reason.startswith("Retrained")
    assert AuditEvent.objects.filter(action="clinician_readmitted").count() == 1
    # Excluded again later: a second decision, the first kept.
    services.clinician_exclude(study=w.study, clinician=target, reason="Again.", actor=w.admin)
    assert ClinicianExclusion.objects.count() == 2


def test_settings_are_audited_and_bounded(w, client):
    factories.sign_in(client, w.admin)
    url = reverse("admin_quality_policy", args=[w.study.pk])
    client.post(url, {"gold_percent": "10", "adjudication_tau": "0.2", "drift_window": "12"})
    event = AuditEvent.objects.get(action="quality_policy_changed")
    assert event.details["after"] == {
        "gold_rate": 0.1, "adjudication_tau": 0.2, "drift_window": 12
    }  # fmt: skip
    client.post(url, {"gold_percent": "80", "adjudication_tau": "0.2", "drift_window": "12"})
    assert AuditEvent.objects.filter(action="quality_policy_changed").count() == 1


def test_the_quality_page_needs_few_queries(w, client, django_assert_max_num_queries):
    """Every figure comes from a few reads of the judgements, whatever the number of reviews;
    only the access check of each clinician who may be calibrated reads the shared cache."""
    factories.sign_in(client, w.admin)
    client.get(reverse("admin_quality", args=[w.dataset.pk]))
    with django_assert_max_num_queries(30):
        response = client.get(reverse("admin_quality", args=[w.dataset.pk]))
    assert response.status_code == 200
