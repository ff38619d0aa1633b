"""An admin's reason for reopening a review reaches the clinician: what it says of a model is
masked there (against the dataset's names), and the admin is warned when it names one, as
round names are. The admin and the audit log keep the reason as typed."""

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from review.blinding import MASK
from review.models import ModelResponse, Review, Role
from review.selectors.datasets import dataset_model_names_forget
from tests import factories
from tests.review import review_data
from tests.review.test_progress import submit

pytestmark = pytest.mark.django_db

REASON = "the Atlas-70B answer (the GPT-4 one, Response D) is right"


@pytest.fixture
def reopened(db, client):
    dataset = review_data.make_dataset("reopen-blind")
    patient = review_data.make_record(dataset, "P-RB-1", n_events=5)
    instruction = review_data.make_instruction(dataset, patient, "I-RB-1", n_responses=2)
    ModelResponse.objects.create(instruction=instruction, model_name="Atlas-70B", text="Rest.")
    dataset_model_names_forget()
    clinician = factories.make_user("rb@example.edu", roles=[Role.CLINICIAN])
    admin = factories.make_user("rb-admin@example.edu", roles=[Role.ADMIN])
    assignment = review_data.assign(instruction, clinician)
    review = submit(client, clinician, assignment)
    client.force_login(admin)
    response = client.post(reverse("admin_review_reopen", args=[review.pk]), {"reason": REASON})
    review.refresh_from_db()
    assert review.status == Review.Status.REOPENED and review.reopen_reason == REASON
    yield response, review, clinician, instruction
    dataset_model_names_forget()


def test_the_admin_is_warned_that_the_reason_names_a_model(reopened, client):
    response, *_ = reopened
    messages = [str(m) for m in get_messages(response.wsgi_request)]
    warning = next(m for m in messages if "names a model" in m)
    assert "Atlas-70B" in warning and "GPT-4" in warning
    assert "masked" in warning


def test_the_clinician_reads_the_reason_masked_in_the_queue(reopened):
    _, _, clinician, _ = reopened
    client = Client()  # the clinician's own browser, not the admin's
    client.force_login(clinician)
    html = client.get(reverse("clinician_queue")).content.decode()
    assert 'data-testid="reopen-reason"' in html
    assert "Atlas" not in html and "GPT-4" not in html
    assert MASK in html and "Response D) is right" in html


def test_the_clinician_reads_the_reason_masked_on_the_review_page(reopened):
    _, _, clinician, instruction = reopened
    client = Client()
    factories.sign_in(client, clinician)
    html = client.get(reverse("clinician_review", args=[instruction.pk])).content.decode()
    assert 'data-testid="reopened"' in html
    assert "Atlas" not in html and "GPT-4" not in html
    assert "Response D) is right" in html


def test_a_reason_naming_no_model_brings_no_warning(db, client):
    dataset = review_data.make_dataset("reopen-plain")
    patient = review_data.make_record(dataset, "P-RB-2", n_events=5)
    instruction = review_data.make_instruction(dataset, patient, "I-RB-2", n_responses=2)
    clinician = factories.make_user("rb2@example.edu", roles=[Role.CLINICIAN])
    admin = factories.make_user("rb2-admin@example.edu", roles=[Role.ADMIN])
    review = submit(client, clinician, review_data.assign(instruction, clinician))
    client.force_login(admin)
    response = client.post(
        reverse("admin_review_reopen", args=[review.pk]), {"reason": "Check the potassium."}
    )
    assert not any("names a model" in str(m) for m in get_messages(response.wsgi_request))
