"""Django's admin of reviews and assignments (review/admin/reviews.py): every review page read
is audited (judgements and comments are about a record), and an assignment changes only through
the services, audited, never once its review is started or submitted."""

import pytest
from django.urls import reverse

from review.models import AuditEvent, Review
from review.services import assignments as assignment_services
from review.services.reviews import review_get_or_start

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


def test_reading_a_review_in_the_django_admin_is_audited(world, client):
    review = review_get_or_start(assignment=world.assignment)
    client.force_login(world.admin)
    assert client.get(reverse("admin:review_review_changelist")).status_code == 200
    assert client.get(reverse("admin:review_review_change", args=[review.pk])).status_code == 200
    views = AuditEvent.objects.filter(action=Action.ADMIN_VIEWED, actor=world.admin)
    assert {e.details["page"] for e in views} == {"list", "object"}
    opened = views.get(details__page="object")
    assert opened.object_type == "Review" and opened.person_id == world.patient.person_id


def test_a_submitted_review_never_moves_to_another_clinician(world, client):
    review = review_get_or_start(assignment=world.assignment)
    Review.objects.filter(pk=review.pk).update(status=Review.Status.SUBMITTED)
    client.force_login(world.admin)
    # Editing the assignment's clinician in the admin is not possible ...
    change = client.post(
        reverse("admin:review_assignment_change", args=[world.assignment.pk]),
        {"instruction": world.instruction.pk, "clinician": world.clinician_other.pk},
    )
    assert change.status_code == 403
    # ... and the reassign action, through the service, refuses a started review.
    client.post(
        reverse("admin:review_assignment_changelist"),
        {
            "action": "reassign",
            "_selected_action": [world.assignment.pk],
            "apply": "1",
            "clinician": world.clinician_other.email,
        },
    )
    world.assignment.refresh_from_db()
    assert world.assignment.clinician == world.clinician
    with pytest.raises(assignment_services.AssignmentError):
        assignment_services.assignment_reassign(
            assignment=world.assignment, clinician=world.clinician_other, actor=world.admin
        )


def test_an_unstarted_assignment_is_reassigned_through_the_service_and_audited(world, client):
    client.force_login(world.admin)
    client.post(
        reverse("admin:review_assignment_changelist"),
        {
            "action": "reassign",
            "_selected_action": [world.assignment.pk],
            "apply": "1",
            "clinician": world.clinician_other.email,
        },
    )
    world.assignment.refresh_from_db()
    assert world.assignment.clinician == world.clinician_other
    event = AuditEvent.objects.get(action=Action.ASSIGNMENT_CHANGED)
    assert event.details == {
        "change": "reassigned",
        "from": world.clinician.email,
        "to": world.clinician_other.email,
    }
