"""Every Django admin page of patient data an admin opens is audited (review/admin/audited.py).

The change list and the change form of records, instructions and responses wrote ADMIN_VIEWED;
an object's history page did not, though its title is the object's name (an event's type, code
and time). Each model that holds patient data is checked here on every page Django's admin
serves for one of its objects: the list, the object, its history and its delete confirmation.
"""

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import NoReverseMatch, reverse

from review.admin.audited import AuditedReadsAdmin
from review.models import (
    AuditEvent,
    Criterion,
    CriterionGrading,
    Encounter,
    Event,
    Instruction,
    ModelResponse,
    Patient,
    ReferenceResponse,
    Review,
    Role,
    Rubric,
    SamplingDraw,
    Study,
)
from review.services import grading as grading_services
from review.services.reviews import review_get_or_start
from tests import factories
from tests.review import review_data
from tests.scoring.rubric_data import accepted_rubric, people

pytestmark = pytest.mark.django_db

# Models whose pages show a patient's record, a question about it, answers to it, or a
# clinician's judgement of them.
PATIENT_DATA = [
    Patient,
    Encounter,
    Event,
    Instruction,
    ReferenceResponse,
    ModelResponse,
    Review,
    Rubric,
    CriterionGrading,
    Study,
    SamplingDraw,
]


def test_every_admin_of_patient_data_audits_its_reads():
    for model in PATIENT_DATA:
        model_admin = admin.site._registry.get(model)
        assert model_admin is not None, model
        assert isinstance(model_admin, AuditedReadsAdmin), model
    # Criteria are shown inside their rubric's page (an inline), never on their own.
    assert Criterion not in admin.site._registry


@pytest.fixture
def world(db):
    dataset = review_data.make_dataset()
    patient = review_data.make_record(dataset, "P-ADMIN-READ", n_events=20)
    instruction = review_data.make_instruction(dataset, patient, "I-ADMIN-READ", n_responses=2)
    study = factories.put_in_study(instruction)
    clinician = factories.make_user("reads@example.edu", roles=[Role.CLINICIAN])
    review_get_or_start(assignment=review_data.assign(instruction, clinician))
    author, reviewer = people()
    rubric = accepted_rubric(instruction, author, reviewer)
    grading_services.gradings_assign(rubric=rubric, study=study, clinicians=[clinician], actor=None)
    admin_user = factories.make_user("reader-admin@example.edu", roles=[Role.ADMIN])
    client = Client()
    client.force_login(admin_user)
    return client, patient


def _pages(model, pk) -> dict[str, str]:  # noqa: ANN001
    info = f"admin:{model._meta.app_label}_{model._meta.model_name}"
    pages = {"list": reverse(f"{info}_changelist")}
    for page, name in (
        ("object", "change"),
        ("history", "history"),
        ("delete confirmation", "delete"),
    ):
        try:
            pages[page] = reverse(f"{info}_{name}", args=[pk])
        except NoReverseMatch:
            continue
    return pages


@pytest.mark.parametrize("model", PATIENT_DATA, ids=lambda m: m.__name__)
def test_every_page_of_a_patient_data_object_that_is_shown_is_audited(world, model):
    client, patient = world
    obj = model.objects.order_by("pk").first()
    if obj is None:  # e.g. no adaptive draws in this world
        obj = SamplingDraw.objects.create(
            study=Study.objects.first(),
            instruction=Instruction.objects.first(),
            wave=1,
            probability=0.5,
            draw=0.25,
            drawn=True,
        )
    shown = []
    for page, url in _pages(model, obj.pk).items():
        before = AuditEvent.objects.filter(action=AuditEvent.Action.ADMIN_VIEWED).count()
        response = client.get(url)
        assert response.status_code in (200, 403), (page, response.status_code)
        rows = AuditEvent.objects.filter(action=AuditEvent.Action.ADMIN_VIEWED).order_by("-pk")
        if response.status_code != 200:
            assert rows.count() == before  # nothing was shown
            continue
        shown.append(page)
        assert rows.count() == before + 1, f"{model.__name__} {page} page wrote no audit row"
        row = rows.first()
        assert row.details["model"] == model._meta.label
        assert row.details["page"] == page
        if page != "list":
            assert row.object_id == str(obj.pk)
    assert {"list", "object", "history"} <= set(shown)


def test_an_events_history_page_names_its_patient_in_the_audit(world):
    client, patient = world
    event = Event.objects.filter(patient=patient).first()
    response = client.get(reverse("admin:review_event_history", args=[event.pk]))
    assert response.status_code == 200
    assert str(event) in response.content.decode()  # type, code and time: patient data
    row = AuditEvent.objects.filter(action=AuditEvent.Action.ADMIN_VIEWED).latest("pk")
    assert (row.details["page"], row.person_id) == ("history", patient.person_id)


def _list_audit(client, model, query: str) -> dict:
    url = reverse(f"admin:review_{model._meta.model_name}_changelist") + "?" + query
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return AuditEvent.objects.filter(action=AuditEvent.Action.ADMIN_VIEWED).latest("pk").details


def test_an_admin_search_is_audited_by_its_length_not_its_words(world):
    # A search term can quote a patient's record; the audit log is exported (/manage/audit.csv).
    # The clinicians' record search stores only its length, and so does the admin's.
    client, _ = world
    details = _list_audit(client, Event, "q=hemoglobin")
    assert "hemoglobin" not in str(details)
    assert details["search_length"] == len("hemoglobin")


def test_filters_from_a_fixed_vocabulary_are_kept_and_free_text_ones_are_lengths(world):
    client, _ = world
    details = _list_audit(client, Review, "status__exact=submitted&o=2.-1&p=0&q=renal+failure")
    assert details["query"] == "status__exact=submitted&o=2.-1&p=0"
    assert details["search_length"] == len("renal failure")
    # An event's type comes from the imported record: its value is not kept, only its length.
    details = _list_audit(client, Event, "event_type__exact=hemoglobin-note")
    assert "hemoglobin" not in str(details)
    assert details["withheld"] == {"event_type__exact": len("hemoglobin-note")}
