"""Synthetic patients with records, instructions and references, for the generation tests."""

from datetime import UTC, datetime, timedelta

from review.models import (
    Dataset,
    Encounter,
    Event,
    Instruction,
    Patient,
    ReferenceResponse,
)

T0 = datetime(2019, 1, 1, 8, 0, tzinfo=UTC)


def make_generation_dataset(
    name: str = "gen", *, n_patients: int = 2, n_instructions: int = 4, n_visits: int = 30
) -> Dataset:
    dataset = Dataset.objects.create(name=name, is_synthetic=True)
    patients = []
    for p in range(n_patients):
        patient = Patient.objects.create(
            dataset=dataset, person_id=f"GP{p}", gender="F" if p % 2 else "M"
        )
        events = []
        for v in range(n_visits):
            start = T0 + timedelta(days=7 * v)
            encounter = Encounter.objects.create(
                patient=patient, ordinal=v, start=start, encounter_type="Outpatient"
            )
            topic = "warfarin INR 3.4 anticoagulation" if v == 3 else f"routine review {v}"
            events.append(
                Event(
                    patient=patient,
                    encounter=encounter,
                    seq=2 * v,
                    timestamp=start + timedelta(hours=1),
                    event_type="measurement",
                    code="LOINC/2160-0",
                    name="Creatinine",
                    value=f"1.{v % 10}",
                    unit="mg/dL",
                )
            )
            events.append(
                Event(
                    patient=patient,
                    encounter=encounter,
                    seq=2 * v + 1,
                    timestamp=start + timedelta(hours=2),
                    event_type="note",
                    note_type="Progress note",
                    text=f"Seen today. {topic}. Plan unchanged.",
                )
            )
        Event.objects.bulk_create(events)
        patient.event_count = len(events)
        patient.last_event_at = events[-1].timestamp
        patient.save()
        patients.append(patient)
    for i in range(n_instructions):
        patient = patients[i % n_patients]
        instruction = Instruction.objects.create(
            dataset=dataset,
            instruction_id=f"G{i}",
            question=f"Summarize the creatinine trend ({i}).",
            patient=patient,
            person_id=patient.person_id,
        )
        ReferenceResponse.objects.create(
            instruction=instruction, annotator="Annotator_1", text="Creatinine is stable."
        )
    # No record loaded: never planned for generation.
    Instruction.objects.create(dataset=dataset, instruction_id="G-norecord", question="?")
    return dataset
