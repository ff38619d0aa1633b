"""Text PostgreSQL cannot store is refused where it arrives, per edit, and no other edit is lost.

PostgreSQL refuses a NUL character in text and in jsonb, and a lone surrogate has no UTF-8 form;
SQLite stores both. A NUL or a lone surrogate in a comment, a cannot-assess note or the tab id
made autosave and submit answer 500 on PostgreSQL, refused the good edits of the same batch
with it, and the page retried for ever. Now the edit is answered 400 naming ``edits[i]`` and the
rest of its batch is stored; the same text is refused, by name, on every other page that takes
free text. Run on PostgreSQL (DATABASE_URL) for the bug itself; on SQLite the same answers hold.
"""

import json
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from review.models import AccessApplication, Review, Role, Rubric
from review.services.reviews import review_get_or_start
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db

NUL = "before\x00after"
SURROGATE = "before\ud800after"  # json.dumps writes it as the escape "\ud800", as browsers do


@pytest.fixture
def world(db):
    dataset = review_data.make_dataset()
    patient = review_data.make_record(dataset, "P-NUL", n_events=20)
    instruction = review_data.make_instruction(dataset, patient, "I-NUL")
    clinician = factories.make_user("nul@example.edu", roles=[Role.CLINICIAN])
    review = review_get_or_start(assignment=review_data.assign(instruction, clinician))
    client = Client()
    client.force_login(clinician)
    return {"client": client, "review": review, "clinician": clinician, "instruction": instruction}


def _edit(handle, field, value):  # noqa: ANN001, ANN202
    edit = {"field": field, "value": value, "at": int(time.time() * 1000)}
    if handle:
        edit["handle"] = handle
    return edit


def _post(client: Client, name: str, review: Review, body: dict):  # noqa: ANN202
    return client.post(
        reverse(name, args=[review.pk]),
        json.dumps(body),  # ensure_ascii: a lone surrogate travels as its escape
        content_type="application/json",
        HTTP_ACCEPT="application/json",
    )


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "lone-surrogate"])
def test_an_unstorable_comment_is_refused_by_name_and_the_rest_of_the_batch_is_stored(world, bad):
    review = world["review"]
    a, b = review.handles[:2]
    edits = [
        _edit(a, "rank", 1),
        _edit(a, "comment", bad),
        _edit(b, "is_correct", False),
        _edit("", "cannot_assess_note", bad),
        _edit(b, "comment", "Misses the potassium."),
    ]
    response = _post(world["client"], "review_save", review, {"edits": edits, "tab": "t1"})
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "edits[1]"
    assert body["refused"] == ["edits[1]", "edits[3]"]
    assert "cannot be stored" in body["message"]
    review.refresh_from_db()
    stored = {key: pair[0] for key, pair in review.draft["fields"].items()}
    assert stored == {
        f"{a}.rank": 1,
        f"{b}.is_correct": False,
        f"{b}.comment": "Misses the potassium.",
    }
    assert body["state"]["draft"] == stored  # what the page can take as saved


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "lone-surrogate"])
def test_an_unstorable_comment_at_submit_is_refused_and_nothing_is_submitted(world, bad):
    review = world["review"]
    edits = [_edit(h, "rank", i + 1) for i, h in enumerate(review.handles)]
    edits += [_edit(h, "is_correct", True) for h in review.handles]
    edits.append(_edit(review.handles[0], "comment", bad))
    response = _post(world["client"], "review_submit", review, {"edits": edits, "tab": "t1"})
    assert response.status_code == 400
    assert response.json()["field"] == f"edits[{len(edits) - 1}]"
    review.refresh_from_db()
    assert review.status == Review.Status.DRAFT
    assert len(review.draft["fields"]) == len(edits) - 1  # the good edits are kept as a draft
    again = _post(world["client"], "review_submit", review, {"edits": edits[:-1], "tab": "t1"})
    assert again.status_code == 200 and again.json()["status"] == "submitted"


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize("endpoint", ["review_save", "review_submit"])
def test_an_unstorable_tab_id_is_refused_by_name(world, bad, endpoint):
    review = world["review"]
    before = review.version
    body = {"edits": [_edit(review.handles[0], "rank", 1)], "tab": bad, "seq": 1}
    response = _post(world["client"], endpoint, review, body)
    assert response.status_code == 400
    assert response.json()["field"] == "tab"
    review.refresh_from_db()
    assert review.version == before


def _accepted_rubric(instruction):  # noqa: ANN001, ANN202
    from review.services import rubrics as rubric_services

    author = factories.make_user("author-nul@example.edu", roles=[Role.CLINICIAN])
    reviewer = factories.make_user("reviewer-nul@example.edu", roles=[Role.CLINICIAN])
    rubric = rubric_services.rubric_assign(
        instruction=instruction, author=author, reviewer=reviewer, actor=None
    )
    rubric_services.rubric_save_criteria(
        rubric=rubric,
        actor=author,
        criteria=[rubric_services.CriterionInput("Names the potassium.", 5)],
    )
    rubric_services.rubric_submit(rubric=rubric, actor=author)
    return rubric, reviewer


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "lone-surrogate"])
def test_an_unstorable_grading_tab_id_is_refused_by_name(world, bad):
    from review.services import grading as grading_services
    from review.services import rubrics as rubric_services

    instruction = world["instruction"]
    rubric, reviewer = _accepted_rubric(instruction)
    rubric = rubric_services.rubric_accept(rubric=rubric, actor=reviewer)
    study = world["review"].assignment.study
    (grading,) = grading_services.gradings_assign(
        rubric=rubric, study=study, clinicians=[world["clinician"]], actor=None
    )
    grading = grading_services.grading_get_or_start(grading)
    response = world["client"].post(
        reverse("grading_save", args=[grading.pk]),
        json.dumps({"edits": [], "tab": bad, "seq": 1, "active_seconds": 1}),
        content_type="application/json",
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "tab"


# --- every other page that takes free text ----------------------------------------------------------
def test_the_application_form_names_a_nul_in_any_field(db):
    factories.active_dua()
    user = factories.make_user("apply-nul@example.edu", full_name="Nul Applicant")
    client = Client()
    client.force_login(user)
    data = {
        "full_name": "Nul\x00Applicant",
        "institution": "Example\x00Hospital",
        "institutional_email": "nul@hospital.example.org",
        "requested_role": "clinician",
        "specialty": "Internal\x00Medicine",
        "research_use": "Reviewing\x00answers.",
        "certificate": SimpleUploadedFile("c.pdf", factories.PDF_BYTES),
        "certificate_completed_on": "2025-01-01",
        "certificate_expires_on": "2030-01-01",
        "storage_attestation": "on",
        "typed_name": "Nul\x00Applicant",
    }
    response = client.post(reverse("application_apply"), data)
    assert response.status_code == 200
    errors = response.context["form"].errors
    for field in ("full_name", "institution", "research_use", "typed_name"):
        assert "Null characters are not allowed." in errors[field], field
    assert not AccessApplication.objects.filter(user=user).exists()


def test_a_reviewers_note_with_a_nul_is_refused_by_name(world):
    rubric, reviewer = _accepted_rubric(world["instruction"])
    client = Client()
    client.force_login(reviewer)
    response = client.post(
        reverse("rubric_review", args=[rubric.pk]),
        {"action": "send_back", "note": "Add\x00the dose."},
        follow=True,
    )
    assert response.status_code == 200
    assert "the note holds a character that cannot be stored" in response.content.decode()
    rubric.refresh_from_db()
    assert rubric.status == Rubric.Status.IN_REVIEW


def test_an_admins_reason_with_a_nul_is_refused_by_name(db):
    admin = factories.make_user("reason-admin@example.edu", roles=[Role.ADMIN])
    applicant = factories.make_user("reason-applicant@example.edu")
    application = factories.make_application(applicant)
    client = Client()
    client.force_login(admin)
    response = client.post(
        reverse("admin_application_detail", args=[application.pk]),
        {"decision": "reject", "reason": "Not\x00eligible."},
    )
    assert response.status_code == 200  # the form again, with the reason named
    assert "Null characters are not allowed." in response.content.decode()
    application.refresh_from_db()
    assert application.status == AccessApplication.Status.PENDING


def test_a_nul_in_a_django_admin_search_is_refused_not_a_server_error(db):
    admin = factories.make_user("search-admin@example.edu", roles=[Role.ADMIN])
    client = Client()
    client.force_login(admin)
    for name in ("review_event", "review_instruction", "review_auditevent"):
        response = client.get(reverse(f"admin:{name}_changelist"), {"q": "chest\x00pain"})
        assert response.status_code == 200, name


# --- imports: named by file, row and column, nothing stored ----------------------------------
def test_a_nul_in_a_meds_text_value_is_named_not_a_database_error(tmp_path):
    from tests.review.test_meds_importer import COHORT, refused, table, write_meds

    rows = [list(r) for r in COHORT]
    rows[7][4] = "IMPRESSION: no PE.\x00"  # the radiology report, row 8
    message = refused(write_meds(tmp_path, {"0.parquet": table([tuple(r) for r in rows])}))
    assert (
        "data/0.parquet, row 8, field 'text_value': holds a NUL character, which the database "
        "cannot store"
    ) in message


def test_a_nul_in_an_omop_note_is_named_not_a_database_error(tmp_path):
    from tests.review.test_omop_importer import NOTES, refused, write_omop

    header, [row] = NOTES
    row = [*row[:-1], "FINDINGS: clear.\x00"]
    message = refused(write_omop(tmp_path, note=(header, [row])))
    assert "note.csv, row 1, field 'note_text': holds a NUL character" in message
