"""The admin flow around reviews: progress pages per dataset, reopening with a reason (audited,
shown to the clinician), `/queue/next/` with nothing assigned, and overlap that ignores the demo's
simulated clinicians."""

import json

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from review.demo.reviews import simulated_email
from review.models import Assignment, AuditEvent, Review, Role, User
from review.selectors.assignments import clinicians_approved
from review.selectors.progress import dataset_progress_detail
from review.services.assignments import assignments_plan
from review.services.reviews import InvalidReview, review_get_or_start, review_reopen
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


def submit(client, clinician: User, assignment: Assignment) -> Review:
    review = review_get_or_start(assignment=assignment)
    body = {
        "tab": "t",
        "edits": [
            e
            for position, handle in enumerate(review.handles)
            for e in (
                {"handle": handle, "field": "rank", "value": position + 1, "at": 1},
                {"handle": handle, "field": "is_correct", "value": True, "at": 1},
            )
        ],
    }
    client.force_login(clinician)
    response = client.post(
        reverse("review_submit", args=[review.pk]),
        data=json.dumps(body),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    review.refresh_from_db()
    return review


@pytest.fixture
def setup(db):
    dataset = review_data.make_dataset("progress")
    patient = review_data.make_record(dataset, "P-PROG-1", n_events=20)
    instructions = [
        review_data.make_instruction(dataset, patient, f"I-PROG-{i}", n_responses=2)
        for i in range(3)
    ]
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN], full_name="Cl In")
    other = factories.make_user("other@example.edu", roles=[Role.CLINICIAN])
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    assignments = [review_data.assign(i, clinician) for i in instructions]
    review_data.assign(instructions[0], other)
    return dataset, instructions, clinician, other, admin, assignments


# --- /queue/next/ ---------------------------------------------------------------------------------
def test_next_with_nothing_assigned_says_nothing_is_assigned(client):
    clinician = factories.make_user("new@example.edu", roles=[Role.CLINICIAN])
    client.force_login(clinician)
    response = client.get(reverse("clinician_next"), follow=True)
    texts = [str(m) for m in get_messages(response.wsgi_request)] + [response.content.decode()]
    assert any("Nothing is assigned to you yet" in t for t in texts)
    assert not any("every assignment is submitted" in t for t in texts)


def test_next_with_everything_submitted_says_everything_is_submitted(client, setup):
    _, _, clinician, _, _, assignments = setup
    for a in assignments:
        submit(client, clinician, a)
    response = client.get(reverse("clinician_next"), follow=True)
    assert "every assignment is submitted" in response.content.decode()
    assert "Nothing is assigned to you yet" not in response.content.decode()


# --- reopening ------------------------------------------------------------------------------------
def test_reopening_needs_a_reason(setup, client):
    _, _, clinician, _, admin, assignments = setup
    review = submit(client, clinician, assignments[0])
    with pytest.raises(InvalidReview):
        review_reopen(review=review, actor=admin, reason="   ")
    review.refresh_from_db()
    assert review.status == Review.Status.SUBMITTED


def test_an_admin_reopens_with_a_reason_the_clinician_reads_in_the_queue(setup, client):
    dataset, _, clinician, _, admin, assignments = setup
    review = submit(client, clinician, assignments[1])
    client.force_login(admin)
    page = reverse("progress_dataset", args=[dataset.pk])
    response = client.post(
        reverse("admin_review_reopen", args=[review.pk]),
        {"reason": "Please check the potassium trend again.", "next": page + "?status=submitted"},
    )
    assert response.status_code == 302 and response["Location"] == page + "?status=submitted"
    review.refresh_from_db()
    assert review.status == Review.Status.REOPENED
    assert review.reopened_by == admin and review.reopened_at is not None
    assert review.reopen_reason == "Please check the potassium trend again."
    event = AuditEvent.objects.get(action=AuditEvent.Action.REVIEW_REOPENED)
    assert event.actor == admin and event.object_id == str(review.pk)
    assert event.details["reason"] == "Please check the potassium trend again."

    client.force_login(clinician)
    queue = client.get(reverse("clinician_queue"))
    items = {i.assignment_id: i for i in queue.context["queue"].items}
    assert items[assignments[1].pk].reopen_reason == "Please check the potassium trend again."
    assert items[assignments[0].pk].reopen_reason == ""
    assert b'data-testid="reopen-reason"' in queue.content
    assert b"Please check the potassium trend again." in queue.content


def test_the_reopen_view_refuses_an_empty_reason_and_an_offsite_next(setup, client):
    dataset, _, clinician, _, admin, assignments = setup
    review = submit(client, clinician, assignments[0])
    client.force_login(admin)
    response = client.post(
        reverse("admin_review_reopen", args=[review.pk]),
        {"reason": "", "next": "https://evil.example/"},
    )
    assert response["Location"] == reverse("progress_dataset", args=[dataset.pk])
    review.refresh_from_db()
    assert review.status == Review.Status.SUBMITTED
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.REVIEW_REOPENED).exists()


def test_clinicians_cannot_reopen(setup, client):
    _, _, clinician, _, _, assignments = setup
    review = submit(client, clinician, assignments[0])
    response = client.post(
        reverse("admin_review_reopen", args=[review.pk]), {"reason": "I changed my mind."}
    )
    assert response.status_code == 403  # not available to their role
    review.refresh_from_db()
    assert review.status == Review.Status.SUBMITTED


# --- progress pages ---------------------------------------------------------------------------------
def test_the_progress_page_shows_each_clinicians_progress_and_each_instructions_reviews(
    setup, client
):
    dataset, instructions, clinician, other, admin, assignments = setup
    submit(client, clinician, assignments[0])
    opened = review_get_or_start(assignment=assignments[1])  # opened, nothing edited yet
    client.force_login(admin)
    # Opening is not work (as the clinician's queue says): the walk-through found 42 reviews a
    # clinician had only looked at counted "in progress" here while their queue said 1.
    detail = client.get(reverse("progress_dataset", args=[dataset.pk])).context["detail"]
    by_email = {c.email: c for c in detail.clinicians}
    assert (by_email["clin@example.edu"].in_progress, by_email["clin@example.edu"].not_started) == (
        0,
        2,
    )
    rows = {r.instruction_id: r for r in detail.instructions}
    assert [r.status for r in rows["I-PROG-1"].reviews] == ["new"]
    assert [
        r.instruction_id for r in dataset_progress_detail(dataset, status="draft").instructions
    ] == []
    Review.objects.filter(pk=opened.pk).update(edited_at=timezone.now())  # what a save records
    response = client.get(reverse("progress_dataset", args=[dataset.pk]))
    assert response.status_code == 200
    detail = response.context["detail"]
    by_email = {c.email: c for c in detail.clinicians}
    assert (by_email["clin@example.edu"].assigned, by_email["clin@example.edu"].submitted) == (3, 1)
    assert by_email["clin@example.edu"].in_progress == 1
    assert by_email["clin@example.edu"].not_started == 1
    assert [
        r.instruction_id for r in dataset_progress_detail(dataset, status="draft").instructions
    ] == ["I-PROG-1"]
    assert (by_email["other@example.edu"].assigned, by_email["other@example.edu"].submitted) == (
        1,
        0,
    )
    rows = {r.instruction_id: r for r in detail.instructions}
    assert [(r.clinician_email, r.status) for r in rows["I-PROG-0"].reviews] == [
        ("clin@example.edu", "submitted"),
        ("other@example.edu", "new"),
    ]
    # Only the submitted review offers a reopen form.
    assert response.content.count(b'data-testid="reopen-form"') == 1
    index = client.get(reverse("progress_index"))
    assert reverse("progress_dataset", args=[dataset.pk]).encode() in index.content
    # Linked from the admin navigation.
    assert reverse("progress_index").encode() in client.get(reverse("admin_assign")).content


def test_the_status_filter_keeps_instructions_with_a_review_in_that_state(setup, client):
    dataset, _, clinician, _, _, assignments = setup
    submit(client, clinician, assignments[2])
    detail = dataset_progress_detail(dataset, status="submitted")
    assert [r.instruction_id for r in detail.instructions] == ["I-PROG-2"]
    detail = dataset_progress_detail(dataset, status="new")
    assert [r.instruction_id for r in detail.instructions] == ["I-PROG-0", "I-PROG-1"]


def _count_queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_the_progress_page_runs_a_fixed_number_of_queries(setup, client, django_assert_num_queries):
    dataset, instructions, clinician, other, admin, assignments = setup
    submit(client, clinician, assignments[0])
    client.force_login(admin)
    url = reverse("progress_dataset", args=[dataset.pk])
    client.get(url)  # warm the per-user access cache
    # clinicians, instruction count, instruction page, their assignments and reviews
    with django_assert_num_queries(4):
        dataset_progress_detail(dataset)
    before = _count_queries(client, url)
    # Ten more instructions, each with two reviewers, some submitted: not one query more.
    patient = instructions[0].patient
    for i in range(10):
        extra = review_data.make_instruction(dataset, patient, f"I-PROG-X{i}", n_responses=2)
        review_data.assign(extra, other)
        a = review_data.assign(extra, clinician)
        if i % 2:
            submit(client, clinician, a)
    client.force_login(admin)
    client.get(url)  # the new session warms its access cache again
    assert _count_queries(client, url) == before


# --- assignment overlap and simulated clinicians -------------------------------------------------
def _simulated(n: int) -> User:
    user = factories.make_user(simulated_email(n), roles=[Role.CLINICIAN], totp=False)
    user.is_simulated = True
    user.save(update_fields=["is_simulated"])
    return user


def test_overlap_counts_ignore_simulated_clinicians(setup):
    dataset, instructions, clinician, other, admin, _ = setup
    simulated = [_simulated(n) for n in (1, 2)]
    fresh = review_data.make_instruction(dataset, instructions[0].patient, "I-PROG-NEW")
    for s in simulated:
        review_data.assign(fresh, s)
    real = factories.make_user("real@example.edu", roles=[Role.CLINICIAN])
    plan = assignments_plan(instructions=[fresh], clinicians=[real, other, *simulated], overlap=2)
    # The two simulated reviews do not fill the overlap; real clinicians get the work.
    assert plan.already_full == 0
    assert sorted(c for _, c in plan.pairs) == sorted([real.pk, other.pk])


def test_simulated_clinicians_are_not_offered_for_assignment(setup):
    _simulated(1)
    emails = [u.email for u in clinicians_approved()]
    assert simulated_email(1) not in emails and "clin@example.edu" in emails
