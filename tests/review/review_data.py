"""Synthetic records, instructions and responses for the clinician-review tests.

Model names are distinctive strings so a test can assert they never reach the browser.
"""

from datetime import UTC, datetime, timedelta

from review.models import (
    Assignment,
    Dataset,
    Encounter,
    Event,
    Instruction,
    ModelResponse,
    Patient,
    ReferenceResponse,
)

MODEL_NAMES = [
    "SecretModel-Alpha-70B",
    "HiddenLLM-Bravo",
    "CovertNet-Charlie-7B",
    "MysteryGPT-Delta",
    "EnigmaNet-Echo",
    "VeiledLM-Foxtrot-13B",
]
START = datetime(2019, 1, 1, 8, 0, tzinfo=UTC)
NOTE_TEXT = (
    "SYNTHETIC. Progress note. Chief complaint: shortness of breath for three days. "
    "Known problems: type 2 diabetes, hypertension. Plan: repeat creatinine in two weeks."
)


def make_dataset(name: str = "tests", *, show_references: bool = False) -> Dataset:
    return Dataset.objects.create(
        name=name, is_synthetic=True, show_references_to_clinicians=show_references
    )


def make_record(dataset: Dataset, person_id: str, *, n_events: int = 60) -> Patient:
    """A patient with ``n_events`` events in encounters of 20, a note closing each encounter.

    One note in the middle mentions "pericardial effusion", for search tests.
    """
    patient = Patient.objects.create(dataset=dataset, person_id=person_id, gender="FEMALE")
    n_encounters = max(1, n_events // 20)
    encounters = Encounter.objects.bulk_create(
        [
            Encounter(
                patient=patient,
                ordinal=i + 1,
                encounter_type="Office Visit",
                start=START + timedelta(days=7 * i),
            )
            for i in range(n_encounters)
        ]
    )
    events = []
    notes = 0
    for seq in range(n_events):
        enc_index = min(seq // 20, n_encounters - 1)
        ts = START + timedelta(days=7 * enc_index, minutes=seq % 20)
        if seq % 20 == 19:
            notes += 1
            text = NOTE_TEXT
            if enc_index == n_encounters // 2:
                text += " Echocardiogram shows a small pericardial effusion."
            events.append(
                Event(
                    patient=patient,
                    encounter=encounters[enc_index],
                    seq=seq,
                    timestamp=ts,
                    event_type="note",
                    name="progress note",
                    note_type="progress note",
                    text=text,
                )
            )
        else:
            lab = ["Creatinine", "Hemoglobin A1c", "Heart rate", "Glucose"][seq % 4]
            events.append(
                Event(
                    patient=patient,
                    encounter=encounters[enc_index],
                    seq=seq,
                    timestamp=ts,
                    event_type="measurement",
                    code=f"LOINC/{1000 + seq % 4}",
                    name=lab,
                    value=str(seq % 90 + 1),
                    unit="mg/dL",
                )
            )
    Event.objects.bulk_create(events, batch_size=2000)
    patient.event_count = n_events
    patient.note_count = notes
    patient.first_event_at = START
    patient.last_event_at = events[-1].timestamp if events else None
    patient.save()
    return patient


def make_instruction(
    dataset: Dataset,
    patient: Patient,
    instruction_id: str,
    *,
    question: str = "What was the most recent creatinine and is the kidney function worsening?",
    category: str = "information retrieval",
    specialty: str = "Internal Medicine",
    n_responses: int = 4,
) -> Instruction:
    instruction = Instruction.objects.create(
        dataset=dataset,
        instruction_id=instruction_id,
        question=question,
        patient=patient,
        person_id=patient.person_id,
        category=category,
        subcategory="retrieve laboratory studies",
        specialty=specialty,
    )
    for i, name in enumerate(MODEL_NAMES[:n_responses]):
        ModelResponse.objects.create(
            instruction=instruction,
            model_name=name,
            text=f"Answer number {i + 1}: the latest creatinine was {i + 1}.{i} mg/dL.",
        )
    ReferenceResponse.objects.create(
        instruction=instruction, annotator="Annotator_1", text="REFERENCE: creatinine 1.2 mg/dL."
    )
    return instruction


def assign(instruction: Instruction, clinician) -> Assignment:
    from tests.factories import assign as assign_in_study

    return assign_in_study(instruction, clinician)


CLINICAL_START = datetime(2016, 1, 4, 9, 0, tzinfo=UTC)
CLINICAL_LAST = datetime(2022, 5, 2, 10, 30, tzinfo=UTC)
LATEST_NOTE = "SYNTHETIC. Telephone note. Called about a refill of metformin; no new symptoms."
OLD_ANSWER_NOTE = (
    "SYNTHETIC. Orthopedic surgery note. Right total knee arthroplasty performed today "
    "without complication."
)


def make_clinical_record(dataset: Dataset, person_id: str) -> Patient:
    """A record from Jan 2016 to May 2022 as a clinician would read it.

    - 40 progress notes, every eight weeks from 2016; one in three says "chest discomfort";
      the latest note (1 May 2022) is a telephone note about metformin; the oldest (Feb 2016)
      is the only one about the knee arthroplasty.
    - 39 "Hemoglobin A1c" results (LOINC/4548-4), the latest 7.9 % on 20 Apr 2022.
    - metformin and lisinopril (drug exposures), the latest on 28 Apr 2022; a diabetes
      diagnosis; heart rates, the last event of the record on 2 May 2022.
    """
    patient = Patient.objects.create(dataset=dataset, person_id=person_id, gender="FEMALE")
    events: list[Event] = []

    def add(ts: datetime, event_type: str, **fields: str) -> None:
        events.append(
            Event(patient=patient, seq=len(events), timestamp=ts, event_type=event_type, **fields)
        )

    add(
        datetime(2016, 2, 1, 14, 0, tzinfo=UTC),
        "note",
        name="surgery note",
        note_type="surgery note",
        text=OLD_ANSWER_NOTE,
    )
    add(
        CLINICAL_START,
        "condition_occurrence",
        code="ICD10CM/E11.9",
        name="Type 2 diabetes mellitus without complications",
    )
    for i in range(40):
        ts = datetime(2016, 3, 1, 9, 0, tzinfo=UTC) + timedelta(weeks=8 * i)
        complaint = "chest discomfort on exertion" if i % 3 == 0 else "follow-up, feels well"
        add(
            ts,
            "note",
            name="progress note",
            note_type="progress note",
            text=f"SYNTHETIC. Progress note. Chief complaint: {complaint}. Plan: continue.",
        )
    for i in range(38):
        ts = datetime(2016, 3, 2, 8, 0, tzinfo=UTC) + timedelta(days=59 * i)
        add(
            ts,
            "measurement",
            code="LOINC/4548-4",
            name="Hemoglobin A1c",
            value=f"{6.5 + (i % 10) / 10:.1f}",
            unit="%",
        )
    add(
        datetime(2022, 4, 20, 8, 0, tzinfo=UTC),
        "measurement",
        code="LOINC/4548-4",
        name="Hemoglobin A1c",
        value="7.9",
        unit="%",
    )
    for i, drug in enumerate(["metformin 500 mg oral tablet", "lisinopril 10 mg oral tablet"]):
        for month in range(0, 72, 6):
            add(
                CLINICAL_START + timedelta(days=30 * month + i),
                "drug_exposure",
                code=f"RxNorm/{860975 + i}",
                name=drug,
            )
        add(datetime(2022, 4, 28, 9, i, tzinfo=UTC), "drug_exposure", name=drug)
    add(
        datetime(2022, 5, 1, 16, 0, tzinfo=UTC),
        "note",
        name="telephone note",
        note_type="telephone note",
        text=LATEST_NOTE,
    )
    for day in range(5):
        add(
            CLINICAL_LAST - timedelta(days=day),
            "measurement",
            code="LOINC/8867-4",
            name="Heart rate",
            value=str(70 + day),
            unit="/min",
        )
    Event.objects.bulk_create(events)
    patient.event_count = len(events)
    patient.note_count = sum(1 for e in events if e.event_type == "note")
    patient.first_event_at = CLINICAL_START
    patient.last_event_at = CLINICAL_LAST
    patient.save()
    return patient


def note_url(world) -> str:  # noqa: ANN001
    """The record endpoint of a note of ``world``'s patient (tests/review/conftest.py)."""
    from django.urls import reverse

    event, _ = Event.objects.get_or_create(
        patient=world.patient, seq=1, defaults={"event_type": "note", "text": "Synthetic note."}
    )
    return reverse(
        "record_event", kwargs={"instruction_id": world.instruction.pk, "event_id": event.pk}
    )
