"""The review flow: starting, autosave, submit (idempotent), stale drafts, read-only, reopen,
strict validation, scoping (404 for not-yours), blinding and the audit trail."""

import itertools
import json
import time
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from review.access import page_owner
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


_seq = itertools.count(1)


def edits_for(
    review: Review,
    *,
    ranks=None,
    correct=True,
    tags=None,
    comments=None,
    at: int | None = None,
) -> list[dict]:
    """Edits setting every response's rank, verdict, tags and comment, in the order shown."""
    handles = list(review.handles)
    ranks = ranks if ranks is not None else list(range(1, len(handles) + 1))
    at = at if at is not None else int(time.time() * 1000)
    out = []
    for i, handle in enumerate(handles):
        out += [
            {"handle": handle, "field": "rank", "value": ranks[i], "at": at},
            {"handle": handle, "field": "is_correct", "value": correct, "at": at},
            {
                "handle": handle,
                "field": "tags",
                "value": tags if tags is not None else ([] if correct else ["omission"]),
                "at": at,
            },
        ]
        if comments and comments[i] is not None:
            out.append({"handle": handle, "field": "comment", "value": comments[i], "at": at})
    return out


def payload(review: Review, *, tab="tab-1", seq=None, active_seconds=3, extra=None, **kw) -> dict:
    """A save or submit body: the edits above, plus review-level fields given in ``extra``."""
    at = kw.get("at") or int(time.time() * 1000)
    edits = edits_for(review, **kw)
    for field, value in (extra or {}).items():
        edits.append({"field": field, "value": value, "at": at})
    return {
        "edits": edits,
        "tab": tab,
        "seq": next(_seq) if seq is None else seq,
        "active_seconds": active_seconds,
    }


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
    assert len(review.handles) == len(ids)
    assert review.judgements.count() == 0  # the draft holds the values; rows come at submit
    # Reloading neither restarts the review nor changes the order.
    again = open_review(signed_in, instruction)
    assert again.pk == review.pk and again.shown_order == review.shown_order
    orders = {tuple(shown_order_for(ids)) for _ in range(30)}
    assert len(orders) > 5  # different clinicians see different orders


def test_it_saves_a_draft_and_shows_it_after_a_reload(signed_in, setup):
    instruction = setup[2]
    review = open_review(signed_in, instruction)
    body = payload(
        review,
        ranks=[1, 1, 3, None],
        correct=False,
        comments=[None, None, "Misses the trend.", None],
    )
    response = post(signed_in, "review_save", review, body)
    assert response.status_code == 200, response.content
    assert response.json()["version"] == 1
    assert response.json()["draft"][f"{review.handles[2]}.comment"] == "Misses the trend."
    page = signed_in.get(reverse("clinician_review", args=[instruction.pk]))
    data = page.context["data"]
    assert [r["rank"] for r in data["responses"]] == [1, 1, 3, None]
    assert data["responses"][0]["tags"] == ["omission"]
    assert [r["is_correct"] for r in data["responses"]] == [False] * 4
    assert b"Misses the trend." in page.content
    # A draft lives in the review's draft column: judgement rows are written at submit.
    assert not ResponseJudgement.objects.filter(review=review, rank__isnull=False).exists()


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


def test_a_late_resend_of_older_edits_does_not_overwrite_newer_ones(signed_in, setup):
    # The reload race: the old page's save (edits made at t) reaches the server after the new
    # page saved edits made at t + 5 s. The newer edit wins whatever the arrival order, and
    # nothing is refused.
    review = open_review(signed_in, setup[2])
    now = int(time.time() * 1000)
    newer = post(signed_in, "review_save", review, payload(review, correct=True, at=now))
    older = post(signed_in, "review_save", review, payload(review, correct=False, at=now - 5000))
    assert newer.status_code == older.status_code == 200
    review.refresh_from_db()
    assert all(v is True for k, v in older.json()["draft"].items() if k.endswith(".is_correct"))


def test_two_tabs_editing_different_fields_merge(client, setup):
    instruction, clinician = setup[2], setup[3]
    client.force_login(clinician)
    review = open_review(client, instruction)
    h = review.handles
    now = int(time.time() * 1000)
    tab_a = {"edits": [{"handle": h[0], "field": "rank", "value": 2, "at": now}], "tab": "A"}
    tab_b = {"edits": [{"handle": h[0], "field": "comment", "value": "B's note", "at": now}]}
    tab_b["tab"] = "B"
    assert post(client, "review_save", review, tab_a).status_code == 200
    both = post(client, "review_save", review, tab_b)
    assert both.status_code == 200
    assert both.json()["draft"] == {f"{h[0]}.rank": 2, f"{h[0]}.comment": "B's note"}


def test_resending_a_batch_changes_nothing_and_counts_its_time_once(signed_in, setup):
    review = open_review(signed_in, setup[2])
    five_minutes_ago = timezone.now() - timedelta(minutes=5)  # started and last saved then
    Review.objects.filter(pk=review.pk).update(
        started_at=five_minutes_ago, updated_at=five_minutes_ago
    )
    review.refresh_from_db()
    body = payload(review, seq=7, active_seconds=40)
    first = post(signed_in, "review_save", review, body).json()
    again = post(signed_in, "review_save", review, body).json()  # the answer was lost: resent
    assert again["draft"] == first["draft"]
    assert again["time_spent_seconds"] == first["time_spent_seconds"] == 40


def test_many_quick_saves_from_new_tabs_cannot_inflate_time_spent(signed_in, setup):
    # Each save may add a few seconds of slack for jitter; a client sending a new tab id or
    # sequence number on every request must not turn that slack into time nobody spent.
    review = open_review(signed_in, setup[2])
    for i in range(30):
        body = {"edits": [], "tab": f"tab-{i}", "seq": 1, "active_seconds": 300}
        assert post(signed_in, "review_save", review, body).status_code == 200
    review.refresh_from_db()
    assert review.time_spent_seconds <= (timezone.now() - review.started_at).total_seconds()


def test_an_edit_dated_in_the_future_cannot_win_forever(signed_in, setup):
    review = open_review(signed_in, setup[2])
    h = review.handles[0]
    future = int(time.time() * 1000) + 10 * 60 * 1000  # a tab whose clock runs 10 min fast
    ahead = {"edits": [{"handle": h, "field": "rank", "value": 1, "at": future}], "tab": "x"}
    assert post(signed_in, "review_save", review, ahead).status_code == 200
    time.sleep(0.01)
    later = {"edits": [{"handle": h, "field": "rank", "value": 3, "at": int(time.time() * 1000)}]}
    later["tab"] = "y"
    assert post(signed_in, "review_save", review, later).json()["draft"][f"{h}.rank"] == 3


def test_opening_a_review_leaves_it_new_until_the_first_edit(signed_in, setup):
    from review.selectors.reviews import clinician_queue

    instruction, clinician = setup[2], setup[3]
    review = open_review(signed_in, instruction)
    assert [i.status for i in clinician_queue(clinician).items] == ["new"]
    sync = {"edits": [], "tab": "t", "seq": 1, "active_seconds": 2}
    assert post(signed_in, "review_save", review, sync).status_code == 200
    assert [i.status for i in clinician_queue(clinician).items] == ["new"]
    assert post(signed_in, "review_save", review, payload(review)).status_code == 200
    assert [i.status for i in clinician_queue(clinician).items] == ["draft"]


def test_a_submitted_review_is_read_only_until_an_admin_reopens_it(signed_in, setup):
    instruction = setup[2]
    review = open_review(signed_in, instruction)
    assert post(signed_in, "review_submit", review, payload(review)).status_code == 200
    review.refresh_from_db()
    late = post(signed_in, "review_save", review, payload(review, correct=False))
    assert late.status_code == 409 and late.json()["error"] == "read_only"
    # The refusal names each edit that was not applied, so the page can say so.
    assert sorted(late.json()["unapplied"]) == sorted(
        f"{h}.{f}" for h in review.handles for f in ("is_correct", "tags")
    )
    page = signed_in.get(reverse("clinician_review", args=[instruction.pk]))
    assert b'data-testid="read-only"' in page.content
    assert page.context["data"]["editable"] is False

    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    assert review_reopen(review=review, actor=admin, reason="Rank D again, please.") is True
    review.refresh_from_db()
    assert review.status == Review.Status.REOPENED
    assert AuditEvent.objects.filter(action=AuditEvent.Action.REVIEW_REOPENED).count() == 1
    # The reopened page shows the submitted values, then takes edits on top of them.
    page = signed_in.get(reverse("clinician_review", args=[instruction.pk]))
    assert [r["rank"] for r in page.context["data"]["responses"]] == [1, 2, 3, 4]
    again = post(signed_in, "review_save", review, payload(review, correct=False))
    assert again.status_code == 200
    assert post(signed_in, "review_submit", review, {"edits": []}).json()["status"] == "submitted"
    assert set(
        ResponseJudgement.objects.filter(review=review).values_list("is_correct", flat=True)
    ) == {False}
    # The rows written at the first submit were updated, not duplicated, and carry the new tags.
    rows = ResponseJudgement.objects.filter(review=review).prefetch_related("error_tags")
    assert len(rows) == len(review.handles)
    assert all([t.slug for t in row.error_tags.all()] == ["omission"] for row in rows)
    # Reopened once more and submitted with the tags cleared: no stale link survives.
    assert review_reopen(review=review, actor=admin, reason="Tags again.") is True
    review.refresh_from_db()
    cleared = payload(review, correct=False, tags=[])
    assert post(signed_in, "review_submit", review, cleared).json()["status"] == "submitted"
    assert not ResponseJudgement.error_tags.through.objects.filter(
        responsejudgement__review=review
    ).exists()


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


def _bad_payloads(review: Review, foreign_handle: str) -> dict[str, dict]:
    good = payload(review)
    n = len(review.handles)
    cases = {}

    def variant(name, mutate):
        body = json.loads(json.dumps(good))
        mutate(body)
        cases[name] = body

    def first_of(field):
        def mutate_with(body, **changes):
            for e in body["edits"]:
                if e.get("field") == field:
                    e.update(changes)
                    return

        return mutate_with

    rank, correct, tags = first_of("rank"), first_of("is_correct"), first_of("tags")
    variant("unknown handle", lambda b: rank(b, handle="nope"))
    variant("another review's handle", lambda b: rank(b, handle=foreign_handle))
    variant("no handle on a response field", lambda b: b["edits"][0].pop("handle"))
    variant("unknown field", lambda b: rank(b, field="model_name"))
    variant("rank zero", lambda b: rank(b, value=0))
    variant("rank above n", lambda b: rank(b, value=n + 1))
    variant("rank as text", lambda b: rank(b, value="1"))
    variant("rank as boolean", lambda b: rank(b, value=True))
    variant("correct as number", lambda b: correct(b, value=1))
    variant("no value", lambda b: b["edits"][0].pop("value"))
    variant("no time", lambda b: b["edits"][0].pop("at"))
    variant("time as text", lambda b: rank(b, at="now"))
    variant(
        "oversized comment",
        lambda b: b["edits"].append(
            {"handle": review.handles[0], "field": "comment", "value": "x" * 5001, "at": 1}
        ),
    )
    variant("unknown tag", lambda b: tags(b, value=["made-up"]))
    variant("repeated tag", lambda b: tags(b, value=["omission"] * 2))
    variant("unknown top-level field", lambda b: b.update(model_name="x"))
    variant("unknown edit field", lambda b: b["edits"][0].update(model="x"))
    variant(
        "unknown reason",
        lambda b: b["edits"].append({"field": "cannot_assess", "value": "bored", "at": 1}),
    )
    variant("negative seconds", lambda b: b.update(active_seconds=-5))
    variant("edits not a list", lambda b: b.update(edits={}))
    variant("too many edits", lambda b: b.update(edits=b["edits"] * 100))
    return cases


@pytest.mark.parametrize("endpoint", ["review_save", "review_submit"])
def test_invalid_payloads_get_400_and_store_nothing(signed_in, setup, endpoint):
    dataset, patient, instruction, *_ = setup
    other_instruction = review_data.make_instruction(dataset, patient, "I-FLOW-2")
    other_review = review_get_or_start(assignment=review_data.assign(other_instruction, setup[3]))
    review = open_review(signed_in, instruction)
    for name, body in _bad_payloads(review, other_review.handles[0]).items():
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
    assert review.draft == {}
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
        extra={"cannot_assess": Review.CannotAssess.RECORD_LACKS_INFORMATION},
    )
    response = post(signed_in, "review_submit", review, body)
    assert response.status_code == 200, response.content
    review.refresh_from_db()
    assert review.cannot_assess == "record_lacks_information"


def test_cannot_assess_other_needs_a_note(signed_in, setup):
    review = open_review(signed_in, setup[2])
    body = payload(review, ranks=[None] * 4, correct=None, extra={"cannot_assess": "other"})
    assert post(signed_in, "review_submit", review, body).status_code == 400
    note = "The instruction refers to another patient."
    body["edits"].append({"field": "cannot_assess_note", "value": note, "at": 1})
    assert post(signed_in, "review_submit", review, body).status_code == 200


def test_time_spent_accumulates_in_bounded_increments(signed_in, setup):
    review = open_review(signed_in, setup[2])
    # Pretend the review was last saved ten minutes ago.
    ten_minutes_ago = timezone.now() - timedelta(minutes=10)  # started and last saved then
    Review.objects.filter(pk=review.pk).update(
        started_at=ten_minutes_ago, updated_at=ten_minutes_ago
    )
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
    for name in ("clinician_review", "record_excerpt", "record_events"):
        assert signed_in.get(reverse(name, args=[unassigned.pk])).status_code == 404, name
    search = signed_in.post(
        reverse("record_search", args=[unassigned.pk]), {"q": "x"}, content_type="application/json"
    )
    assert search.status_code == 404 and search.json()["error"] == "not_found"
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
    for ranks in ([1, 2, 3, 4], [2, 1, 3, 4], [3, 1, 2, 4]):
        body = payload(review, ranks=ranks)
        assert post(signed_in, "review_save", review, body).status_code == 200
        review.refresh_from_db()
    # Autosave fires often: the trail keeps one REVIEW_SAVED per review per minute.
    saved = AuditEvent.objects.filter(action=AuditEvent.Action.REVIEW_SAVED)
    assert saved.count() == 1
    assert saved.get().person_id == patient.person_id
    search = signed_in.post(
        reverse("record_search", args=[instruction.pk]),
        {"q": "pericardial effusion"},
        content_type="application/json",
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
    factories.put_in_study(bare)  # the admin's step: they join the study's set
    review = open_review(signed_in, bare)
    assert len(review.shown_order) == 2 == len(review.handles)
    assert post(signed_in, "review_submit", review, payload(review)).status_code == 200
    assert ResponseJudgement.objects.filter(review=review).count() == 2


def test_a_refused_save_names_the_account_it_was_refused_to(signed_in, setup):
    # A review page whose browser has since signed in as another account tells "not yours" from
    # "not found" by this header, and says so instead of retrying for ever.
    review = open_review(signed_in, setup[2])
    opened_by = signed_in.get(reverse("clinician_review", args=[setup[2].pk])).context["data"]
    other = setup[4]
    signed_in.force_login(other)
    response = post(signed_in, "review_save", review, payload(review))
    assert response.status_code == 404
    assert response["X-Account"] == page_owner(other) != opened_by["owner"]
    assert not review.judgements.exclude(rank=None).exists()  # nothing saved to either account
