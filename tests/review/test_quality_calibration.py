"""A calibration round: a new clinician's first reviews, each followed by the reference judgement
and its reason; the admin reads the results before assigning real work."""

import re

import pytest
from django.urls import reverse

from review.models import Assignment, AuditEvent, Review
from review.selectors.quality import study_quality
from review.services import quality as services
from review.services.assignments import assignments_create
from tests import factories
from tests.review.quality_data import RELEASE, edits, make_world, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def w():
    w = make_world(n_instructions=6, n_clinicians=2, prefix="C")
    judgements = {}
    for k, instruction in enumerate(w.instructions[:2]):
        ids = dict(instruction.responses.values_list("model_name", "id"))
        judgements = {ids[name]: value for name, value in RELEASE.items()}
        services.gold_item_set(
            study=w.study,
            instruction=instruction,
            use="calibration",
            source="senior",
            judgements=judgements,
            reason=f"Reason {k}: the creatinine of March is the latest.",
            senior=w.clinicians[1],
            actor=w.admin,
        )
    return w


def test_calibration_comes_first_and_shows_the_reference_after_submit(client, w):
    newcomer = w.clinicians[0]
    # Real work assigned first: the calibration items still come first in the queue.
    assignments_create(instructions=w.instructions, clinicians=[newcomer], overlap=1, actor=w.admin)
    assert services.calibration_assign(study=w.study, clinician=newcomer, actor=w.admin) == 2
    assert AuditEvent.objects.filter(action="assignments_created", details__purpose="calibration")
    factories.sign_in(client, newcomer)
    queue = client.get(reverse("clinician_queue")).content.decode()
    assert queue.count('data-testid="queue-calibration"') == 2
    first_rows = re.findall(r'href="/instructions/(\d+)/review/', queue)[:2]
    calibration = Assignment.objects.filter(clinician=newcomer, purpose="calibration")
    assert {int(i) for i in first_rows} == set(calibration.values_list("instruction_id", flat=True))
    nxt = client.get(reverse("clinician_next"))
    assert int(nxt["Location"].split("/")[2]) in {int(i) for i in first_rows}

    assignment = calibration.order_by("instruction__instruction_id").first()
    url = reverse("clinician_review", args=[assignment.instruction_id])
    before = client.get(url).content.decode()
    assert 'data-testid="calibration"' in before and "once you submit" in before
    assert "Reason 0" not in before and 'data-testid="calibration-feedback"' not in before
    # Submit (two responses judged against the reference), then the page shows both.
    review = Review.objects.get(assignment=assignment)
    wrong = dict(RELEASE)
    first, second = list(RELEASE)[:2]
    wrong[first], wrong[second] = (2, True), (1, False)
    response = client.post(
        reverse("review_submit", args=[review.pk]),
        edits(review, wrong),
        content_type="application/json",
    )
    assert response.json()["status"] == "submitted"
    after = client.get(url).content.decode()
    assert 'data-testid="calibration-feedback"' in after
    assert "Reason 0: the creatinine of March is the latest." in after
    assert "You matched the reference's verdict on 3 of 4 responses" in after
    assert after.count('data-testid="feedback-row"') == 4 and after.count("differs") == 1


def test_the_admin_reads_calibration_results_before_real_work(client, w):
    newcomer = w.clinicians[0]
    services.calibration_assign(study=w.study, clinician=newcomer, actor=w.admin)
    for a in Assignment.objects.filter(clinician=newcomer, purpose="calibration"):
        submit(a, RELEASE)
    row = {c.clinician_id: c for c in study_quality(w.study).clinicians}[newcomer.pk]
    assert row.calibration.done and row.calibration.share == 1.0
    assert row.calibration.mean_tau == pytest.approx(1.0)
    # Calibration reviews are not quality figures' data: no review counted for agreement.
    assert row.quality.n_reviews == 0
    factories.sign_in(client, w.admin)
    page = client.get(reverse("admin_quality", args=[w.dataset.pk])).content.decode()
    assert "2 of 2 done" in page and "verdicts as the reference: 100% of 8" in page


def test_an_item_is_never_calibration_and_ordinary_work(w):
    plan = assignments_create(
        instructions=w.instructions, clinicians=w.clinicians, overlap=1, actor=w.admin
    )
    assert plan.known_items == 2
    assert not Assignment.objects.filter(
        purpose="review", instruction__in=w.instructions[:2]
    ).exists()


def test_calibration_needs_items_and_clinician_access(w):
    with pytest.raises(services.QualityError, match="clinician access"):
        services.calibration_assign(study=w.study, clinician=w.adjudicator, actor=w.admin)
    empty = make_world(n_instructions=1, n_clinicians=1, prefix="E")
    with pytest.raises(services.QualityError, match="no calibration items"):
        services.calibration_assign(
            study=empty.study, clinician=empty.clinicians[0], actor=empty.admin
        )


def test_a_calibration_item_keeps_its_use_once_assigned(w):
    services.calibration_assign(study=w.study, clinician=w.clinicians[0], actor=w.admin)
    instruction = w.instructions[0]
    judgements = {rid: (None, True) for rid in instruction.responses.values_list("id", flat=True)}
    with pytest.raises(services.QualityError, match="keeps that use"):
        services.gold_item_set(
            study=w.study, instruction=instruction, use="gold", source="release",
            judgements=judgements, reason="", actor=w.admin,
        )  # fmt: skip


def test_the_assign_preview_shows_each_clinicians_calibration_first(client, w):
    newcomer, other = w.clinicians
    services.calibration_assign(study=w.study, clinician=newcomer, actor=w.admin)
    submit(Assignment.objects.filter(clinician=newcomer, purpose="calibration").first(), RELEASE)
    factories.sign_in(client, w.admin)
    form = {
        "dataset": w.dataset.pk,
        "study": w.study.pk,
        "overlap": 1,
        "clinicians": [newcomer.pk, other.pk],
        "action": "preview",
    }
    page = client.post(reverse("admin_assign"), form).content.decode()
    assert 'data-testid="assign-calibration"' in page
    assert f"{newcomer.email}: 1 of 2 done, verdicts as the reference 4 of 4" in page
    assert f"{other.email}: not calibrated" in page
