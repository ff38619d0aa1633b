"""Adjudication: disagreements found, sent to an adjudicator who never wrote any of them, resolved
on a page that shows the clinicians' judgements anonymised and blinded, saved by the review
page's protocol, audited."""

import time

import pytest
from django.urls import reverse

from review.models import (
    AdjudicatedJudgement,
    Adjudication,
    Assignment,
    AuditEvent,
    Role,
    User,
)
from review.selectors.quality import disagreements
from review.services import adjudications as services
from review.services import quality as quality_services
from review.services.reviews import IncompleteReview, ReviewReadOnly
from tests import factories
from tests.review import review_data
from tests.review.quality_data import RELEASE, make_world, submit

pytestmark = pytest.mark.django_db

NAMES = list(RELEASE)
REVERSED = {name: (5 - rank, correct) for name, (rank, correct) in RELEASE.items()}
SPLIT = {**RELEASE, NAMES[0]: (1, False)}  # the best response marked incorrect


@pytest.fixture
def w():
    w = make_world(n_instructions=3, n_clinicians=3, prefix="A")
    a, b, c = w.clinicians
    i0, i1, i2 = w.instructions
    # i0: a and b split on one verdict; i1: a and c rank in reverse (tau -1); i2: agree.
    submit(factories.assign(i0, a), RELEASE)
    submit(factories.assign(i0, b), SPLIT)
    submit(factories.assign(i1, a), RELEASE)
    submit(factories.assign(i1, c), REVERSED)
    submit(factories.assign(i2, b), RELEASE)
    submit(factories.assign(i2, c), RELEASE)
    return w


def test_disagreements_are_split_verdicts_or_rankings_below_the_threshold(w):
    found = {d.instruction_code: d for d in disagreements(w.study, threshold=0.0)}
    assert set(found) == {"A-00", "A-01"}
    assert len(found["A-00"].split) == 1 and found["A-00"].min_tau == pytest.approx(1.0)
    assert found["A-01"].split == [] and found["A-01"].min_tau == pytest.approx(-1.0)
    # A threshold of -1 keeps only split verdicts.
    assert [d.instruction_code for d in disagreements(w.study, threshold=-1.0)] == ["A-00"]


def test_an_adjudicator_is_never_given_their_own_reviews(w):
    # A clinician who is also an adjudicator, and reviewed A-00.
    factories.make_approved(w.clinicians[0], [Role.CLINICIAN, Role.ADJUDICATOR])
    reviewer = User.objects.get(pk=w.clinicians[0].pk)  # read afresh: access is cached per object
    plan = services.adjudications_create(
        study=w.study,
        instruction_ids=[i.pk for i in w.instructions],
        adjudicator=reviewer,
        actor=w.admin,
    )
    # are theirs; A-02 does not disagree.
    assert plan.created == [] and sorted(plan.own) == ["A-00", "A-01"] and len(plan.agreed) == 1
    assert not Adjudication.objects.exists()


def test_access_and_services_refuse_an_adjudicator_who_later_reviewed(w, client):
    plan = services.adjudications_create(
        study=w.study, instruction_ids=[w.instructions[0].pk], adjudicator=w.adjudicator,
        actor=w.admin,
    )  # fmt: skip
    adjudication = plan.created[0]
    factories.sign_in(client, w.adjudicator)
    url = reverse("adjudication_page", args=[adjudication.pk])
    assert client.get(url).status_code == 200
    # The adjudicator is now asked to review that instruction (in another round, say).
    factories.make_approved(w.adjudicator, [Role.CLINICIAN, Role.ADJUDICATOR])
    other = quality_services.Study.objects.create(dataset=w.dataset, round=2, name="Round 2")
    Assignment.objects.create(study=other, instruction=w.instructions[0], clinician=w.adjudicator)
    factories.sign_in(client, w.adjudicator)
    assert client.get(url).status_code == 404
    save = client.post(
        reverse("adjudication_save", args=[adjudication.pk]), {}, content_type="application/json"
    )
    assert save.status_code == 404
    with pytest.raises(services.AdjudicationForbidden):
        services.adjudication_save_draft(
            adjudication=adjudication, adjudicator=w.adjudicator, payload={"edits": []}
        )
    with pytest.raises(services.AdjudicationForbidden):
        services.adjudication_submit(
            adjudication_id=adjudication.pk, adjudicator=w.adjudicator, payload={"edits": []}
        )


def test_adjudication_needs_the_role_and_no_unblinding_access(w):
    with pytest.raises(services.AdjudicationError, match="no current adjudicator access"):
        services.adjudications_create(
            study=w.study, instruction_ids=[w.instructions[0].pk],
            adjudicator=w.clinicians[2], actor=w.admin,
        )  # fmt: skip
    both = factories.make_user("both@example.edu", roles=[Role.ADJUDICATOR, Role.RESEARCHER])
    with pytest.raises(services.AdjudicationError, match="can read model names"):
        services.adjudications_create(
            study=w.study, instruction_ids=[w.instructions[0].pk], adjudicator=both,
            actor=w.admin,
        )  # fmt: skip


def _payload(adjudication, values, reason=None, seq=1):
    now = int(time.time() * 1000)
    names = dict(
        Adjudication.objects.get(pk=adjudication.pk).instruction.responses.values_list(
            "id", "model_name"
        )
    )
    edits = []
    for handle, rid in zip(adjudication.handles, adjudication.shown_order, strict=True):
        if names[int(rid)] in values:
            rank, correct = values[names[int(rid)]]
            edits += [
                {"handle": handle, "field": "rank", "value": rank, "at": now},
                {"handle": handle, "field": "is_correct", "value": correct, "at": now},
            ]
    if reason is not None:
        edits.append({"field": "reason", "value": reason, "at": now})
    return {"edits": edits, "tab": "t", "seq": seq, "active_seconds": 3}


def test_the_page_shows_the_reviewers_side_by_side_blinded_and_anonymised(w, client):
    plan = services.adjudications_create(
        study=w.study, instruction_ids=[w.instructions[0].pk], adjudicator=w.adjudicator,
        actor=w.admin,
    )  # fmt: skip
    adjudication = plan.created[0]
    assert AuditEvent.objects.filter(action="adjudication_assigned").count() == 1
    factories.sign_in(client, w.adjudicator)
    queue = client.get(reverse("adjudication_queue")).content.decode()
    assert "A-00" in queue and "Not started" in queue
    page = client.get(reverse("adjudication_page", args=[adjudication.pk])).content.decode()
    assert page.count('data-testid="reviewer-judgements"') == 4
    assert "Reviewer 1" in page and "Reviewer 2" in page and "Reviewer 3" not in page
    for name in review_data.MODEL_NAMES:
        assert name not in page
    for clinician in w.clinicians:
        assert clinician.email not in page and clinician.pseudonym not in page
    assert "they split on whether Response" in page
    assert AuditEvent.objects.filter(
        action="record_viewed", object_type="Adjudication", instruction_id="A-00"
    ).exists()
    # The record endpoints answer the adjudicator for this instruction only.
    excerpt = reverse("record_excerpt", args=[w.instructions[0].pk])
    assert client.get(excerpt).status_code == 200
    assert client.get(reverse("record_excerpt", args=[w.instructions[2].pk])).status_code == 404


def test_save_then_submit_resolves_the_disagreement(w, client):
    adjudication = services.adjudications_create(
        study=w.study, instruction_ids=[w.instructions[0].pk], adjudicator=w.adjudicator,
        actor=w.admin,
    ).created[0]  # fmt: skip
    factories.sign_in(client, w.adjudicator)
    save = reverse("adjudication_save", args=[adjudication.pk])
    submit_url = reverse("adjudication_submit", args=[adjudication.pk])
    half = {name: RELEASE[name] for name in NAMES[:2]}
    first = client.post(save, _payload(adjudication, half), content_type="application/json")
    assert first.status_code == 200 and first.json()["status"] == "draft"
    # Resending the same edits is harmless; the draft holds them.
    again = client.post(save, _payload(adjudication, half), content_type="application/json")
    assert again.json()["draft"] == first.json()["draft"]
    incomplete = client.post(
        submit_url, _payload(adjudication, RELEASE, seq=2), content_type="application/json"
    )
    assert incomplete.status_code == 400 and incomplete.json()["field"] == "reason"
    done = client.post(
        submit_url,
        _payload(adjudication, RELEASE, reason="The record shows creatinine 1.2.", seq=3),
        content_type="application/json",
    )
    assert done.status_code == 200 and done.json()["status"] == "submitted"
    rows = {
        j.response.model_name: (j.rank, j.is_correct) for j in AdjudicatedJudgement.objects.all()
    }
    assert rows == RELEASE
    adjudication.refresh_from_db()
    assert adjudication.reason == "The record shows creatinine 1.2." and adjudication.draft == {}
    assert AuditEvent.objects.filter(action="adjudication_submitted").count() == 1
    # Submitted: read-only, and a changed edit is refused by name.
    late = client.post(
        save, _payload(adjudication, {NAMES[0]: (4, False)}), content_type="application/json"
    )
    assert late.status_code == 409 and len(late.json()["unapplied"]) == 2
    with pytest.raises(ReviewReadOnly):
        services.adjudication_save_draft(
            adjudication=adjudication, adjudicator=w.adjudicator,
            payload=_payload(adjudication, {NAMES[0]: (4, False)}),
        )  # fmt: skip


def test_submit_needs_every_response_judged(w):
    adjudication = services.adjudications_create(
        study=w.study, instruction_ids=[w.instructions[1].pk], adjudicator=w.adjudicator,
        actor=w.admin,
    ).created[0]  # fmt: skip
    with pytest.raises(IncompleteReview, match="not ranked"):
        services.adjudication_submit(
            adjudication_id=adjudication.pk, adjudicator=w.adjudicator,
            payload=_payload(adjudication, {NAMES[0]: (1, True)}, reason="Because."),
        )  # fmt: skip


def test_admin_sends_disagreements_from_the_quality_page(w, client):
    factories.sign_in(client, w.admin)
    page = client.get(reverse("admin_quality", args=[w.dataset.pk])).content.decode()
    assert page.count('data-testid="disagreement"') == 2 and w.adjudicator.email in page
    response = client.post(
        reverse("admin_quality_adjudicate", args=[w.study.pk]),
        {
            "instructions": [w.instructions[0].pk, w.instructions[1].pk],
            "adjudicator": w.adjudicator.pk,
        },
    )
    assert response.status_code == 302
    assert Adjudication.objects.filter(adjudicator=w.adjudicator).count() == 2
