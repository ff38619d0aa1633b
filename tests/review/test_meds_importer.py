"""MEDS importer: shards the tests write themselves, good and bad, through import_release."""

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from review.importers import ImportFailed, import_release
from review.importers import meds as meds_module
from review.models import Encounter, Event, Instruction, Patient

pytestmark = pytest.mark.django_db

T = datetime
MEDS_SCHEMA = pa.schema(
    [
        ("subject_id", pa.int64()),
        ("time", pa.timestamp("us")),
        ("code", pa.string()),
        ("numeric_value", pa.float32()),
        ("text_value", pa.large_string()),
    ]
)
REPORT = "FINDINGS: No filling defect in the pulmonary arteries.\nIMPRESSION: No PE."
COHORT = [
    (1, None, "GENDER/F", None, None),
    (1, None, "RACE/Asian", None, None),
    (1, None, "PAYER/Medicare", None, None),
    (1, T(1960, 1, 2), "MEDS_BIRTH", None, None),
    (1, T(2020, 1, 1, 9), "VISIT/IP", None, None),
    (1, T(2020, 1, 1, 10), "LOINC/8867-4", 104.0, None),
    (1, T(2020, 1, 1, 10), "LOINC/2345-7", None, "positive"),
    (1, T(2020, 1, 2, 10), "RADIOLOGY//CT_CHEST//IMPRESSION", None, REPORT),
    (1, T(2020, 1, 3, 10), "HOSPITAL_DISCHARGE//HOME", None, None),
    (1, T(2021, 5, 1, 10), "ICD10CM/I10", None, None),
    (1, T(2021, 5, 1, 11), "RxNorm/197361", None, None),
    (2, None, "GENDER/M", None, None),
    (2, T(2019, 5, 1, 10), "LOINC/8867-4", 88.0, None),
]
CODES = {"LOINC/8867-4": "Heart rate", "VISIT/IP": "Inpatient Visit", "ICD10CM/I10": "Hypertension"}


def table(rows: list[tuple], schema: pa.Schema = MEDS_SCHEMA) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in schema]
    return pa.table(
        {f.name: pa.array(list(col), f.type) for f, col in zip(schema, columns, strict=True)},
        schema=schema,
    )


def write_meds(root: Path, shards: dict[str, pa.Table], codes: dict[str, str] = CODES) -> Path:
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "metadata").mkdir(exist_ok=True)
    for name, data in shards.items():
        (root / "data" / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(data, root / "data" / name)
    pq.write_table(
        pa.table(
            {
                "code": list(codes),
                "description": list(codes.values()),
                "parent_codes": pa.array([[] for _ in codes], pa.list_(pa.string())),
            }
        ),
        root / "metadata" / "codes.parquet",
    )
    return root


def refused(root: Path) -> str:
    with pytest.raises(ImportFailed) as failure:
        import_release(root, dataset_name="m")
    assert not Patient.objects.exists()
    assert not Event.objects.exists()
    return str(failure.value)


def test_it_imports_a_meds_cohort_as_patients_encounters_events_and_notes(tmp_path: Path) -> None:
    root = write_meds(tmp_path / "cohort", {"0.parquet": table(COHORT)})
    summary = import_release(root, dataset_name="m")

    assert summary.counts["patients"] == 2
    assert summary.counts["events"] == 9  # 13 rows, 4 of them static
    assert summary.counts["notes"] == 1
    assert summary.files == {"metadata/codes.parquet": "meds:codes", "data/0.parquet": "meds"}
    one = Patient.objects.get(person_id="1")
    assert (one.gender, one.race, one.birth_date) == ("FEMALE", "Asian", date(1960, 1, 2))
    assert one.demographics == {"PAYER/Medicare": "yes"}
    assert one.source_format == "meds"
    assert (one.event_count, one.note_count) == (8, 1)

    events = {e.code: e for e in Event.objects.filter(patient=one)}
    heart = events["LOINC/8867-4"]
    assert (heart.event_type, heart.name, heart.value, heart.value_numeric) == (
        "measurement",
        "Heart rate",
        "104",
        104.0,
    )
    assert events["LOINC/2345-7"].value == "positive"  # short text: a value, not a note
    note = events["RADIOLOGY//CT_CHEST//IMPRESSION"]
    assert (note.event_type, note.text) == ("note", REPORT)
    assert note.note_type == "CT_CHEST IMPRESSION"
    assert events["ICD10CM/I10"].event_type == "condition"
    assert events["RxNorm/197361"].event_type == "drug"
    assert events["MEDS_BIRTH"].encounter_id is None

    visit, day = Encounter.objects.filter(patient=one).order_by("ordinal")
    assert (visit.encounter_type, visit.start.day, visit.end.day) == ("Inpatient Visit", 1, 3)
    assert visit.event_count == 5  # the visit row, two labs, the report, the discharge
    assert (day.encounter_type, day.event_count) == ("day (no visit code)", 2)
    assert events["ICD10CM/I10"].encounter_id == day.pk


def test_instructions_keyed_by_subject_id_reach_the_meds_record(tmp_path: Path) -> None:
    write_meds(tmp_path, {"0.parquet": table(COHORT)})
    (tmp_path / "instructions.csv").write_text(
        'instruction_id,question,person_id\n501,"Any PE on the CT?",1\n'
    )
    import_release(tmp_path, dataset_name="m")
    assert Instruction.objects.get(instruction_id="501").patient == Patient.objects.get(
        person_id="1"
    )


def test_a_malformed_shard_is_refused_by_name_and_nothing_is_stored(tmp_path: Path) -> None:
    root = write_meds(tmp_path, {"0.parquet": table(COHORT)})
    (root / "data" / "1.parquet").write_bytes(b"PAR1 this is not parquet")
    message = refused(root)
    assert "data/1.parquet: not a readable Parquet file" in message
    assert "nothing was imported" in message


def test_a_wrong_schema_names_each_bad_column(tmp_path: Path) -> None:
    wrong = pa.schema([("subject_id", pa.string()), ("time", pa.timestamp("us"))])
    root = write_meds(tmp_path, {"0.parquet": table([("a", T(2020, 1, 1))], wrong)})
    message = refused(root)
    assert "data/0.parquet, field 'subject_id': has type string; MEDS wants int64" in message
    assert "data/0.parquet, field 'code': required MEDS column is missing" in message


def test_lossless_variants_of_the_schema_are_accepted(tmp_path: Path) -> None:
    loose = pa.schema(
        [
            ("subject_id", pa.int32()),
            ("time", pa.timestamp("ns")),
            ("code", pa.large_string()),
            ("numeric_value", pa.float64()),
            ("text_value", pa.string()),
            ("unit", pa.string()),
        ]
    )
    rows = [(7, T(2020, 1, 1), "LOINC/8867-4", 71.0, None, "/min")]
    import_release(write_meds(tmp_path, {"0.parquet": table(rows, loose)}), dataset_name="m")
    event = Event.objects.get()
    assert (event.value, event.unit, event.patient.person_id) == ("71", "/min", "7")


def test_events_before_birth_are_refused_naming_the_row(tmp_path: Path) -> None:
    rows = [
        (1, T(1950, 6, 1), "ICD10CM/I10", None, None),
        (1, T(1960, 1, 2), "MEDS_BIRTH", None, None),
    ]
    message = refused(write_meds(tmp_path, {"0.parquet": table(rows)}))
    assert (
        "data/0.parquet, row 1, field 'time': subject 1 has an event on 1950-06-01, "
        "before their birth on 1960-01-02 (MEDS_BIRTH, row 2)"
    ) in message


def test_duplicate_rows_are_skipped_and_counted(tmp_path: Path) -> None:
    rows = [
        (1, T(2020, 1, 1), "LOINC/8867-4", 104.0, None),
        (1, T(2020, 1, 1), "LOINC/2345-7", 5.5, None),
        (1, T(2020, 1, 1), "LOINC/8867-4", 104.0, None),  # not adjacent: still a duplicate
        (1, T(2020, 1, 1), "LOINC/8867-4", 99.0, None),  # another value: kept
    ]
    summary = import_release(write_meds(tmp_path, {"0.parquet": table(rows)}), dataset_name="m")
    assert summary.skipped["duplicate MEDS rows"] == 1
    assert Event.objects.count() == 3


def test_a_subject_split_across_shards_is_refused(tmp_path: Path) -> None:
    first = [(1, T(2020, 1, 1), "A/1", None, None), (2, T(2020, 1, 1), "A/1", None, None)]
    second = [(1, T(2021, 1, 1), "A/2", None, None)]
    root = write_meds(tmp_path, {"0.parquet": table(first), "1.parquet": table(second)})
    message = refused(root)
    assert "data/1.parquet, row 1, field 'subject_id': subject 1 appears again" in message


def test_rows_out_of_time_order_are_refused(tmp_path: Path) -> None:
    rows = [(1, T(2021, 1, 1), "A/1", None, None), (1, T(2020, 1, 1), "A/2", None, None)]
    message = refused(write_meds(tmp_path, {"0.parquet": table(rows)}))
    assert "row 2, field 'time': subject 1's rows are not sorted by time" in message


def test_empty_required_values_are_named_by_row(tmp_path: Path) -> None:
    schema = pa.schema(
        [("subject_id", pa.int64()), ("time", pa.timestamp("us")), ("code", pa.string())]
    )
    rows = [(1, T(2020, 1, 1), "A/1"), (None, T(2020, 1, 2), "A/1"), (1, T(2020, 1, 3), None)]
    message = refused(write_meds(tmp_path, {"0.parquet": table(rows, schema)}))
    assert "row 2, field 'subject_id': required value is empty" in message
    assert "row 3, field 'code': required value is empty" in message


def test_a_large_shard_is_read_in_record_batches_never_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 1-GB-class shard, scaled down: many record batches, each far smaller than the shard.
    monkeypatch.setattr(meds_module, "BATCH_ROWS", 500)
    monkeypatch.setattr(pq, "read_table", lambda *a, **k: pytest.fail("read a whole shard"))
    sizes: list[int] = []
    original = pq.ParquetFile.iter_batches

    def counting(self, *args, **kwargs):  # noqa: ANN001, ANN202
        for batch in original(self, *args, **kwargs):
            sizes.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", counting)
    path = tmp_path / "data" / "0.parquet"
    path.parent.mkdir(parents=True)
    with pq.ParquetWriter(path, MEDS_SCHEMA) as writer:
        for b in range(40):
            rows = [
                (100 + b // 10, T(2020, 1, 1 + b % 10, i // 60, i % 60), "LOINC/8867-4", i, None)
                for i in range(500)
            ]
            writer.write_table(table(rows), row_group_size=250)
    summary = import_release(tmp_path, dataset_name="m")
    assert summary.counts["events"] == 20_000
    assert summary.counts["patients"] == 4
    assert Event.objects.count() == 20_000
    assert len(sizes) >= 40
    assert max(sizes) <= 500


def test_reimporting_is_idempotent_and_replace_reloads(tmp_path: Path) -> None:
    root = write_meds(tmp_path, {"0.parquet": table(COHORT)})
    import_release(root, dataset_name="m")
    again = import_release(root, dataset_name="m")
    assert again.skipped["record already imported (use --replace)"] == 2
    assert Event.objects.count() == 9

    changed = [r for r in COHORT if r[2] != "RxNorm/197361"]
    write_meds(root, {"0.parquet": table(changed)})
    replaced = import_release(root, dataset_name="m", replace=True)
    assert replaced.counts["events"] == 8
    assert Event.objects.count() == 8
    assert Patient.objects.count() == 2
    assert Encounter.objects.count() == 3


def test_a_failed_meds_import_keeps_the_earlier_import(tmp_path: Path) -> None:
    root = write_meds(tmp_path, {"0.parquet": table(COHORT)})
    import_release(root, dataset_name="m")
    (root / "data" / "1.parquet").write_bytes(b"garbage")
    with pytest.raises(ImportFailed):
        import_release(root, dataset_name="m", replace=True)
    assert Event.objects.count() == 9


def test_the_command_reads_a_meds_folder_and_prints_a_summary(tmp_path: Path, capsys) -> None:
    root = write_meds(tmp_path, {"0.parquet": table(COHORT)})
    call_command("import_medalign", str(root), "--dataset", "m", "--no-progress")
    out = capsys.readouterr().out
    assert "meds" in out and "data/0.parquet" in out
    assert "patients" in out and "2" in out
    (root / "data" / "0.parquet").write_bytes(b"broken")
    with pytest.raises(CommandError, match="data/0.parquet: not a readable Parquet file"):
        call_command("import_medalign", str(root), "--dataset", "m2", "--no-progress")


def test_extension_columns_become_event_attributes(tmp_path: Path) -> None:
    schema = pa.schema([*MEDS_SCHEMA, ("visit_id", pa.int64()), ("tags", pa.list_(pa.string()))])
    row = (3, T(2020, 1, 1), "LOINC/8867-4", 90.0, None, 7, ["triage"])
    summary = import_release(
        write_meds(tmp_path, {"0.parquet": table([row, row], schema)}), dataset_name="m"
    )
    assert summary.skipped["duplicate MEDS rows"] == 1
    assert Event.objects.get().attributes == {"visit_id": "7", "tags": '["triage"]'}


def test_the_progress_bar_follows_every_byte_of_the_shards(tmp_path: Path) -> None:
    rows = [(3, T(2020, 1, 1, h), "LOINC/8867-4", float(h), None) for h in range(24)]
    root = write_meds(tmp_path, {"0.parquet": table(COHORT), "1.parquet": table(rows)})
    steps: list[int] = []
    import_release(root, dataset_name="m", progress=steps.append)
    files = [*(root / "data").glob("*.parquet"), root / "metadata" / "codes.parquet"]
    assert sum(steps) == sum(f.stat().st_size for f in files)
    assert min(steps) >= 0


def test_a_visits_end_column_closes_it_and_later_rows_fall_into_a_day(tmp_path: Path) -> None:
    schema = pa.schema([*MEDS_SCHEMA, ("unit", pa.string()), ("end", pa.timestamp("us"))])
    rows = [
        (4, T(2020, 1, 1, 8), "VISIT/ER", None, None, None, T(2020, 1, 1, 12)),
        (4, T(2020, 1, 1, 9), "LOINC/8867-4", float("nan"), None, "/min", None),
        (4, T(2020, 1, 1, 11), "LOINC/8867-4", 96.0, None, "/min", None),
        (4, T(2020, 1, 1, 13), "LOINC/8867-4", 90.0, None, "/min", None),
        (4, T(2020, 1, 1, 14), "ICD10CM/I10", None, None, None, None),
    ]
    import_release(write_meds(tmp_path, {"0.parquet": table(rows, schema)}), dataset_name="m")
    visit, day = Encounter.objects.order_by("ordinal")
    assert (visit.encounter_type, visit.event_count, visit.end.hour) == ("ER", 3, 12)
    assert (day.encounter_type, day.event_count, day.start.hour, day.end.hour) == (
        "day (no visit code)",
        2,
        13,
        14,
    )
    nan, ninety_six = Event.objects.filter(encounter=visit, code="LOINC/8867-4").order_by("seq")
    assert (nan.value, nan.value_numeric, nan.unit) == ("", None, "/min")
    assert (ninety_six.value, ninety_six.unit, ninety_six.seq) == ("96", "/min", 3)
    patient = Patient.objects.get()
    assert (patient.event_count, patient.first_event_at.hour, patient.last_event_at.hour) == (
        5,
        8,
        14,
    )


def test_a_failure_in_the_last_shard_leaves_nothing_of_the_earlier_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Many COPY batches and encounter writes have gone to the database before the problem.
    monkeypatch.setattr(meds_module, "BATCH_ROWS", 100)
    monkeypatch.setattr(meds_module, "EVENT_FLUSH_ROWS", 250)
    shards = {
        f"{s}.parquet": table(
            [
                (
                    10 * s + i // 100,
                    T(2020, 1, 1 + i % 100 // 10),
                    "VISIT/OP" if i % 10 == 0 else "LOINC/8867-4",
                    float(i),
                    None,
                )
                for i in range(1000)
            ]
        )
        for s in range(3)
    }
    shards["3.parquet"] = table(
        [(99, T(2020, 1, 2), "A/1", None, None), (99, T(2020, 1, 1), "A/2", None, None)]
    )
    message = refused(write_meds(tmp_path, shards))
    assert "data/3.parquet, row 2, field 'time'" in message
    assert not Encounter.objects.exists()


def test_naive_times_are_wall_clock_time_in_the_installations_zone(tmp_path: Path) -> None:
    """MEDS times without a zone are read in ``TIME_ZONE``: stored as the right instants, a
    visit-less day and the birth date taken in that zone (the importer carries times as naive
    UTC internally: an evening in New York is the next day in UTC)."""
    rows = [
        (7, T(1960, 1, 2, 20, 0), "MEDS_BIRTH", None, None),  # 01:00 UTC on 3 January
        (7, T(2020, 1, 1, 18, 30), "LOINC/8867-4", 90.0, None),  # 23:30 UTC
        (7, T(2020, 1, 1, 19, 30), "LOINC/8867-4", 95.0, None),  # 00:30 UTC, next UTC day
        (7, T(2020, 1, 2, 8, 0), "LOINC/8867-4", 99.0, None),
    ]
    root = write_meds(tmp_path / "cohort", {"0.parquet": table(rows)})
    zone = ZoneInfo("America/New_York")
    with override_settings(TIME_ZONE="America/New_York"):
        import_release(root, dataset_name="m")
    patient = Patient.objects.get(person_id="7")
    assert patient.birth_date == date(1960, 1, 2)
    heart = list(Event.objects.filter(patient=patient, code="LOINC/8867-4").order_by("seq"))
    assert [e.timestamp for e in heart] == [
        T(2020, 1, 1, 18, 30, tzinfo=zone),
        T(2020, 1, 1, 19, 30, tzinfo=zone),
        T(2020, 1, 2, 8, 0, tzinfo=zone),
    ]
    # One "day" encounter for 1 January in New York, another for the 2nd.
    assert heart[0].encounter_id == heart[1].encounter_id != heart[2].encounter_id
    day = Encounter.objects.get(pk=heart[0].encounter_id)
    assert (day.start, day.end) == (heart[0].timestamp, heart[1].timestamp)
    assert Event.objects.get(code="MEDS_BIRTH").timestamp == T(1960, 1, 2, 20, 0, tzinfo=zone)
    # The record's span is its clinical events: it starts at the first one, not at birth.
    assert patient.first_event_at == heart[0].timestamp
    assert patient.last_event_at == heart[2].timestamp


def test_new_patients_are_written_in_batches_not_one_statement_each(tmp_path: Path) -> None:
    """Each subject once cost an INSERT and an UPDATE of its patient (a quarter of a cohort's
    import time at 1,000 events a subject): new patients are now written final, 500 a
    statement, with the ids their events already point at."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    rows = [
        (sid, T(2020, 1, 1, 9) + timedelta(hours=k), "LOINC/8867-4", float(k), None)
        for sid in range(1, 601)
        for k in range(2)
    ]
    root = write_meds(tmp_path / "cohort", {"0.parquet": table(rows)})
    with CaptureQueriesContext(connection) as queries:
        summary = import_release(root, dataset_name="m")
    patient_writes = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE"))
        and '"review_patient"' in q["sql"]
    ]
    assert summary.counts["patients"] == 600
    # 2 on PostgreSQL; SQLite caps the parameters a statement may hold (10 here). Was 1,200.
    assert len(patient_writes) <= 12, len(patient_writes)
    patient = Patient.objects.get(person_id="600")
    assert (patient.event_count, patient.source_format) == (2, "meds")
    assert patient.last_event_at == T(2020, 1, 1, 10, tzinfo=UTC)
    assert Event.objects.filter(patient=patient).count() == 2
    assert set(Encounter.objects.values_list("patient__person_id", flat=True)) == {
        str(i) for i in range(1, 601)
    }
