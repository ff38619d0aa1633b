"""The record excerpt stored once per instruction: same page as computed, computed once,
recomputed when the instruction or its record changes (a ``--replace`` re-import included)."""

from pathlib import Path

import pytest
from django.db import connection
from django.template.loader import render_to_string
from django.test.utils import CaptureQueriesContext

from review.demo.release import DemoSpec, write_release
from review.importers import import_release
from review.models import Instruction, RecordExcerpt
from review.selectors import records
from review.selectors.records import record_excerpt
from review.services.excerpts import record_excerpt_cached
from tests.review import review_data

pytestmark = pytest.mark.django_db

QUESTION = "Is there a pericardial effusion on the echo, and what was the last creatinine?"


def _render(excerpt, instruction) -> str:
    return render_to_string(
        "review/clinician/_excerpt.html", {"excerpt": excerpt, "instruction": instruction}
    )


@pytest.fixture
def instruction(db) -> Instruction:
    dataset = review_data.make_dataset()
    patient = review_data.make_record(dataset, "P-CACHE", n_events=300)
    return review_data.make_instruction(dataset, patient, "I-CACHE", question=QUESTION)


@pytest.fixture
def counted(monkeypatch) -> list[int]:
    calls: list[int] = []

    def counting(instruction, patient):
        calls.append(instruction.pk)
        return record_excerpt(instruction, patient)

    monkeypatch.setattr(records, "record_excerpt", counting)
    return calls


def test_the_stored_excerpt_renders_exactly_like_the_computed_one(instruction):
    computed = record_excerpt(instruction, instruction.patient)
    first = record_excerpt_cached(instruction, instruction.patient)  # computes and stores
    stored = record_excerpt_cached(instruction, instruction.patient)  # read back from the row
    assert computed.older_notes and computed.latest_notes and computed.findings and computed.recent
    assert first == computed
    assert stored == computed
    html = _render(computed, instruction)
    assert "<mark>pericardial effusion</mark>" in html
    assert _render(stored, instruction) == html


def test_it_computes_the_excerpt_once_per_instruction(instruction, counted):
    record_excerpt_cached(instruction, instruction.patient)
    with CaptureQueriesContext(connection) as queries:
        for _ in range(3):
            record_excerpt_cached(instruction, instruction.patient)
    assert counted == [instruction.pk]
    assert len(queries) == 3  # one row read per view
    assert RecordExcerpt.objects.filter(instruction=instruction).count() == 1


def test_a_changed_question_recomputes_the_excerpt(instruction, counted):
    before = record_excerpt_cached(instruction, instruction.patient)
    instruction.question = "What was the most recent heart rate?"
    instruction.save()
    after = record_excerpt_cached(instruction, instruction.patient)
    assert counted == [instruction.pk, instruction.pk]
    assert after.concepts != before.concepts
    assert after == record_excerpt(instruction, instruction.patient)
    assert RecordExcerpt.objects.filter(instruction=instruction).count() == 1


def _release(folder: Path, seed: int) -> Path:
    spec = DemoSpec(
        n_patients=2, n_instructions=4, big_record_events=300, events_per_patient=120, seed=seed
    )
    write_release(folder, spec)
    return folder


def test_a_replace_import_of_the_record_recomputes_its_excerpt(tmp_path, counted):
    folder = _release(tmp_path / "release", seed=1)
    import_release(folder, dataset_name="cache")
    instruction = Instruction.objects.filter(dataset__name="cache").order_by("pk").first()
    patient = instruction.patient
    before = record_excerpt_cached(instruction, patient)
    assert any(r.name == "Heart rate" for r in before.recent)
    # The same record with one event name changed: same size, same dates, same question, so
    # nothing the fingerprint sees changes and only the importer's invalidation can catch it.
    for path in (folder / "ehrs").iterdir():
        path.write_text(path.read_text().replace("Heart rate", "Pulse rate"))
    import_release(folder, dataset_name="cache", replace=True)
    instruction.refresh_from_db()
    patient.refresh_from_db()
    assert not RecordExcerpt.objects.filter(instruction=instruction).exists()
    after = record_excerpt_cached(instruction, patient)
    assert counted == [instruction.pk, instruction.pk]
    assert after == record_excerpt(instruction, patient)
    assert any(r.name == "Pulse rate" for r in after.recent)


def test_an_import_without_replace_keeps_the_stored_excerpt(tmp_path, counted):
    folder = _release(tmp_path / "release", seed=1)
    import_release(folder, dataset_name="cache")
    instruction = Instruction.objects.filter(dataset__name="cache").order_by("pk").first()
    record_excerpt_cached(instruction, instruction.patient)
    import_release(folder, dataset_name="cache")
    record_excerpt_cached(instruction, instruction.patient)
    assert counted == [instruction.pk]
