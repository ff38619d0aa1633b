"""A study of two rounds works everywhere a clinician or an admin goes.

A clinician asked the same instruction in two rounds holds two assignments to it: every
record endpoint read the instruction through a join on assignments with no ``.distinct()`` and
answered 500 (``MultipleObjectsReturned``); the admin's progress page listed the clinician twice
under the instruction, both "Not started", with nothing saying which round was which.
"""

import json
import re
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.core import mail
from django.urls import reverse

from review.models import AuditEvent, Event, Review, Role
from review.services import studies as study_services
from review.services.reviews import review_get_or_start, review_reopen
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_rounds():
    dataset = review_data.make_dataset("two-rounds")
    patient = review_data.make_record(dataset, "P-TWO", n_events=40)
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    clinician = factories.make_user("twice@example.edu", roles=[Role.CLINICIAN])
    other = factories.make_user("once@example.edu", roles=[Role.CLINICIAN])
    instructions = [
        review_data.make_instruction(dataset, patient, f"TWO-{i}", n_responses=3) for i in range(2)
    ]
    first_assignments = [review_data.assign(i, clinician) for i in instructions]
    review_data.assign(instructions[0], other)
    first = factories.study_for(dataset)
    second = study_services.study_create(
        dataset=dataset, name="Round 2", actor=admin, copy_responses_from=first
    )
    again = factories.assign(instructions[0], clinician, study=second)
    return dataset, admin, clinician, other, instructions, first, second, first_assignments, again


def _json_data(html: str) -> dict:
    found = re.search(
        r'<script id="review-data" type="application/json">(.*?)</script>', html, re.S
    )
    return json.loads(found.group(1))


def _edits(review: Review) -> list[dict]:
    return [
        e
        for position, handle in enumerate(review.handles)
        for e in (
            {"handle": handle, "field": "rank", "value": position + 1, "at": 1},
            {"handle": handle, "field": "is_correct", "value": True, "at": 1},
        )
    ]


def test_every_clinician_endpoint_answers_for_an_instruction_held_in_two_rounds(client, two_rounds):
    dataset, _, clinician, _, instructions, first, second, firsts, again = two_rounds
    instruction = instructions[0]
    factories.sign_in(client, clinician)
    assert client.get(reverse("clinician_queue")).status_code == 200
    assert client.get(reverse("clinician_next")).status_code == 302
    for study in (first, second):
        url = reverse("clinician_review", args=[instruction.pk]) + f"?study={study.pk}"
        assert client.get(url).status_code == 200, study
    assert client.get(reverse("clinician_review", args=[instruction.pk])).status_code == 200
    # The record endpoints: each read the instruction once per assignment (500 before).
    excerpt = client.get(reverse("record_excerpt", args=[instruction.pk]))
    assert excerpt.status_code == 200, excerpt.content[:200]
    events = client.get(reverse("record_events", args=[instruction.pk]))
    assert events.status_code == 200 and events.json()["count"] > 0
    later = client.get(
        reverse("record_events", args=[instruction.pk]), {"cursor": events.json()["next"]}
    )
    assert later.status_code == 200
    day = client.get(reverse("record_events", args=[instruction.pk]), {"day": "2019-01-08"})
    assert day.status_code == 200
    event = Event.objects.filter(patient=instruction.patient).first()
    one = client.get(reverse("record_event", args=[instruction.pk, event.pk]))
    assert one.status_code == 200
    search = client.post(
        reverse("record_search", args=[instruction.pk]),
        data=json.dumps({"q": "creatinine"}),
        content_type="application/json",
    )
    assert search.status_code == 200 and search.json()["count"] > 0
    # Save and submit each round's review: two reviews, each its own.
    for assignment in (firsts[0], again):
        review = Review.objects.get(assignment=assignment)
        body = {"tab": "t", "edits": _edits(review)}
        saved = client.post(
            reverse("review_save", args=[review.pk]),
            data=json.dumps(body),
            content_type="application/json",
        )
        assert saved.status_code == 200, saved.content
        submitted = client.post(
            reverse("review_submit", args=[review.pk]),
            data=json.dumps(body),
            content_type="application/json",
        )
        assert submitted.status_code == 200, submitted.content
    assert set(
        Review.objects.filter(assignment__clinician=clinician, status="submitted").values_list(
            "assignment__study_id", flat=True
        )
    ) == {first.pk, second.pk}
    # The instruction held once only still answers, and another dataset's record does not.
    assert client.get(reverse("record_excerpt", args=[instructions[1].pk])).status_code == 200
    stranger = review_data.make_instruction(dataset, instruction.patient, "TWO-X")
    assert client.get(reverse("record_excerpt", args=[stranger.pk])).status_code == 404


def test_every_record_endpoint_answers_for_an_admin_clinician_held_in_two_rounds(
    client, two_rounds
):
    # The admin branch reads any instruction: the same join must not duplicate it either.
    dataset, admin, _, _, instructions, first, second, _, _ = two_rounds
    both = factories.make_user("both@example.edu", roles=[Role.ADMIN, Role.CLINICIAN])
    factories.assign(instructions[0], both, study=first)
    factories.assign(instructions[0], both, study=second)
    factories.sign_in(client, both)
    for name in ("record_excerpt", "record_events"):
        assert client.get(reverse(name, args=[instructions[0].pk])).status_code == 200, name


def test_the_reopened_email_links_to_the_round_it_reopened(
    client, two_rounds, django_capture_on_commit_callbacks
):
    # Without ``?study=`` the link opened the latest round: the clinician landed on round 2's
    # review while the admin had reopened round 1's.
    _, admin, clinician, _, instructions, first, _, firsts, _ = two_rounds
    factories.sign_in(client, clinician)
    review = review_get_or_start(assignment=firsts[0])
    client.post(
        reverse("review_submit", args=[review.pk]),
        data=json.dumps({"tab": "t", "edits": _edits(review)}),
        content_type="application/json",
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert review_reopen(review=review, actor=admin, reason="Check the creatinine.")
    body = mail.outbox[-1].body
    link = re.search(r"https?://\S+/instructions/\d+/review/\S*", body).group(0)
    assert link.endswith(f"?study={first.pk}"), link
    page = client.get(urlsplit(link).path, dict(parse_qsl(urlsplit(link).query)))
    assert page.status_code == 200
    assert page.context["review"].pk == review.pk


# --- the admin's progress page ---------------------------------------------------------------
def test_the_progress_page_names_each_rows_round_and_filters_by_round(client, two_rounds):
    dataset, admin, clinician, other, instructions, first, second, _, _ = two_rounds
    factories.sign_in(client, admin)
    url = reverse("progress_dataset", args=[dataset.pk])
    response = client.get(url)
    assert response.status_code == 200
    rows = {r.instruction_id: r for r in response.context["detail"].instructions}
    # One row per (clinician, round), each naming its round: not the same clinician twice,
    # both "Not started", with nothing to tell them apart.
    assert sorted((r.clinician_email, r.round) for r in rows["TWO-0"].reviews) == [
        ("once@example.edu", 1),
        ("twice@example.edu", 1),
        ("twice@example.edu", 2),
    ]
    html = response.content.decode()
    section = html[html.index("#TWO-0") : html.index("#TWO-1")]
    assert section.count('data-testid="review-round"') == 3
    assert "Round 2" in section and "Round 1" in section
    # The round filter: only round 2's reviews, instructions and clinicians' counts.
    response = client.get(url, {"round": 2})
    detail = response.context["detail"]
    # Both instructions are in round 2's (copied) set; only TWO-0 is assigned there.
    assert [r.instruction_id for r in detail.instructions] == ["TWO-0", "TWO-1"]
    assert [(r.clinician_email, r.round) for r in detail.instructions[0].reviews] == [
        ("twice@example.edu", 2)
    ]
    assert detail.instructions[1].reviews == []
    assert [(c.email, c.assigned) for c in detail.clinicians] == [("twice@example.edu", 1)]
    assert 'name="round"' in response.content.decode()
    # Round 1 alone: both clinicians, each once under TWO-0.
    detail = client.get(url, {"round": 1}).context["detail"]
    assert sorted(r.clinician_email for r in detail.instructions[0].reviews) == [
        "once@example.edu",
        "twice@example.edu",
    ]
    assert {c.email: c.assigned for c in detail.clinicians} == {
        "once@example.edu": 1,
        "twice@example.edu": 2,
    }
    # The status filter keeps to the chosen round: round 1's review of TWO-0 is submitted,
    # round 2's is not.
    review = review_get_or_start(assignment=_assignment(first, clinician))
    Review.objects.filter(pk=review.pk).update(status=Review.Status.SUBMITTED)
    submitted = client.get(url, {"round": 1, "status": "submitted"}).context["detail"]
    assert [r.instruction_id for r in submitted.instructions] == ["TWO-0"]
    assert client.get(url, {"round": 2, "status": "submitted"}).context["detail"].instructions == []
    # A round that is not the dataset's shows every round, as no filter does.
    everything = client.get(url, {"round": 9}).context["detail"]
    assert len(everything.instructions) == 2


def _assignment(study, clinician):
    return study.assignments.filter(clinician=clinician).order_by("id").first()


def test_reading_the_progress_page_is_audited_once_per_request(client, two_rounds):
    # The page shows every instruction's question (the record's content, under the DUA):
    # reading it left no trace.
    dataset, admin, *_ = two_rounds
    factories.sign_in(client, admin)
    before = AuditEvent.objects.count()
    client.get(reverse("progress_dataset", args=[dataset.pk]), {"round": 1})
    events = list(AuditEvent.objects.order_by("id")[before:])
    assert len(events) == 1
    event = events[0]
    assert event.actor == admin and event.action == AuditEvent.Action.INSTRUCTION_VIEWED
    assert event.object_type == "Dataset" and event.object_id == str(dataset.pk)
    assert event.details["view"] == "progress"
    assert event.details["instructions"] == ["TWO-0", "TWO-1"]
    assert event.details["round"] == 1
    # Never a question's text in the trail.
    assert "creatinine" not in json.dumps(event.details)
