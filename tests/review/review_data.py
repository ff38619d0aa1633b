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
