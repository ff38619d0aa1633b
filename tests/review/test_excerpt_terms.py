"""What the excerpt matches an instruction by: its clinical terms, as phrases where the record's
names hold them. "Most recent blood pressure" listed chloride and calcium "in Blood" beside the
systolic and diastolic pressures; "at high risk of sepsis" marked every "high" and "risk"."""

from datetime import UTC, datetime, timedelta

import pytest

from review.models import Event, Patient
from review.selectors import records
from review.vocabulary import clinical, concepts, phrases, stemmed
from tests.review import review_data

pytestmark = pytest.mark.django_db

START = datetime(2021, 3, 1, 8, 0, tzinfo=UTC)
NAMES = [
    ("Non Invasive Blood Pressure systolic", "128"),
    ("Non Invasive Blood Pressure diastolic", "74"),
    ("Chloride [Moles/volume] in Blood", "101"),
    ("Calcium [Moles/volume] in Blood", "2.3"),
    ("Glucose [Mass/volume] in Blood", "5.4"),
    ("Heart rate", "88"),
]
NOTE = (
    "SYNTHETIC. High fever overnight. Discussed the risk of sepsis with the family; "
    "blood cultures sent. Blood pressure stable."
)


def _record() -> Patient:
    dataset = review_data.make_dataset()
    patient = Patient.objects.create(dataset=dataset, person_id="P-BP")
    events = [
        Event(
            patient=patient,
            seq=i,
            timestamp=START + timedelta(hours=i),
            event_type="measurement",
            code=f"LOINC/{i}",
            name=name,
            value=value,
        )
        for i, (name, value) in enumerate(NAMES)
    ]
    events.append(
        Event(
            patient=patient,
            seq=len(events),
            timestamp=START + timedelta(days=1),
            event_type="note",
            name="progress note",
            note_type="progress note",
            text=NOTE,
        )
    )
    Event.objects.bulk_create(events)
    patient.event_count, patient.note_count = len(events), 1
    patient.first_event_at, patient.last_event_at = START, events[-1].timestamp
    patient.save()
    return patient


def _excerpt(patient: Patient, question: str) -> records.Excerpt:
    instruction = review_data.make_instruction(
        patient.dataset, patient, f"I-{abs(hash(question))}", question=question, n_responses=1
    )
    return records.record_excerpt(instruction, patient)


def test_latest_values_of_blood_pressure_are_blood_pressures() -> None:
    excerpt = _excerpt(_record(), "What is the most recent blood pressure?")
    assert {f.name for f in excerpt.findings} == {
        "Non Invasive Blood Pressure systolic",
        "Non Invasive Blood Pressure diastolic",
    }
    systolic = next(f for f in excerpt.findings if f.name.endswith("systolic"))
    assert "<mark>Blood Pressure</mark>" in systolic.html


def test_words_no_name_holds_together_still_match_one_by_one() -> None:
    # No name says "blood glucose": glucose (and blood) are matched as before.
    excerpt = _excerpt(_record(), "Trend of blood glucose?")
    assert "Glucose [Mass/volume] in Blood" in {f.name for f in excerpt.findings}


def test_the_excerpt_marks_clinical_terms_not_the_questions_framing() -> None:
    excerpt = _excerpt(_record(), "Is this patient at high risk of sepsis?")
    assert [c["text"] for c in excerpt.concepts] == ["sepsis"]
    [note] = excerpt.latest_notes
    assert "<mark>sepsis</mark>" in note.html
    assert "<mark>High</mark>" not in note.html and "<mark>risk</mark>" not in note.html


def test_search_still_finds_a_framing_word_a_clinician_types() -> None:
    found, page = records.record_search_page(_record(), query="risk")
    assert [c.text for c in found] == ["risk"]
    assert [row.event_type for row in page.rows] == ["note"]


def test_framing_words_go_and_terms_with_other_names_stay() -> None:
    kept = clinical(concepts("Is the HbA1c high? Any risk of chest pain or a new rash?"))
    assert [c.text for c in kept] == ["HbA1c", "chest pain", "rash"]
    assert clinical(concepts("Is the risk high?")) == []


def test_phrases_are_merged_only_where_a_name_holds_them() -> None:
    found = concepts("blood pressure and heart rate")
    names = [stemmed(n) for n, _ in NAMES]
    assert [c.text for c in phrases(found, names)] == ["blood pressure", "heart rate"]
    assert [c.text for c in phrases(found, [stemmed("Chloride in Blood")])] == [
        "blood",
        "pressure",
        "heart",
        "rate",
    ]
    # Hostile: a long name of repeated stems stays one pass (a run is at most a few words).
    long = ["blood"] * 50_000 + ["pressur"]
    assert [c.text for c in phrases(concepts("blood pressure"), [long])] == ["blood pressure"]
