"""OMOP CDM as OHDSI ships it: rows of the Synthea27Nj sample (tests/review/fixtures/synthea27nj,
Apache 2.0; see its README), and shapes of it the tests write themselves."""

import shutil
from datetime import date
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from review.importers import ImportFailed, import_release
from review.models import Encounter, Event, Patient

pytestmark = pytest.mark.django_db

SYNTHEA = Path(__file__).parent / "fixtures" / "synthea27nj"


def synthea(tmp_path: Path) -> Path:
    copy = tmp_path / "synthea27nj"
    shutil.copytree(SYNTHEA, copy, ignore=shutil.ignore_patterns("README.md"))
    return copy


def refused(path: Path) -> str:
    with pytest.raises(ImportFailed) as failure:
        import_release(path, dataset_name="o")
    assert not Patient.objects.exists()
    return str(failure.value)


def test_ohdsis_sample_imports_although_its_concept_table_lacks_the_gender_concepts(
    tmp_path: Path,
) -> None:
    summary = import_release(synthea(tmp_path), dataset_name="o")

    assert summary.counts["patients"] == 3
    seven = Patient.objects.get(person_id="7")
    # 8507 is not in the sample's CONCEPT.csv: the row's source value "M", in one display form.
    assert (seven.gender, seven.race, seven.ethnicity) == (
        "MALE",
        "white",
        "Not Hispanic or Latino",
    )
    assert Patient.objects.get(person_id="16").gender == "FEMALE"
    assert summary.sources["person"] == {"fell back": 3}
    warnings = "\n".join(summary.warnings)
    assert "gender_concept_id: concept(s) not in the concept table" in warnings
    assert "8507, 8532" in warnings
    assert "race_concept_id" in warnings and "8527" in warnings


def test_a_result_held_only_in_value_source_value_is_read(tmp_path: Path) -> None:
    import_release(synthea(tmp_path), dataset_name="o")

    t_score = Event.objects.get(code="LOINC/38265-5")  # measurement 1233
    assert (t_score.name, t_score.value, t_score.value_numeric) == (
        "DXA Radius and Ulna [T-score] Bone density",
        "-2.7",
        -2.7,
    )
    screen = Event.objects.get(code="LOINC/65750-2")  # measurement 55
    assert (screen.value, screen.value_numeric) == ("Negative (qualifier value)", None)
    heart = Event.objects.get(code="LOINC/8867-4")  # value_as_number wins
    assert (heart.value, heart.value_numeric) == ("95", 95.0)


def test_death_device_visit_detail_and_observation_period_are_read(tmp_path: Path) -> None:
    summary = import_release(synthea(tmp_path), dataset_name="o")

    death = Event.objects.get(event_type="death")
    assert death.patient.person_id == "7"
    assert timezone.localtime(death.timestamp).date() == date(2019, 5, 28)
    assert (death.code, death.name, death.value) == ("MEDS_DEATH", "Death", "Alzheimer's disease")
    assert death.attributes["cause"] == "SNOMED/26929004"

    device = Event.objects.get(event_type="device")
    assert (device.patient.person_id, device.name) == ("16", "Implantable defibrillator")
    visit = Encounter.objects.get(patient__person_id="16")
    assert device.encounter == visit

    # A visit detail is a stay inside its visit: an event of that encounter, not a second one.
    assert Encounter.objects.count() == 3
    detail = Event.objects.get(patient__person_id="16", event_type="visit")
    assert (detail.encounter, detail.name) == (visit, "Emergency Room Visit")
    assert "end" in detail.attributes

    assert Patient.objects.get(person_id="1").demographics == {
        "observation_period": "2000-12-27 to 2022-09-30"
    }
    for table in ("death", "device_exposure", "visit_detail", "observation_period"):
        assert summary.sources[table]["read"] >= 1, table
    # The CDM's other tables are named as ignored, not as unrecognised files.
    assert summary.sources["care_site"] == {"ignored": 0}
    assert summary.sources["payer_plan_period"] == {"ignored": 0}
    assert not any("unrecognised" in reason for reason in summary.skipped)


def test_the_command_prints_what_was_read_fell_back_and_ignored(tmp_path: Path, capsys) -> None:
    call_command("import_medalign", str(synthea(tmp_path)), "--dataset", "o", "--no-progress")
    out = capsys.readouterr().out
    assert "read" in out and "by fallback" in out and "ignored" in out
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    # Read 3, all 3 by fallback (the gender concepts the sample lacks), not "read 0".
    assert lines["person"] == ["3", "3", "0"]
    assert lines["care_site"] == ["0", "0", "0"]
    assert lines["measurement"] == ["4", "0", "0"]
    assert "concept(s) not in the concept table" in out


def _write(path: Path, header: list[str], rows: list[list[object]]) -> None:
    lines = [",".join(header)] + [",".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")


def test_a_row_with_several_bad_fields_names_all_of_them(tmp_path: Path) -> None:
    _write(tmp_path / "person.csv", ["person_id", "year_of_birth"], [[1, 1950], [1, "x"]])
    _write(
        tmp_path / "visit_occurrence.csv",
        ["visit_occurrence_id", "person_id", "visit_start_date"],
        [[5, 1, "2020-01-01"]],
    )
    _write(
        tmp_path / "measurement.csv",
        ["measurement_id", "person_id", "measurement_concept_id", "measurement_date"]
        + ["visit_occurrence_id"],
        [[1, 99, 0, "", 6], [2, 1, "abc", "not a date", 5]],
    )
    message = refused(tmp_path)
    # The person table's problems refuse the import before the events are read.
    assert "person.csv, row 2, field 'person_id': person 1 appears twice" in message
    assert "person.csv, row 2, field 'year_of_birth'" in message

    _write(tmp_path / "person.csv", ["person_id", "year_of_birth"], [[1, 1950]])
    message = refused(tmp_path)
    assert "measurement.csv, row 1, field 'person_id': person 99 is not in the person" in message
    assert "measurement.csv, row 1, field 'measurement_date': required value is empty" in message
    assert "measurement.csv, row 1, field 'visit_occurrence_id': visit 6 is not in" in message
    assert "measurement.csv, row 2, field 'measurement_concept_id'" in message
    assert "measurement.csv, row 2, field 'measurement_date'" in message


def test_an_unreadable_concept_id_is_still_refused(tmp_path: Path) -> None:
    _write(tmp_path / "person.csv", ["person_id", "gender_concept_id"], [[1, "male?"]])
    message = refused(tmp_path)
    assert "person.csv, row 1, field 'gender_concept_id'" in message
