"""The rubric tables refuse what the design forbids, whatever code writes them."""

import pytest
from django.db import IntegrityError, transaction

from review.models import Criterion, Role, Rubric
from tests import factories
from tests.review.review_data import make_dataset, make_instruction, make_record


@pytest.fixture
def instruction(db):
    dataset = make_dataset()
    return make_instruction(dataset, make_record(dataset, "P-1", n_events=20), "I-1")


def test_it_refuses_points_outside_minus_ten_to_ten_and_zero(instruction):
    rubric = Rubric.objects.create(instruction=instruction, version=1)
    for points in (-11, 0, 11):
        with pytest.raises(IntegrityError), transaction.atomic():
            Criterion.objects.create(rubric=rubric, text="x", points=points)
    Criterion.objects.create(rubric=rubric, text="harm", points=-10)
    Criterion.objects.create(rubric=rubric, text="good", points=10)


def test_it_keeps_one_open_version_per_instruction(instruction):
    Rubric.objects.create(instruction=instruction, version=1, status=Rubric.Status.ACCEPTED)
    Rubric.objects.create(instruction=instruction, version=2, status=Rubric.Status.ACCEPTED)
    Rubric.objects.create(instruction=instruction, version=3)
    with pytest.raises(IntegrityError), transaction.atomic():
        Rubric.objects.create(instruction=instruction, version=4, status=Rubric.Status.IN_REVIEW)


def test_it_refuses_the_author_as_reviewer(instruction):
    author = factories.make_user("a@example.edu", roles=[Role.CLINICIAN])
    with pytest.raises(IntegrityError), transaction.atomic():
        Rubric.objects.create(instruction=instruction, version=1, author=author, reviewer=author)
