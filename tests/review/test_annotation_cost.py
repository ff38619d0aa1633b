"""What one clinician annotation costs the server: statements per request on the annotation
path, pinned lower than before, and the record excerpt prepared before anyone opens the page,
so no page view ranks or renders it.

A closed-loop annotation is: open the review page (the excerpt inline), save the completed
annotation once, submit. Counts are pinned with the shared cache on Redis or on the database;
see ``_CACHE_READS``.
"""

import json
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import RequestFactory
from django.test.signals import template_rendered
from django.urls import reverse

from review.demo.release import DemoSpec, write_release
from review.models import AuditEvent, Instruction, RecordExcerpt, Review, Role, StudyResponse
from review.selectors import records
from review.selectors.datasets import dataset_model_names, dataset_model_names_forget
from review.selectors.reviews import error_tags
from review.services.excerpts import record_excerpts_prepare
from review.services.imports import dataset_import
from review.services.reviews import review_open
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db

_CACHE_READS = 2 if settings.CACHES["default"]["BACKEND"].endswith("DatabaseCache") else 0
# First open: session, then the user with their access (one shared-cache entry: no user row
# read, review.auth_backends), the assignment with its review (none yet), the instruction's
# responses (their ids give the order; their text the cards), the review's INSERT carrying its
# order and handles (in a savepoint here because the test runs inside a transaction; a request in
# autocommit sends the INSERT alone), the stored excerpt's HTML, one audit INSERT for both events.
# Before: 9, with the user row read on every request and the responses read twice; 15 before
# that, with the review INSERTed, then UPDATEd with its order, six empty judgement rows INSERTed
# (two transactions), the error tags read and the excerpt rendered on every view.
# On PostgreSQL the start is one statement: the study locked FOR SHARE, its response set read
# again under the lock and compared with the one the order was drawn from (so a set being
# changed, ``study_add_responses``, cannot slip between the read and the INSERT), the review
# INSERTed and the two audit rows with it (review.services.reviews.review_open); in a savepoint
# pair here, alone in a request's autocommit. Before: 8, the lock and the INSERT two statements
# in a transaction, the audit rows another after it. SQLite serialises writers, so the first
# read stands.
FIRST_OPEN_QUERIES = (6 if connection.vendor == "postgresql" else 7) + _CACHE_READS
# Later opens: assignment with review, responses, excerpt, audit; once the review has been saved,
# its judgement rows (and their tags, when there are rows) too. Before: 5, and 9 before that.
REOPEN_QUERIES = 4 + _CACHE_READS
# Both counts are a process's warm ones: like the error tags, the dataset's model names (what
# every response is masked against) are read by each process once per dataset and again at
# most every half minute (review.selectors.datasets): one SELECT DISTINCT more on those views.
MODEL_NAMES_READ = 1
# Submit: the review read (no lock: the write takes effect only on the version read), then on
# PostgreSQL one statement that UPDATEs the review and INSERTs its rows (their error tags too,
# when there are any) and the audit row; elsewhere those three in a savepoint pair. Before: 6
# on PostgreSQL, the review locked and the three statements in a savepoint pair; 7 with an empty
# read of judgement rows; 8 with the user row; 12 before that, the review read twice, the tags
# read, the rows UPDATEd with a CASE per field and row, and their tag links DELETEd.
SUBMIT_QUERIES = (2 if connection.vendor == "postgresql" else 6) + _CACHE_READS


@pytest.fixture
def setup(db):
    dataset = review_data.make_dataset()
    patient = review_data.make_record(dataset, "P-COST", n_events=300)
    instruction = review_data.make_instruction(dataset, patient, "I-COST", n_responses=4)
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    assignment = review_data.assign(instruction, clinician)
    return instruction, clinician, assignment


def _page(client, instruction):
    return client.get(reverse("clinician_review", args=[instruction.pk]))


def _complete(review: Review) -> list[dict]:
    at = int(time.time() * 1000)
    return [
        {"handle": h, "field": field, "value": value, "at": at}
        for i, h in enumerate(review.handles)
        for field, value in (("rank", i + 1), ("is_correct", i % 2 == 0))
    ]


def _post(client, name, review, edits):
    return client.post(
        reverse(name, args=[review.pk]),
        json.dumps({"edits": edits, "tab": "t", "seq": 1}),
        content_type="application/json",
        headers={"Accept": "application/json"},
    )


def test_the_first_open_starts_the_review_in_one_insert(client, setup, django_assert_num_queries):
    instruction, clinician, assignment = setup
    record_excerpts_prepare(dataset_id=instruction.dataset_id)  # as the import leaves it
    error_tags()  # as every page view after a process's first finds them
    dataset_model_names(instruction.dataset_id)  # likewise
    client.force_login(clinician)
    client.get(reverse("clinician_queue"))  # the session's first request writes it
    with django_assert_num_queries(FIRST_OPEN_QUERIES):
        assert _page(client, instruction).status_code == 200
    review = Review.objects.get(assignment=assignment)
    assert len(review.handles) == len(review.shown_order) == 4
    with django_assert_num_queries(REOPEN_QUERIES):
        assert _page(client, instruction).status_code == 200
    dataset_model_names_forget()  # a process's first view of the dataset, or half a minute on
    with django_assert_num_queries(REOPEN_QUERIES + MODEL_NAMES_READ):
        assert _page(client, instruction).status_code == 200


def test_a_submit_reads_the_review_once_and_inserts_its_rows(
    client, setup, django_assert_num_queries
):
    instruction, clinician, assignment = setup
    client.force_login(clinician)
    _page(client, instruction)
    review = Review.objects.get(assignment=assignment)
    assert _post(client, "review_save", review, _complete(review)).status_code == 200
    with django_assert_num_queries(SUBMIT_QUERIES):
        answer = _post(client, "review_submit", review, _complete(review))
    assert answer.status_code == 200 and answer.json()["status"] == "submitted"
    rows = {
        j.response_id: (j.position, j.rank, j.is_correct)
        for j in Review.objects.get(pk=review.pk).judgements.all()
    }
    assert rows == {int(rid): (i, i + 1, i % 2 == 0) for i, rid in enumerate(review.shown_order)}


def test_an_opened_review_has_no_judgement_rows_until_it_is_submitted(client, setup):
    # The draft holds the values; rows are written once, at submit (a review opened and left
    # costs one INSERT, not seven).
    instruction, clinician, assignment = setup
    client.force_login(clinician)
    _page(client, instruction)
    review = Review.objects.get(assignment=assignment)
    assert _post(client, "review_save", review, _complete(review)[:2]).status_code == 200
    assert not review.judgements.exists()
    page = _page(client, instruction).content.decode()
    assert 'option value="1" selected' in page  # the draft's rank shown without a row


@pytest.fixture
def rendered(db) -> list[str]:
    names: list[str] = []

    def note(sender, template, context, **kwargs):  # noqa: ANN001, ARG001
        names.append(template.name)

    template_rendered.connect(note)
    yield names
    template_rendered.disconnect(note)


def test_the_page_serves_the_stored_excerpt_without_rendering_it_again(
    client, setup, rendered, monkeypatch
):
    instruction, clinician, _ = setup
    client.force_login(clinician)
    first = _page(client, instruction).content.decode()
    assert "review/clinician/_excerpt.html" in rendered  # computed and rendered once
    rendered.clear()
    monkeypatch.setattr(records, "record_excerpt", _refuse)
    second = _page(client, instruction).content.decode()
    assert "review/clinician/_excerpt.html" not in rendered
    excerpt = RecordExcerpt.objects.get(instruction=instruction)
    assert excerpt.html and excerpt.html in first and excerpt.html in second
    assert 'data-testid="excerpt"' in second


def test_a_changed_excerpt_template_renders_the_stored_excerpt_again(
    client, setup, rendered, monkeypatch
):
    instruction, clinician, _ = setup
    client.force_login(clinician)
    _page(client, instruction)
    computed = RecordExcerpt.objects.get(instruction=instruction)
    # A deployment that changes _excerpt.html (or the time zone it formats dates in) must not
    # serve HTML rendered by the old one; the ranking itself is kept.
    monkeypatch.setattr(records, "excerpt_html_version", lambda: "another template")
    monkeypatch.setattr(records, "record_excerpt", _refuse)
    rendered.clear()
    assert _page(client, instruction).status_code == 200
    assert "review/clinician/_excerpt.html" in rendered
    again = RecordExcerpt.objects.get(instruction=instruction)
    assert again.content == computed.content
    assert again.html_version == "another template"


def _refuse(*args, **kwargs):  # noqa: ANN002, ANN003
    raise AssertionError("the excerpt was ranked during a page view")


def test_an_import_prepares_every_excerpt_so_no_page_view_computes_one(
    tmp_path: Path, client, monkeypatch
):
    folder = tmp_path / "release"
    write_release(
        folder,
        DemoSpec(
            n_patients=3, n_instructions=5, big_record_events=300, events_per_patient=80, seed=3
        ),
    )
    summary = dataset_import(path=folder, dataset_name="prepared")
    instructions = list(Instruction.objects.filter(dataset__name="prepared", patient__isnull=False))
    assert instructions
    assert summary.counts["excerpts prepared"] == len(instructions)
    stored = RecordExcerpt.objects.filter(instruction__in=instructions)
    assert stored.count() == len(instructions)
    assert all(e.html for e in stored)
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instructions[0], clinician)
    client.force_login(clinician)
    monkeypatch.setattr(records, "record_excerpt", _refuse)
    page = _page(client, instructions[0])
    assert page.status_code == 200 and b'data-testid="excerpt"' in page.content
    # Importing the same release again finds them all current: nothing to prepare.
    again = dataset_import(path=folder, dataset_name="prepared")
    assert again.counts["excerpts prepared"] == 0


def test_a_tag_an_admin_adds_or_retires_shows_at_once_despite_the_process_copy(client, setup):
    from review.models import ErrorTag

    instruction, clinician, _ = setup
    client.force_login(clinician)
    error_tags()  # this process holds its copy now
    ErrorTag.objects.create(slug="new-tag", label="A brand-new tag", is_active=True, order=99)
    assert b"A brand-new tag" in _page(client, instruction).content
    ErrorTag.objects.filter(slug="new-tag").update(is_active=False)  # a queryset: no signal
    ErrorTag.objects.get(slug="new-tag").save()  # the admin saves the row: the signal fires
    assert b"A brand-new tag" not in _page(client, instruction).content


def test_prepare_excerpts_fills_in_a_dataset_imported_before_and_then_has_nothing_to_do(setup):
    from io import StringIO

    from django.core.management import call_command

    instruction, _, _ = setup  # made row by row, as an older import left it: no excerpt
    assert not RecordExcerpt.objects.exists()
    out = StringIO()
    call_command("prepare_excerpts", "--no-progress", stdout=out)
    assert "1 of 1 excerpts prepared" in out.getvalue()
    assert RecordExcerpt.objects.get(instruction=instruction).html
    call_command("prepare_excerpts", "--no-progress", "--dataset", "tests", stdout=out)
    assert out.getvalue().endswith("tests: 0 of 1 excerpts prepared\n")


def _set(assignment) -> list[int]:  # noqa: ANN001
    return sorted(
        StudyResponse.objects.filter(
            study_id=assignment.study_id, instruction_id=assignment.instruction_id
        ).values_list("response_id", flat=True)
    )


def _open(assignment, clinician, response_ids: list[int]) -> Review:  # noqa: ANN001
    request = RequestFactory().get("/")
    request.user = clinician
    return review_open(
        assignment=assignment, response_ids=response_ids, could_unblind=False, request=request
    )


def _view_events(review: Review) -> list[tuple[str, str]]:
    return sorted(
        AuditEvent.objects.filter(object_type="Review", object_id=str(review.pk))
        .exclude(action=AuditEvent.Action.REVIEW_SAVED)
        .values_list("action", "person_id")
    )


def test_opening_a_review_records_both_views_about_it_first_time_and_after(setup):
    instruction, clinician, assignment = setup
    ids = _set(assignment)
    review = _open(assignment, clinician, ids)
    assert sorted(review.shown_order) == ids
    viewed = [
        (AuditEvent.Action.INSTRUCTION_VIEWED, instruction.person_id),
        (AuditEvent.Action.RECORD_VIEWED, instruction.person_id),
    ]
    assert _view_events(review) == sorted(viewed)
    assert _open(review.assignment, clinician, ids).pk == review.pk
    assert _view_events(review) == sorted(viewed * 2)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite keeps the set first read")
def test_a_set_changed_since_the_page_read_it_is_read_again_under_the_lock(setup):
    instruction, clinician, assignment = setup
    ids = _set(assignment)
    # The page read the set before a response joined it: the one-statement start sees another
    # set under the lock and writes nothing; the locked read then freezes the current set.
    review = _open(assignment, clinician, ids[:-1])
    assert sorted(review.shown_order) == ids
    assert len(_view_events(review)) == 2
