"""The rubric pages: an author writes with the instruction, the record and the reference at
hand; a second clinician edits and accepts or sends back; admins assign, import and export."""

from pathlib import Path

import pytest
from django.urls import reverse

from review.models import AuditEvent, Role, Rubric
from review.services import rubrics as services
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db
SAMPLE = Path(__file__).parent / "data" / "healthbench_rubrics.jsonl"


@pytest.fixture
def setup(db):
    dataset = review_data.make_dataset()  # blind review: references hidden from rankers
    patient = review_data.make_record(dataset, "P-RUB", n_events=40)
    instruction = review_data.make_instruction(dataset, patient, "I-1")
    author = factories.make_user("author@example.edu", roles=[Role.CLINICIAN])
    reviewer = factories.make_user("reviewer@example.edu", roles=[Role.CLINICIAN])
    rubric = services.rubric_assign(
        instruction=instruction, author=author, reviewer=reviewer, actor=None
    )
    return instruction, author, reviewer, rubric


ROWS = {
    "text": ["States the latest creatinine.", "Invents a value.", ""],
    "points": ["7", "-8", ""],
    "tags": ["axis:accuracy, theme:labs", "axis:accuracy", ""],
}


def test_the_author_writes_with_the_record_and_reference_at_hand(setup, client):
    instruction, author, _, rubric = setup
    factories.sign_in(client, author)
    page = client.get(reverse("rubric_write", args=[rubric.pk]))
    html = page.content.decode()
    assert instruction.question in html
    assert "REFERENCE: creatinine 1.2 mg/dL." in html
    assert 'data-testid="record-excerpt"' in html
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.RECORD_VIEWED, object_type="Rubric"
    ).exists()
    response = client.post(reverse("rubric_write", args=[rubric.pk]), ROWS | {"action": "submit"})
    assert response.status_code == 302
    rubric.refresh_from_db()
    assert rubric.status == Rubric.Status.IN_REVIEW
    assert list(rubric.criteria.values_list("points", "tags")) == [
        (7, ["axis:accuracy", "theme:labs"]),
        (-8, ["axis:accuracy"]),
    ]


def test_a_refused_row_saves_nothing_and_says_why(setup, client):
    _, author, _, rubric = setup
    factories.sign_in(client, author)
    bad = ROWS | {"points": ["7", "0", ""]}
    response = client.post(
        reverse("rubric_write", args=[rubric.pk]), bad | {"action": "submit"}, follow=True
    )
    assert "criterion 2: points must be" in response.content.decode()
    rubric.refresh_from_db()
    assert rubric.status == Rubric.Status.DRAFT and not rubric.criteria.exists()


def test_the_second_clinician_edits_and_accepts_or_sends_back(setup, client):
    _, author, reviewer, rubric = setup
    services.rubric_save_criteria(
        rubric=rubric, actor=author, criteria=[services.CriterionInput("Good.", 5, ())]
    )
    services.rubric_submit(rubric=rubric, actor=author)
    factories.sign_in(client, author)
    assert client.get(reverse("rubric_review", args=[rubric.pk])).status_code == 404
    factories.sign_in(client, reviewer)
    url = reverse("rubric_review", args=[rubric.pk])
    response = client.post(url, {"action": "send_back", "note": ""}, follow=True)
    assert "say what the author should change" in response.content.decode()
    client.post(url, ROWS | {"edited": "1", "action": "accept", "note": ""})
    rubric.refresh_from_db()
    assert rubric.status == Rubric.Status.ACCEPTED and rubric.reviewer_edited
    assert rubric.criteria.count() == 2


def test_admins_assign_import_and_export(setup, client):
    instruction, author, reviewer, rubric = setup
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    factories.sign_in(client, admin)
    url = reverse("admin_rubrics", args=[instruction.dataset_id])
    assert client.get(url).status_code == 200
    review_data.make_instruction(instruction.dataset, instruction.patient, "I-2")
    with SAMPLE.open("rb") as handle:
        response = client.post(url, {"action": "upload", "file": handle}, follow=True)
    # I-1 already has a version open (being written); I-2's arrives in review.
    assert "Imported 1 rubric(s), in review; skipped 1." in response.content.decode()
    imported = Rubric.objects.get(instruction__instruction_id="I-2")
    assert imported.status == Rubric.Status.IN_REVIEW
    client.post(url, {"action": "reviewer", "rubric": imported.pk, "reviewer": reviewer.pk})
    imported.refresh_from_db()
    assert imported.reviewer == reviewer
    services.rubric_accept(rubric=imported, actor=reviewer)
    export = client.get(reverse("admin_rubrics_export", args=[instruction.dataset_id]))
    body = b"".join(export.streaming_content).decode()
    assert body.count("\n") == 1 and '"prompt_id": "I-2"' in body


def test_the_django_admin_shows_rubrics_read_only_and_audits_the_view(setup, client):
    _, _, _, rubric = setup
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    factories.sign_in(client, admin)
    page = client.get(reverse("admin:review_rubric_change", args=[rubric.pk]))
    assert page.status_code == 200
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.ADMIN_VIEWED, object_type="Rubric"
    ).exists()
    response = client.post(reverse("admin:review_rubric_change", args=[rubric.pk]), {})
    assert response.status_code == 403


def test_rubric_work_opens_the_record_to_its_clinicians_only(setup, client):
    instruction, author, reviewer, _ = setup
    url = reverse("record_events", args=[instruction.pk])
    for user, status in ((author, 200), (reviewer, 200)):
        factories.sign_in(client, user)
        assert client.get(url, headers={"Accept": "application/json"}).status_code == status
    stranger = factories.make_user("stranger@example.edu", roles=[Role.CLINICIAN])
    factories.sign_in(client, stranger)
    assert client.get(url, headers={"Accept": "application/json"}).status_code == 404
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.RECORD_VIEWED, actor=reviewer, details__view="timeline"
    ).exists()
