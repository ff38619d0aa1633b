"""The review flow: starting, autosave, submit (idempotent), stale drafts, read-only, reopen,
strict validation, scoping (404 for not-yours), blinding and the audit trail."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from review.models import AuditEvent, ResponseJudgement, Review, Role
from review.services.reviews import (
    MAX_SECONDS_PER_SAVE,
    review_get_or_start,
    review_reopen,
    shown_order_for,
)
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(db):
    dataset = review_data.make_dataset()
    patient = review_data.make_record(dataset, "P-FLOW-1", n_events=80)
    instruction = review_data.make_instruction(dataset, patient, "I-FLOW-1")
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    other = factories.make_user("other@example.edu", roles=[Role.CLINICIAN])
    assignment = review_data.assign(instruction, clinician)
    return dataset, patient, instruction, clinician, other, assignment


@pytest.fixture
def signed_in(client, setup):
    client.force_login(setup[3])
    return client


def open_review(client, instruction) -> Review:
    response = client.get(reverse("clinician_review", args=[instruction.pk]))
    assert response.status_code == 200
    return Review.objects.get(assignment__instruction=instruction)


def payload(review: Review, *, version=None, ranks=None, correct=True, **extra) -> dict:
    order = [int(x) for x in review.shown_order]
    ranks = ranks if ranks is not None else list(range(1, len(order) + 1))
    body = {
        "version": review.version if version is None else version,
        "active_seconds": 3,
        "cannot_assess": "",
        "cannot_assess_note": "",
        "judgements": [
            {
                "response": rid,
                "position": position,
                "rank": ranks[position],
                "is_correct": correct,
                "error_tags": [] if correct else ["omission"],
                "comment": "",
            }
            for position, rid in enumerate(order)
        ],
    }
    body.update(extra)
    return body


def post(client, name, review, body):
    return client.post(
        reverse(name, args=[review.pk]), data=json.dumps(body), content_type="application/json"
    )


def test_it_starts_a_review_with_a_stable_per_clinician_order(signed_in, setup):
    _, _, instruction, clinician, _, _ = setup
    review = open_review(signed_in, instruction)
    ids = sorted(instruction.responses.values_list("id", flat=True))
    assert sorted(review.shown_order) == ids
    assert review.status == Review.Status.DRAFT
    assert review.judgements.count() == len(ids)
    # Reloading neither restarts the review nor changes the order.
    again = open_review(signed_in, instruction)
    assert again.pk == review.pk and again.shown_order == review.shown_order
    assert review.shown_order == shown_order_for(
        clinician_id=clinician.pk, instruction_id=instruction.pk, response_ids=ids
    )
    orders = {
        tuple(shown_order_for(clinician_id=c, instruction_id=instruction.pk, response_ids=ids))
        for c in range(1, 30)
    }
    assert len(orders) > 5  # different clinicians see different orders


def test_it_saves_a_draft_and_shows_it_after_a_reload(signed_in, setup):
    instruction = setup[2]
    review = open_review(signed_in, instruction)
    body = payload(review, ranks=[1, 1, 3, None], correct=False)
    body["judgements"][2]["comment"] = "Misses the trend."
    response = post(signed_in, "review_save", review, body)
    assert response.status_code == 200, response.content
    assert response.json()["version"] == 1
    page = signed_in.get(reverse("clinician_review", args=[instruction.pk]))
    data = page.context["data"]
    assert [r["rank"] for r in data["responses"]] == [1, 1, 3, None]
    assert data["responses"][0]["error_tags"] == ["omission"]
    assert data["version"] == 1
    assert b"Misses the trend." in page.content
    assert b'value="false" checked' in page.content


def test_submit_is_idempotent(signed_in, setup):
    instruction = setup[2]
    review = open_review(signed_in, instruction)
    body = payload(review)
    first = post(signed_in, "review_submit", review, body)
    second = post(signed_in, "review_submit", review, body)  # double click / retry / other tab
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    assert first.json()["status"] == "submitted"
    assert Review.objects.filter(assignment__instruction=instruction).count() == 1
    assert AuditEvent.objects.filter(action=AuditEvent.Action.REVIEW_SUBMITTED).count() == 1


def test_it_rejects_a_stale_draft_with_409(signed_in, setup):
    review = open_review(signed_in, setup[2])
    assert post(signed_in, "review_save", review, payload(review)).status_code == 200
    stale = post(signed_in, "review_save", review, payload(review, version=0, correct=False))
    assert stale.status_code == 409
    assert stale.json()["error"] == "stale"
    assert not ResponseJudgement.objects.filter(review=review, is_correct=False).exists()


def test_a_submitted_review_is_read_only_until_an_admin_reopens_it(signed_in, setup):
    instruction = setup[2]
    review = open_review(signed_in, instruction)
    assert post(signed_in, "review_submit", review, payload(review)).status_code == 200
    review.refresh_from_db()
    late = post(signed_in, "review_save", review, payload(review, correct=False))
    assert late.status_code == 409 and late.json()["error"] == "read_only"
    page = signed_in.get(reverse("clinician_review", args=[instruction.pk]))
    assert b'data-testid="read-only"' in page.content
    assert page.context["data"]["editable"] is False

    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    assert review_reopen(review=review, actor=admin, reason="Rank D again, please.") is True
    review.refresh_from_db()
    assert review.status == Review.Status.REOPENED
    assert AuditEvent.objects.filter(action=AuditEvent.Action.REVIEW_REOPENED).count() == 1
    again = post(signed_in, "review_save", review, payload(review, correct=False))
    assert again.status_code == 200
    assert (
        post(
            signed_in, "review_submit", review, payload(review, version=again.json()["version"])
        ).json()["status"]
        == "submitted"
    )


def test_the_admin_reopen_action_reopens_submitted_reviews(client, setup):
    _, _, instruction, clinician, _, assignment = setup
    review = review_get_or_start(assignment=assignment)
    client.force_login(clinician)
    assert post(client, "review_submit", review, payload(review)).status_code == 200
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    client.force_login(admin)
    changelist = reverse("admin:review_review_changelist")
    # First the action asks for the reason (the clinician will read it), then it reopens.
    asked = client.post(changelist, {"action": "reopen", "_selected_action": [review.pk]})
    assert asked.status_code == 200 and b'name="reason"' in asked.content
    review.refresh_from_db()
    assert review.status == Review.Status.SUBMITTED
    response = client.post(
        changelist,
        {
            "action": "reopen",
            "_selected_action": [review.pk],
            "apply": "1",
            "reason": "Response B was ranked before the record loaded.",
        },
    )
    assert response.status_code == 302
    review.refresh_from_db()
    assert review.status == Review.Status.REOPENED and review.reopened_by == admin
    assert review.reopen_reason == "Response B was ranked before the record loaded."


def _bad_payloads(review: Review, foreign_id: int) -> dict[str, dict]:
    good = payload(review)
    n = len(review.shown_order)
    cases = {}

    def variant(name, mutate):
        body = json.loads(json.dumps(good))
        mutate(body)
        cases[name] = body

    variant("unknown response", lambda b: b["judgements"][0].update(response=999_999))
    variant("foreign response", lambda b: b["judgements"][0].update(response=foreign_id))
    variant(
        "duplicate response",
        lambda b: b["judgements"][1].update(response=b["judgements"][0]["response"]),
    )
    variant("missing response", lambda b: b["judgements"].pop())
    variant("duplicate position", lambda b: b["judgements"][1].update(position=0))
    variant("position out of range", lambda b: b["judgements"][0].update(position=n))
    variant("rank zero", lambda b: b["judgements"][0].update(rank=0))
    variant("rank above n", lambda b: b["judgements"][0].update(rank=n + 1))
    variant("rank as text", lambda b: b["judgements"][0].update(rank="1"))
    variant("rank as boolean", lambda b: b["judgements"][0].update(rank=True))
    variant("correct as number", lambda b: b["judgements"][0].update(is_correct=1))
    variant("oversized comment", lambda b: b["judgements"][0].update(comment="x" * 5001))
    variant("unknown tag", lambda b: b["judgements"][0].update(error_tags=["made-up"]))
    variant("repeated tag", lambda b: b["judgements"][0].update(error_tags=["omission"] * 2))
    variant("unknown field", lambda b: b.update(model_name="x"))
    variant("unknown judgement field", lambda b: b["judgements"][0].update(model="x"))
    variant("unknown reason", lambda b: b.update(cannot_assess="bored"))
    variant("negative seconds", lambda b: b.update(active_seconds=-5))
    variant("no version", lambda b: b.pop("version"))
    variant("judgements not a list", lambda b: b.update(judgements={}))
    return cases


@pytest.mark.parametrize("endpoint", ["review_save", "review_submit"])
def test_invalid_payloads_get_400_and_store_nothing(signed_in, setup, endpoint):
    dataset, patient, instruction, *_ = setup
    other_instruction = review_data.make_instruction(dataset, patient, "I-FLOW-2")
    foreign_id = other_instruction.responses.first().pk
    review = open_review(signed_in, instruction)
    for name, body in _bad_payloads(review, foreign_id).items():
        response = post(signed_in, endpoint, review, body)
        assert response.status_code == 400, name
        assert response.json()["error"] == "invalid", name
        assert response.json()["message"], name
    not_json = signed_in.post(
        reverse(endpoint, args=[review.pk]), data="{nope", content_type="application/json"
    )
    assert not_json.status_code == 400
    review.refresh_from_db()
    assert review.version == 0 and review.status == Review.Status.DRAFT
    assert not ResponseJudgement.objects.filter(review=review, rank__isnull=False).exists()
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.REVIEW_SAVED).exists()


def test_submit_requires_every_response_ranked_and_marked(signed_in, setup):
    review = open_review(signed_in, setup[2])
    unranked = post(signed_in, "review_submit", review, payload(review, ranks=[1, 2, 3, None]))
    assert unranked.status_code == 400 and unranked.json()["error"] == "incomplete"
    unmarked = post(signed_in, "review_submit", review, payload(review, correct=None))
    assert unmarked.status_code == 400 and unmarked.json()["error"] == "incomplete"
    review.refresh_from_db()
    assert review.status == Review.Status.DRAFT and review.version == 0


def test_cannot_assess_with_a_reason_submits_without_ranks(signed_in, setup):
    review = open_review(signed_in, setup[2])
    body = payload(
        review,
        ranks=[None] * 4,
        correct=None,
        cannot_assess=Review.CannotAssess.RECORD_LACKS_INFORMATION,
    )
    response = post(signed_in, "review_submit", review, body)
    assert response.status_code == 200, response.content
    review.refresh_from_db()
    assert review.cannot_assess == "record_lacks_information"


def test_cannot_assess_other_needs_a_note(signed_in, setup):
    review = open_review(signed_in, setup[2])
    body = payload(review, ranks=[None] * 4, correct=None, cannot_assess="other")
    assert post(signed_in, "review_submit", review, body).status_code == 400
    body["cannot_assess_note"] = "The instruction refers to another patient."
    assert post(signed_in, "review_submit", review, body).status_code == 200


def test_time_spent_accumulates_in_bounded_increments(signed_in, setup):
    review = open_review(signed_in, setup[2])
    # Pretend the review was last saved ten minutes ago.
    Review.objects.filter(pk=review.pk).update(updated_at=timezone.now() - timedelta(minutes=10))
    review.refresh_from_db()
    response = post(signed_in, "review_save", review, payload(review, active_seconds=9999))
    assert response.json()["time_spent_seconds"] == MAX_SECONDS_PER_SAVE
    review.refresh_from_db()
    # Right after a save, a client claiming many seconds gets only the wall-clock time.
    response = post(signed_in, "review_save", review, payload(review, active_seconds=200))
    assert MAX_SECONDS_PER_SAVE <= response.json()["time_spent_seconds"] <= MAX_SECONDS_PER_SAVE + 6


def test_unassigned_instruction_is_404(signed_in, setup):
    dataset, patient, *_ = setup
    unassigned = review_data.make_instruction(dataset, patient, "I-NOT-MINE")
    for name in ("clinician_review", "record_excerpt", "record_events", "record_search"):
        assert signed_in.get(reverse(name, args=[unassigned.pk])).status_code == 404, name
    assert signed_in.get(reverse("clinician_review", args=[987654])).status_code == 404


def test_another_clinicians_review_is_404(client, setup):
    _, _, instruction, clinician, other, assignment = setup
    review = review_get_or_start(assignment=assignment)
    client.force_login(other)
    for name in ("review_save", "review_submit"):
        assert post(client, name, review, payload(review)).status_code == 404
    assert client.get(reverse("clinician_review", args=[instruction.pk])).status_code == 404
    event = instruction.patient.events.filter(event_type="note").first()
    url = reverse("record_event", args=[instruction.pk, event.pk])
    assert client.get(url).status_code == 404
    review.refresh_from_db()
    assert review.version == 0


def test_reference_answers_are_hidden_unless_the_dataset_shows_them(signed_in, setup):
    dataset, _, instruction, *_ = setup
    page = signed_in.get(reverse("clinician_review", args=[instruction.pk]))
    assert b"REFERENCE: creatinine" not in page.content
    dataset.show_references_to_clinicians = True
    dataset.save()
    page = signed_in.get(reverse("clinician_review", args=[instruction.pk]))
    assert b"REFERENCE: creatinine" in page.content


def test_opening_and_saving_are_audited_without_patient_text(signed_in, setup):
    _, patient, instruction, clinician, *_ = setup
    review = open_review(signed_in, instruction)
    viewed = AuditEvent.objects.filter(
        actor=clinician,
        action__in=[AuditEvent.Action.INSTRUCTION_VIEWED, AuditEvent.Action.RECORD_VIEWED],
    ).values_list("action", "person_id", "instruction_id")
    assert set(viewed) == {
        (AuditEvent.Action.INSTRUCTION_VIEWED, patient.person_id, instruction.instruction_id),
        (AuditEvent.Action.RECORD_VIEWED, patient.person_id, instruction.instruction_id),
    }
    for _ in range(3):
        body = payload(review)
        assert post(signed_in, "review_save", review, body).status_code == 200
        review.refresh_from_db()
    # Autosave fires often: the trail keeps one REVIEW_SAVED per review per minute.
    saved = AuditEvent.objects.filter(action=AuditEvent.Action.REVIEW_SAVED)
    assert saved.count() == 1
    assert saved.get().person_id == patient.person_id
    search = signed_in.get(
        reverse("record_search", args=[instruction.pk]), {"q": "pericardial effusion"}
    )
    assert search.status_code == 200
    searched = AuditEvent.objects.get(action=AuditEvent.Action.RECORD_SEARCHED)
    assert searched.details["query_length"] == len("pericardial effusion")
    assert "pericardial" not in json.dumps(searched.details)


def test_a_review_opened_before_its_responses_exist_cannot_be_submitted_empty(signed_in, setup):
    dataset, patient, _, clinician = setup[:4]
    bare = review_data.make_instruction(dataset, patient, "I-FLOW-BARE", n_responses=0)
    review_data.assign(bare, clinician)
    review = open_review(signed_in, bare)
    assert review.shown_order == []
    empty = post(signed_in, "review_submit", review, payload(review))
    assert empty.status_code == 400 and empty.json()["error"] == "incomplete"
    # The responses are imported later: the draft shows them the next time it is opened.
    from review.models import ModelResponse

    for name in ("late-a", "late-b"):
        ModelResponse.objects.create(instruction=bare, model_name=name, text=f"{name} answer")
    review = open_review(signed_in, bare)
    assert len(review.shown_order) == 2
    assert ResponseJudgement.objects.filter(review=review).count() == 2
    assert post(signed_in, "review_submit", review, payload(review)).status_code == 200
