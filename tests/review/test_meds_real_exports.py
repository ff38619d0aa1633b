"""MEDS as real pipelines write it.

- meds-testing-helpers' static sample (MIT; rows copied below with attribution);
- a MIMIC-style admission with a nested emergency-department stay, in the shape MEDS_transforms'
  MIMIC-IV pipeline writes (``ED_REGISTRATION``/``ED_OUT``, ``HOSPITAL_ADMISSION//…``/
  ``HOSPITAL_DISCHARGE//…``): generated here, since MIMIC-IV's demo is not copied into the repo;
- ``meds_etl``'s conversion of OMOP, in the columns its ``omop.py`` writes (``table``,
  ``visit_id``, ``unit``, ``end``), for rows of OHDSI's Synthea27Nj sample (person 7's visit 237;
  Apache 2.0, see fixtures/synthea27nj/README.md): generated here from those rows.
"""

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from django.core.management import call_command

from review.importers import ImportFailed, import_release
from review.importers.ehr_xml import parse_person_text
from review.models import Encounter, Event, Patient

from .test_meds_importer import MEDS_SCHEMA, table, write_meds

pytestmark = pytest.mark.django_db

T = datetime

# meds-testing-helpers, src/meds_testing_helpers/static_sample_data/
# simple_static_sharded_by_split.yaml, data/train/1.parquet (MIT License, (c) 2023 Matthew
# McDermott; https://github.com/Medical-Event-Data-Standard/meds_testing_helpers).
TESTING_HELPERS_TRAIN_1 = """\
68729,,EYE_COLOR//HAZEL,
68729,,HEIGHT,160.3953106166676
68729,"03/09/1978, 00:00:00",MEDS_BIRTH,
68729,"05/26/2010, 02:30:56",ADMISSION//PULMONARY,
68729,"05/26/2010, 02:30:56",HR,86.0
68729,"05/26/2010, 02:30:56",TEMP,97.8
68729,"05/26/2010, 04:51:52",DISCHARGE,
814703,,EYE_COLOR//HAZEL,
814703,,HEIGHT,156.48559093209357
814703,"03/28/1976, 00:00:00",MEDS_BIRTH,
814703,"02/05/2010, 05:55:39",ADMISSION//ORTHOPEDIC,
814703,"02/05/2010, 05:55:39",HR,170.2
814703,"02/05/2010, 05:55:39",TEMP,100.1
814703,"02/05/2010, 07:02:30",DISCHARGE,
"""


def _testing_helpers_rows() -> list[tuple]:
    import csv

    rows = []
    for sid, time, code, value in csv.reader(TESTING_HELPERS_TRAIN_1.splitlines()):
        when = datetime.strptime(time, "%m/%d/%Y, %H:%M:%S") if time else None
        rows.append((int(sid), when, code, float(value) if value else None, None))
    return rows


def test_meds_testing_helpers_admissions_become_encounters_ended_by_discharge(
    tmp_path: Path,
) -> None:
    root = write_meds(tmp_path, {"train/1.parquet": table(_testing_helpers_rows())}, codes={})
    summary = import_release(root, dataset_name="m")

    assert summary.counts["patients"] == 2
    admission = Encounter.objects.get(patient__person_id="68729")
    assert admission.encounter_type == "PULMONARY"
    assert (admission.start.hour, admission.end.hour, admission.end.minute) == (2, 4, 51)
    assert admission.event_count == 4  # admission, HR, TEMP, discharge
    assert Patient.objects.get(person_id="68729").demographics == {
        "EYE_COLOR//HAZEL": "yes",
        "HEIGHT": "160.395",
    }
    # HR and TEMP say nothing of their type: observations, counted as such.
    assert summary.sources["HR"] == {"fell back": 2}
    assert summary.sources["ADMISSION"] == {"read": 2}
    assert summary.sources["MEDS_BIRTH"] == {"read": 2}


# A MIMIC-IV-style admission: the ED stay starts before the admission and ends after it starts.
MIMIC_STAY = [
    (10, None, "GENDER//M", None, None),
    (10, T(2150, 1, 1, 8), "ED_REGISTRATION", None, None),
    (10, T(2150, 1, 1, 9), "LAB//50912//mg/dL", 1.1, None),
    (10, T(2150, 1, 1, 12), "HOSPITAL_ADMISSION//EW EMER.//EMERGENCY ROOM", None, None),
    (10, T(2150, 1, 1, 13), "ED_OUT", None, None),
    (10, T(2150, 1, 1, 14), "ICU_ADMISSION//MICU", None, None),
    (10, T(2150, 1, 2, 9), "LAB//50912//mg/dL", 1.4, None),
    (10, T(2150, 1, 3, 10), "ICU_DISCHARGE//MICU", None, None),
    (10, T(2150, 1, 4, 9), "DIAGNOSIS//ICD//10//N17.9", None, None),
    (10, T(2150, 1, 5, 11), "HOSPITAL_DISCHARGE//HOME", None, None),
    (10, T(2150, 3, 1, 9), "LAB//50912//mg/dL", 1.0, None),
]


def test_an_ed_out_ends_the_ed_stay_not_the_admission_it_led_to(tmp_path: Path) -> None:
    import_release(write_meds(tmp_path, {"0.parquet": table(MIMIC_STAY)}), dataset_name="m")

    ed, admission, day = Encounter.objects.order_by("ordinal")
    assert (ed.encounter_type, ed.start.hour, ed.end.hour) == ("ED_REGISTRATION", 8, 13)
    assert ed.event_count == 3  # registration, the first lab, ED_OUT
    assert admission.encounter_type == "EW EMER.//EMERGENCY ROOM"
    assert (admission.start.day, admission.end.day, admission.end.hour) == (1, 5, 11)
    # The ICU stay, the later labs and the diagnosis stay inside the admission.
    assert admission.event_count == 6
    assert (day.encounter_type, day.event_count, day.start.month) == ("day (no visit code)", 1, 3)
    assert Patient.objects.get().gender == "MALE"


META_SCHEMA = pa.schema(
    [
        *MEDS_SCHEMA,
        ("table", pa.string()),
        ("visit_id", pa.int64()),
        ("unit", pa.string()),
        ("end", pa.timestamp("us")),
    ]
)
DAY = T(2018, 8, 14)
# Person 7's visit 237 of Synthea27Nj as meds_etl writes it: the visit and visit_detail rows sort
# after the same day's events and end when they start.
MEDS_ETL_ROWS = [
    (7, T(1938, 2, 22), "MEDS_BIRTH", None, None, "person", None, None, None),
    (7, T(1938, 2, 22), "Gender/M", None, None, "person", None, None, None),
    (7, T(1938, 2, 22), "Race/5", None, None, "person", None, None, None),
    (7, DAY, "LOINC/38265-5", -2.7, None, "measurement", 237, None, None),
    (7, DAY, "LOINC/8867-4", 95.0, None, "measurement", 237, "/min", None),
    (7, DAY, "SNOMED/80502", None, None, "condition", 237, None, None),
    (7, DAY, "SNOMED/430193006", None, None, "procedure", 237, None, None),
    (7, DAY, "Visit/OP", None, None, "visit", 237, None, DAY),
    (7, DAY, "Visit/OP", None, None, "visit_detail", 237, None, DAY),
    (7, T(2019, 5, 28), "MEDS_DEATH", None, None, "death", None, None, None),
]
MEDS_ETL_CODES = {
    "Visit/OP": "Outpatient Visit",
    "Gender/M": "MALE",
    "Race/5": "White",
    "SNOMED/430193006": "Medication Reconciliation (procedure)",
}


def test_meds_etl_output_links_events_to_their_visit_by_visit_id(tmp_path: Path) -> None:
    root = write_meds(
        tmp_path, {"0.parquet": table(MEDS_ETL_ROWS, META_SCHEMA)}, codes=MEDS_ETL_CODES
    )
    summary = import_release(root, dataset_name="m")

    # One encounter for the visit: not one per visit row beside a "day" holding the events.
    visit = Encounter.objects.get()
    assert (visit.encounter_type, visit.event_count) == ("Outpatient Visit", 6)
    patient = Patient.objects.get()
    assert (patient.gender, patient.race) == ("MALE", "White")
    types = dict(Event.objects.values_list("code", "event_type"))
    assert types["SNOMED/430193006"] == "procedure"  # from the table, not the vocabulary
    assert types["SNOMED/80502"] == "condition"
    assert types["MEDS_DEATH"] == "death"
    assert Event.objects.get(code="LOINC/8867-4").unit == "/min"
    assert summary.counts["encounters"] == 1


def test_a_visit_rows_end_extends_its_encounter(tmp_path: Path) -> None:
    rows = [
        (8, T(2020, 1, 1, 9), "LOINC/8867-4", 80.0, None, "measurement", 5, None, None),
        (8, T(2020, 1, 1, 10), "Visit/IP", None, None, "visit", 5, None, T(2020, 1, 4, 23)),
        (8, T(2020, 1, 3, 8), "LOINC/8867-4", 70.0, None, "measurement", 5, None, None),
        (8, T(2020, 1, 3, 9), "LOINC/8867-4", 60.0, None, "measurement", None, None, None),
    ]
    import_release(write_meds(tmp_path, {"0.parquet": table(rows, META_SCHEMA)}), dataset_name="m")
    visit, day = Encounter.objects.order_by("ordinal")
    assert (visit.start.hour, visit.end.day, visit.end.hour, visit.event_count) == (9, 4, 23, 3)
    assert (day.encounter_type, day.event_count) == ("day (no visit code)", 1)


def test_repeated_demographic_rows_with_other_values_are_kept_and_warned(tmp_path: Path) -> None:
    rows = [
        (1, None, "GENDER/F", None, None),
        (1, None, "GENDER/M", None, None),
        (1, None, "HEIGHT", 160.0, None),
        (1, None, "HEIGHT", 162.0, None),
        (1, T(2020, 1, 1), "LOINC/8867-4", 80.0, None),
    ]
    summary = import_release(write_meds(tmp_path, {"0.parquet": table(rows)}), dataset_name="m")
    patient = Patient.objects.get()
    assert patient.gender == "FEMALE"
    assert patient.demographics == {"gender (also given)": "MALE", "HEIGHT": "160; 162"}
    warning = "a subject's demographic row given again with another value (both kept)"
    assert summary.warnings[warning] == 2


def test_a_value_column_under_another_name_is_warned(tmp_path: Path) -> None:
    schema = pa.schema([*MEDS_SCHEMA, ("numerical_value", pa.float64())])
    rows = [
        (1, T(2020, 1, 1), "LOINC/8867-4", None, None, 80.0),
        (1, T(2020, 1, 2), "LOINC/8867-4", None, None, 82.0),
        (1, T(2020, 1, 3), "LOINC/8867-4", None, None, None),
    ]
    summary = import_release(
        write_meds(tmp_path, {"0.parquet": table(rows, schema)}), dataset_name="m"
    )
    [(message, count)] = summary.warnings.items()
    assert "data/0.parquet: column 'numerical_value' is not a MEDS value column" in message
    assert count == 2
    assert Event.objects.filter(attributes__numerical_value="80.0").exists()


def test_a_subject_continuing_into_the_next_shard_is_merged(tmp_path: Path) -> None:
    first = [(2, T(2020, 1, 1), "A/1", None, None), (1, T(2020, 1, 1), "A/1", None, None)]
    second = [(1, T(2021, 1, 1), "A/2", None, None), (3, T(2021, 1, 1), "A/2", None, None)]
    root = write_meds(tmp_path, {"0.parquet": table(first), "1.parquet": table(second)})
    import_release(root, dataset_name="m")
    one = Patient.objects.get(person_id="1")
    assert one.event_count == 2
    assert Patient.objects.count() == 3


def test_sex_has_one_display_form_whichever_format_it_came_in(tmp_path: Path) -> None:
    rows = [(1, None, "GENDER/m", None, None), (2, None, "SEX//female", None, None)]
    import_release(write_meds(tmp_path, {"0.parquet": table(rows)}), dataset_name="m")
    shown = dict(Patient.objects.values_list("person_id", "gender"))
    assert shown == {"1": "MALE", "2": "FEMALE"}
    assert parse_person_text("Birth: 1950-01-01 Gender: F Race: White").gender == "FEMALE"


def test_the_command_prints_rows_by_code_family(tmp_path: Path, capsys) -> None:
    root = write_meds(tmp_path, {"0.parquet": table(MIMIC_STAY + MIMIC_STAY[-1:])})
    call_command("import_medalign", str(root), "--dataset", "m", "--no-progress")
    out = capsys.readouterr().out
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert lines["LAB"] == ["3", "0", "1"]  # the repeated row: a duplicate, ignored
    assert lines["ED_OUT"] == ["1", "0", "0"]


def test_a_row_with_several_empty_required_fields_names_each(tmp_path: Path) -> None:
    schema = pa.schema(
        [("subject_id", pa.int64()), ("time", pa.timestamp("us")), ("code", pa.string())]
    )
    rows = [(1, T(2020, 1, 1), "A/1"), (None, T(2020, 1, 2), None)]
    with pytest.raises(ImportFailed) as failure:
        import_release(write_meds(tmp_path, {"0.parquet": table(rows, schema)}), dataset_name="m")
    message = str(failure.value)
    assert "row 2, field 'subject_id': required value is empty" in message
    assert "row 2, field 'code': required value is empty" in message
