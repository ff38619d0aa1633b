"""The demo's synthetic MEDS cohort: written by the project, imported by the MEDS importer, and
shown on the review page like any other record."""

from pathlib import Path

import pytest
from django.urls import reverse

from review.demo.meds import FIRST_SUBJECT_ID, write_meds_cohort
from review.demo.release import DemoSpec, write_release
from review.importers import import_release
from review.models import Event, Instruction, ModelResponse, Patient, Role
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


def test_the_demo_release_carries_a_synthetic_meds_cohort(tmp_path: Path) -> None:
    write_release(tmp_path, DemoSpec(n_patients=2, n_instructions=3, big_record_events=200))
    summary = import_release(tmp_path, dataset_name="demo", is_synthetic=True)
    assert summary.files["data/0.parquet"] == "meds"
    meds_patients = Patient.objects.filter(source_format="meds")
    assert meds_patients.count() == 3
    first = meds_patients.get(person_id=str(FIRST_SUBJECT_ID))
    assert first.demographics == {"NOTICE/SYNTHETIC": "SYNTHETIC DEMO DATA - not a real patient"}
    assert first.birth_date is not None and first.gender in ("FEMALE", "MALE")
    instructions = Instruction.objects.filter(patient__source_format="meds")
    assert instructions.count() == 3
    assert ModelResponse.objects.filter(instruction__in=instructions).count() == 3 * 6
    reports = Event.objects.filter(patient=first, event_type="note")
    assert {e.note_type for e in reports} >= {
        "CT pulmonary angiogram: findings",
        "CT pulmonary angiogram: impression",
    }
    assert all("SYNTHETIC" in e.text for e in reports if "findings" in e.note_type)


def test_a_meds_record_shows_on_the_review_page(client, tmp_path: Path) -> None:
    write_meds_cohort(tmp_path / "meds-cohort", seed=7)
    import_release(tmp_path, dataset_name="demo", is_synthetic=True)
    instruction = Instruction.objects.get(patient__person_id=str(FIRST_SUBJECT_ID))
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    client.force_login(clinician)

    page = client.get(reverse("clinician_review", args=[instruction.pk]))
    assert page.status_code == 200
    assert "MEDS record" in page.content.decode()
    events = client.get(reverse("record_events", args=[instruction.pk])).json()
    assert "CT pulmonary angiogram" in events["html"]
    assert "pulmonary embolism" in events["html"].lower()
