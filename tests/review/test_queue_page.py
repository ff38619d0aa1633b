"""The clinician's queue and the reopened notice: a "Reopened" status to filter by, counted
apart from the reviews in progress, and the admin's reason quoted without a doubled full stop."""

import re

import pytest
from django.urls import reverse

from review.models import Review, Role
from review.services.reviews import review_get_or_start, review_reopen
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue_world(db):
    dataset = review_data.make_dataset("queue")
    patient = review_data.make_record(dataset, "P-QUEUE-1", n_events=10)
    instructions = [
        review_data.make_instruction(
            dataset, patient, f"I-QUEUE-{i}", question=f"Question number {i}?", n_responses=2
        )
        for i in range(3)
    ]
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    assignments = [review_data.assign(i, clinician) for i in instructions]
    reopened = review_get_or_start(assignment=assignments[0])
    Review.objects.filter(pk=reopened.pk).update(status=Review.Status.SUBMITTED)
    review_reopen(review=reopened, actor=admin, reason="Please rank B again.")
    submitted = review_get_or_start(assignment=assignments[1])
    Review.objects.filter(pk=submitted.pk).update(status=Review.Status.SUBMITTED)
    return instructions, clinician


def _main(response) -> str:
    return response.content.decode().split("<main", 1)[1].split("</main>", 1)[0]


def test_the_queue_filters_reopened_reviews(queue_world, client):
    instructions, clinician = queue_world
    factories.sign_in(client, clinician)
    page = _main(client.get(reverse("clinician_queue")))
    assert re.search(r'<option value="reopened"[^>]*>Reopened</option>', page)
    assert "1 reopened" in page
    filtered = _main(client.get(reverse("clinician_queue") + "?status=reopened"))
    assert "Question number 0?" in filtered
    assert "Question number 1?" not in filtered and "Question number 2?" not in filtered
    assert re.search(r'<option value="reopened" selected>', filtered)
    in_progress = _main(client.get(reverse("clinician_queue") + "?status=draft"))
    assert "Question number 0?" not in in_progress  # reopened is its own status now


def test_the_reopened_notice_quotes_the_reason_with_one_full_stop(queue_world, client):
    instructions, clinician = queue_world
    factories.sign_in(client, clinician)
    page = _main(client.get(reverse("clinician_review", args=[instructions[0].pk])))
    notice = page.split('data-testid="reopened"', 1)[1].split("</div>", 1)[0]
    assert "“Please rank B again.”" in notice
    assert ".”." not in notice and ".." not in notice
