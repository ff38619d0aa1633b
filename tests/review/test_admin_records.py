"""Django's admin of datasets and records (review/admin/records.py): patient data read-only,
every read of it audited, and no dataset deleted there (``manage.py delete_dataset`` counts and
deletes it instead).

Every page of every model holding patient data is checked in test_admin_reads_audited.py.
"""

import pytest
from django.urls import reverse

from review.models import AuditEvent, Event, ModelResponse
from review.services.reviews import review_get_or_start
from tests.review.review_data import note_url

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


def test_an_admin_reading_an_event_in_the_django_admin_is_audited(world, client):
    client.force_login(world.admin)
    url = note_url(world)  # creates the note
    event = Event.objects.get(patient=world.patient, seq=1)
    assert url
    page = client.get(reverse("admin:review_event_change", args=[event.pk]))
    assert page.status_code == 200
    audit = AuditEvent.objects.get(action=Action.ADMIN_VIEWED, object_type="Event")
    assert audit.actor == world.admin and audit.person_id == world.patient.person_id
    client.get(reverse("admin:review_event_changelist"))
    assert AuditEvent.objects.filter(action=Action.ADMIN_VIEWED, object_type="").exists()


def test_patient_data_is_read_only_in_the_django_admin(world, client):
    client.force_login(world.admin)
    response = ModelResponse.objects.create(
        instruction=world.instruction, model_name="gpt-4", text="Original answer."
    )
    post = client.post(
        reverse("admin:review_modelresponse_change", args=[response.pk]),
        {"text": "Edited answer.", "model_name": "gpt-4", "instruction": world.instruction.pk},
    )
    assert post.status_code == 403
    response.refresh_from_db()
    assert response.text == "Original answer."
    instruction_url = reverse("admin:review_instruction_change", args=[world.instruction.pk])
    assert client.post(instruction_url, {"question": "Changed?"}).status_code == 403
    assert client.get(reverse("admin:review_event_add")).status_code == 403
    page = client.get(reverse("admin:review_modelresponse_change", args=[response.pk]))
    assert page.status_code == 200
    assert AuditEvent.objects.filter(
        action=Action.ADMIN_VIEWED, object_type="ModelResponse", object_id=str(response.pk)
    ).exists()


def test_the_admin_does_not_walk_a_dataset_to_delete_it(
    world, client, django_assert_max_num_queries
):
    review_get_or_start(assignment=world.assignment)
    client.force_login(world.admin)
    delete = reverse("admin:review_dataset_delete", args=[world.dataset.pk])
    with django_assert_max_num_queries(30):
        assert client.get(delete).status_code == 403
    page = client.get(reverse("admin:review_dataset_change", args=[world.dataset.pk]))
    assert (
        b"1 reviews" in page.content
        and b"delete_dataset matrix --yes --with-reviews" in page.content
    )
