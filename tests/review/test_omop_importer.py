"""OMOP CDM importer: CSV and Parquet tables the tests write themselves, good and bad."""

import csv
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from review.importers import ImportFailed, import_release
from review.importers import omop as omop_module
from review.models import Encounter, Event, Instruction, Patient

pytestmark = pytest.mark.django_db

PERSON = (
    ["person_id", "gender_concept_id", "year_of_birth", "month_of_birth", "day_of_birth"]
    + ["birth_datetime", "race_concept_id", "ethnicity_concept_id", "gender_source_value"],
    [[11, 8507, 1950, 3, 4, "", 0, 0, "M"], [12, 8532, 1980, "", "", "1980-05-06", 0, 0, "F"]],
)
CONCEPT = (
    ["concept_id", "concept_name", "domain_id", "vocabulary_id", "concept_code"],
    [
        [8507, "MALE", "Gender", "Gender", "M"],
        [8532, "FEMALE", "Gender", "Gender", "F"],
        [3027018, "Heart rate", "Measurement", "LOINC", "8867-4"],
        [9201, "Inpatient Visit", "Visit", "Visit", "IP"],
        [9202, "Outpatient Visit", "Visit", "Visit", "OP"],
        [8541, "per minute", "Unit", "UCUM", "/min"],
        [201826, "Type 2 diabetes mellitus", "Condition", "SNOMED", "44054006"],
        [1503297, "metformin", "Drug", "RxNorm", "6809"],
    ],
)
VISITS = (
    ["visit_occurrence_id", "person_id", "visit_concept_id", "visit_start_date"]
    + ["visit_start_datetime", "visit_end_date"],
    # Out of order on purpose: ordinals follow start time, not file order.
    [
        [5, 11, 9201, "2020-01-01", "2020-01-01 08:00:00", "2020-01-03"],
        [4, 11, 9202, "2019-01-01", "", ""],
    ],
)
MEASUREMENT_HEADER = [
    "measurement_id",
    "person_id",
    "measurement_concept_id",
    "measurement_date",
    "measurement_datetime",
    "value_as_number",
    "unit_concept_id",
    "visit_occurrence_id",
    "measurement_source_value",
]
MEASUREMENTS = (
    MEASUREMENT_HEADER,
    [
        [1, 11, 3027018, "2020-01-01", "2020-01-01 09:00:00", "104", 8541, 5, "HR"],
        [2, 12, 0, "2021-01-01", "", "7.5", "", "", "A1C local"],
    ],
)
CONDITIONS = (
    ["condition_occurrence_id", "person_id", "condition_concept_id", "condition_start_date"]
    + ["visit_occurrence_id"],
    [[1, 11, 201826, "2019-01-01", 4]],
)
DRUGS = (
    ["drug_exposure_id", "person_id", "drug_concept_id", "drug_exposure_start_date"],
    [[1, 11, 1503297, "2019-01-02"]],
)
REPORT = "FINDINGS: clear lungs.\nIMPRESSION: no pulmonary embolism."
NOTES = (
    ["note_id", "person_id", "note_date", "note_datetime", "note_type_concept_id"]
    + ["note_class_concept_id", "note_title", "note_text"],
    [[1, 12, "2021-02-02", "", 0, 0, "CT angiogram chest", REPORT]],
)
TABLES = {
    "person": PERSON,
    "concept": CONCEPT,
    "visit_occurrence": VISITS,
    "measurement": MEASUREMENTS,
    "condition_occurrence": CONDITIONS,
    "drug_exposure": DRUGS,
    "note": NOTES,
}


def write_csv(folder: Path, name: str, header: list, rows: list) -> None:
    with (folder / f"{name}.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


def write_omop(folder: Path, **overrides: tuple[list, list] | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in {**TABLES, **overrides}.items():
        if content is not None:
            write_csv(folder, name, *content)
    return folder


def refused(folder: Path) -> str:
    with pytest.raises(ImportFailed) as failure:
        import_release(folder, dataset_name="o")
    assert not Patient.objects.exists()
    assert not Event.objects.exists()
    return str(failure.value)


def test_it_imports_omop_tables_with_concept_names_visits_and_notes(tmp_path: Path) -> None:
    summary = import_release(write_omop(tmp_path), dataset_name="o")

    assert summary.counts["patients"] == 2
    assert summary.counts["events"] == 5
    assert summary.counts["encounters"] == 2
    assert summary.files["person.csv"] == "omop:person"
    eleven = Patient.objects.get(person_id="11")
    assert (eleven.gender, eleven.birth_date, eleven.source_format) == (
        "MALE",
        date(1950, 3, 4),
        "omop",
    )
    assert Patient.objects.get(person_id="12").birth_date == date(1980, 5, 6)

    heart = Event.objects.get(code="LOINC/8867-4")
    assert (heart.event_type, heart.name, heart.value, heart.unit) == (
        "measurement",
        "Heart rate",
        "104",
        "/min",
    )
    assert heart.attributes == {"source_value": "HR"}
    unmapped = Event.objects.get(patient__person_id="12", event_type="measurement")
    assert (unmapped.code, unmapped.name, unmapped.value) == ("", "A1C local", "7.5")
    assert Event.objects.get(event_type="drug").name == "metformin"
    note = Event.objects.get(event_type="note")
    assert (note.note_type, note.text) == ("CT angiogram chest", REPORT)

    outpatient, inpatient = Encounter.objects.filter(patient=eleven).order_by("ordinal")
    assert (outpatient.encounter_type, inpatient.encounter_type) == (
        "Outpatient Visit",
        "Inpatient Visit",
    )
    assert heart.encounter_id == inpatient.pk
    assert Event.objects.get(event_type="condition").encounter_id == outpatient.pk
    assert (inpatient.event_count, outpatient.event_count) == (1, 1)
    assert inpatient.end.date() == date(2020, 1, 3)
    # The patients' tallies, written in one statement at the end: counts, first and last event
    # as the same instants the events hold, demographics without observation periods empty.
    timed = Event.objects.filter(patient=eleven).order_by("timestamp")
    assert (eleven.event_count, eleven.note_count) == (
        timed.count(),
        timed.filter(event_type="note").count(),
    )
    assert Patient.objects.get(person_id="12").note_count == 1
    assert (eleven.first_event_at, eleven.last_event_at) == (
        timed.first().timestamp,
        timed.last().timestamp,
    )
    assert eleven.demographics == {}


def test_without_a_concept_table_codes_keep_their_concept_ids(tmp_path: Path) -> None:
    import_release(write_omop(tmp_path, concept=None), dataset_name="o")
    heart = Event.objects.get(patient__person_id="11", event_type="measurement")
    assert (heart.code, heart.name, heart.unit) == ("CONCEPT/3027018", "HR", "")


def test_an_unknown_concept_id_falls_back_to_the_source_value_and_is_counted(
    tmp_path: Path,
) -> None:
    # A gap in the vocabulary export, not in the record: kept, named, counted.
    rows = [[1, 11, 999999, "2020-01-01", "", "1", "", "", "X"]]
    summary = import_release(
        write_omop(tmp_path, measurement=(MEASUREMENT_HEADER, rows)), dataset_name="o"
    )
    event = Event.objects.get(event_type="measurement")
    assert (event.code, event.name, event.value) == ("CONCEPT/999999", "X", "1")
    assert (
        summary.sources["measurement"]["read"],
        summary.sources["measurement"]["fell back"],
    ) == (0, 1)
    assert (
        "measurement_concept_id: concept(s) not in the concept table, shown by source value: 999999"
    ) in summary.warnings


def test_events_before_birth_are_refused(tmp_path: Path) -> None:
    rows = [[1, 11, 3027018, "1949-12-31", "", "1", "", "", "HR"]]
    message = refused(write_omop(tmp_path, measurement=(MEASUREMENT_HEADER, rows)))
    assert (
        "measurement.csv, row 1, field 'measurement_date': event on 1949-12-31 is before "
        "person 11's birth on 1950-03-04"
    ) in message


def test_duplicate_rows_are_refused_naming_both_rows(tmp_path: Path) -> None:
    rows = [MEASUREMENTS[1][0], MEASUREMENTS[1][1], MEASUREMENTS[1][0]]
    message = refused(write_omop(tmp_path, measurement=(MEASUREMENT_HEADER, rows)))
    assert (
        "measurement.csv, row 3, field 'measurement_id': measurement_id 1 appears again "
        "(first at row 1)"
    ) in message


def test_a_duplicate_person_is_refused(tmp_path: Path) -> None:
    message = refused(write_omop(tmp_path, person=(PERSON[0], [*PERSON[1], PERSON[1][0]])))
    assert "person.csv, row 3, field 'person_id': person 11 appears twice" in message


def test_an_event_for_an_unknown_person_or_visit_is_refused(tmp_path: Path) -> None:
    rows = [
        [1, 99, 3027018, "2020-01-01", "", "1", "", "", "HR"],
        [2, 11, 3027018, "2020-01-01", "", "1", "", 77, "HR"],
        [3, 12, 3027018, "2020-01-01", "", "1", "", 5, "HR"],
    ]
    message = refused(write_omop(tmp_path, measurement=(MEASUREMENT_HEADER, rows)))
    assert "row 1, field 'person_id': person 99 is not in the person table" in message
    assert "row 2, field 'visit_occurrence_id': visit 77 is not in the table" in message
    assert "row 3, field 'visit_occurrence_id': visit 5 belongs to another person" in message


def test_bad_values_and_missing_columns_are_named(tmp_path: Path) -> None:
    rows = [[1, 11, 3027018, "31/31/2020", "", "lots", "", "", "HR"]]
    message = refused(
        write_omop(
            tmp_path,
            measurement=(MEASUREMENT_HEADER, rows),
            drug_exposure=(["drug_exposure_id", "person_id"], [[1, 11]]),
        )
    )
    assert "measurement.csv, row 1, field 'measurement_date': unparseable timestamp" in message
    assert "drug_exposure.csv, field 'drug_exposure_start_date': required column" in message


def test_tables_without_a_person_table_are_refused(tmp_path: Path) -> None:
    message = refused(write_omop(tmp_path, person=None))
    assert "OMOP tables need the person table" in message


def test_parquet_tables_are_read_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(omop_module, "BATCH_ROWS", 100)
    write_omop(tmp_path, measurement=None)
    pq.write_table(
        pa.table(
            {
                "measurement_id": pa.array(range(1, 1001), pa.int64()),
                "person_id": pa.array([11] * 1000, pa.int64()),
                "measurement_concept_id": pa.array([3027018] * 1000, pa.int32()),
                "measurement_date": pa.array([date(2020, 1, 1)] * 1000, pa.date32()),
                "value_as_number": pa.array([float(i) for i in range(1000)]),
            }
        ),
        tmp_path / "measurement.parquet",
        row_group_size=100,
    )
    summary = import_release(tmp_path, dataset_name="o")
    assert summary.files["measurement.parquet"] == "omop:measurement"
    assert Event.objects.filter(code="LOINC/8867-4").count() == 1000
    assert Patient.objects.get(person_id="11").event_count == 1002


def test_instructions_keyed_by_person_id_reach_the_omop_record(tmp_path: Path) -> None:
    write_omop(tmp_path)
    (tmp_path / "instructions.csv").write_text(
        'instruction_id,question,person_id\n601,"Was a PE found?",12\n'
    )
    import_release(tmp_path, dataset_name="o")
    assert Instruction.objects.get().patient == Patient.objects.get(person_id="12")


def test_reimporting_is_idempotent_and_replace_reloads(tmp_path: Path) -> None:
    write_omop(tmp_path)
    import_release(tmp_path, dataset_name="o")
    again = import_release(tmp_path, dataset_name="o")
    assert again.skipped["record already imported (use --replace)"] == 2
    assert Event.objects.count() == 5
    write_omop(tmp_path, drug_exposure=None)
    (tmp_path / "drug_exposure.csv").unlink()
    import_release(tmp_path, dataset_name="o", replace=True)
    assert Event.objects.count() == 4
    assert Encounter.objects.count() == 2
    assert Patient.objects.get(person_id="11").event_count == 2


def test_csv_tables_are_read_in_blocks_and_rows_keep_their_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(omop_module, "CSV_BLOCK_BYTES", 4096)
    blocks: list[int] = []
    original = omop_module.iter_batches

    def counting(path: Path):  # noqa: ANN202
        for batch in original(path):
            blocks.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(omop_module, "iter_batches", counting)
    rows = [[i, 11, 3027018, "2020-01-01", "", str(i), "", "", "HR"] for i in range(1, 601)]
    rows[449][3] = "not a date"
    message = refused(write_omop(tmp_path, measurement=(MEASUREMENT_HEADER, rows)))
    assert "measurement.csv, row 450, field 'measurement_date': unparseable timestamp" in message
    assert len(blocks) > 5


def test_the_progress_bar_follows_every_byte_of_the_tables(tmp_path: Path) -> None:
    write_omop(tmp_path)
    steps: list[int] = []
    import_release(tmp_path, dataset_name="o", progress=steps.append)
    assert sum(steps) == sum(f.stat().st_size for f in tmp_path.glob("*.csv"))
    assert min(steps) >= 0


def scratch_tables() -> list[str]:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname LIKE 'pg_temp%%' "
                "AND tablename LIKE 'omop_import_%%'"
            )
        else:
            cursor.execute(
                "SELECT name FROM sqlite_temp_master WHERE type = 'table' "
                "AND name LIKE 'omop_import_%'"
            )
        return [row[0] for row in cursor.fetchall()]


def test_a_duplicate_visit_is_refused_naming_its_row(tmp_path: Path) -> None:
    visits = (VISITS[0], [*VISITS[1], [5, 11, 9202, "2021-01-01", "", ""]])
    message = refused(write_omop(tmp_path, visit_occurrence=visits))
    assert "visit_occurrence.csv, row 3, field 'visit_occurrence_id': visit 5 appears twice" in (
        message
    )


def test_an_unknown_unit_or_value_concept_falls_back_and_is_counted(tmp_path: Path) -> None:
    header = [*MEASUREMENT_HEADER, "value_as_concept_id", "value_source_value"]
    rows = [
        [1, 11, 3027018, "2020-01-01", "", "1", 777, "", "HR", "", ""],
        [2, 11, 3027018, "2020-01-01", "", "", "", "", "HR", 888, "trace"],
    ]
    summary = import_release(write_omop(tmp_path, measurement=(header, rows)), dataset_name="o")
    first, second = Event.objects.filter(event_type="measurement").order_by("seq")
    assert (first.value, first.unit) == ("1", "")
    assert second.value == "trace"  # the value concept's name is missing: the source value
    assert (
        summary.sources["measurement"]["read"],
        summary.sources["measurement"]["fell back"],
    ) == (0, 2)
    assert set(summary.warnings) == {
        "unit_concept_id: concept(s) not in the concept table, shown by source value: 777",
        "value_as_concept_id: concept(s) not in the concept table, shown by source value: 888",
    }


def test_concepts_and_visits_are_looked_up_batch_by_batch_from_the_scratch_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small CSV blocks and a one-entry concept cache: every batch asks the temporary tables
    # for its own concepts and visits, and visits of earlier batches are still found.
    monkeypatch.setattr(omop_module, "CSV_BLOCK_BYTES", 2048)
    monkeypatch.setattr(omop_module, "CONCEPT_CACHE_MAX", 1)
    visits = [
        [v, 11, 9201 if v % 2 else 9202, f"2020-{1 + v % 12:02d}-01", "", ""] for v in range(1, 301)
    ]
    rows = [
        [i, 11, 3027018 if i % 3 else 201826, "2020-06-01", "", str(i), 8541, 1 + i % 300, "x"]
        for i in range(1, 1201)
    ]
    summary = import_release(
        write_omop(
            tmp_path, visit_occurrence=(VISITS[0], visits), measurement=(MEASUREMENT_HEADER, rows)
        ),
        dataset_name="o",
    )
    assert summary.counts["encounters"] == 300
    assert Event.objects.filter(code="LOINC/8867-4", unit="/min").count() == 800
    assert (
        Event.objects.filter(
            event_type="measurement", code="SNOMED/44054006", name="Type 2 diabetes mellitus"
        ).count()
        == 400
    )
    eleven = Patient.objects.get(person_id="11")
    encounters = list(Encounter.objects.filter(patient=eleven).order_by("ordinal"))
    assert [e.ordinal for e in encounters] == list(range(1, 301))
    starts = [e.start for e in encounters]
    assert starts == sorted(starts)  # numbered by start, not by file order
    assert sum(e.event_count for e in encounters) == 1200 + 1  # + the condition in visit 4
    assert scratch_tables() == []


def test_ids_read_as_text_with_decimals_nulls_and_zoned_times_are_parsed(tmp_path: Path) -> None:
    rows = [
        ["1.0", "11", "3027018.0", "2020-01-01", "2020-01-01T09:00:00+02:00", "NULL", "", "", "HR"],
        ["2", "11", "3027018", "2020-01-02", "", "NA", "", "", "HR"],
        ["3", "12", "3027018", "03/04/2021", "", " 7.25 ", "", "", "HR"],
    ]
    import_release(write_omop(tmp_path, measurement=(MEASUREMENT_HEADER, rows)), dataset_name="o")
    heart = Event.objects.filter(code="LOINC/8867-4").order_by("patient__person_id", "timestamp")
    first, second, third = heart
    assert first.timestamp.isoformat() == "2020-01-01T07:00:00+00:00"
    assert (first.value, first.value_numeric) == ("", None)
    assert second.timestamp.date() == date(2020, 1, 2)  # no datetime: its date
    assert (third.timestamp.date(), third.value, third.value_numeric) == (
        date(2021, 3, 4),
        "7.25",
        7.25,
    )


def test_a_problem_late_in_the_last_table_leaves_the_earlier_import_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(omop_module, "CSV_BLOCK_BYTES", 2048)
    write_omop(tmp_path)
    import_release(tmp_path, dataset_name="o")
    before = (
        sorted(Event.objects.values_list("code", "timestamp", "encounter__ordinal")),
        sorted(Encounter.objects.values_list("patient__person_id", "ordinal", "event_count")),
        sorted(Patient.objects.values_list("person_id", "event_count", "note_count")),
    )
    rows = [[i, 11, 3027018, "2020-01-01", "", str(i), "", 5, "HR"] for i in range(1, 2001)]
    notes = [
        *NOTES[1],
        [2, 12, "2021-02-03", "", 0, 0, "CT", "ok"],
        [3, 12, "not a date", "", 0, 0, "CT", "x"],
    ]
    write_omop(tmp_path, measurement=(MEASUREMENT_HEADER, rows), note=(NOTES[0], notes))
    with pytest.raises(ImportFailed, match="note.csv, row 3, field 'note_date'"):
        import_release(tmp_path, dataset_name="o", replace=True)
    after = (
        sorted(Event.objects.values_list("code", "timestamp", "encounter__ordinal")),
        sorted(Encounter.objects.values_list("patient__person_id", "ordinal", "event_count")),
        sorted(Patient.objects.values_list("person_id", "event_count", "note_count")),
    )
    assert after == before
    assert scratch_tables() == []


def test_replace_renumbers_visits_and_recounts_their_events(tmp_path: Path) -> None:
    write_omop(tmp_path)
    import_release(tmp_path, dataset_name="o")
    visits = (VISITS[0], [*VISITS[1], [6, 11, 9202, "2018-01-01", "", ""]])
    conditions = (
        CONDITIONS[0],
        [[1, 11, 201826, "2019-01-01", 4], [2, 11, 201826, "2018-01-01", 6]],
    )
    write_omop(tmp_path, visit_occurrence=visits, condition_occurrence=conditions)
    summary = import_release(tmp_path, dataset_name="o", replace=True)
    assert summary.counts["encounters"] == 3
    eleven = Patient.objects.get(person_id="11")
    assert list(
        Encounter.objects.filter(patient=eleven)
        .order_by("ordinal")
        .values_list("ordinal", "start__year", "event_count")
    ) == [(1, 2018, 1), (2, 2019, 1), (3, 2020, 1)]
    assert eleven.event_count == 4
    assert Encounter.objects.count() == 3


def test_reading_a_csv_table_holds_a_few_blocks_whatever_the_file_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Arrow's streaming CSV reader reads up to 32 blocks ahead on a background thread, even
    # with use_threads=False: with 1 MB blocks a 60 MB table held ~40 MB of Arrow memory, a
    # 6 MB one ~10 MB. The importer's memory must not follow the file's size.
    block = 64 * 1024
    monkeypatch.setattr(omop_module, "CSV_BLOCK_BYTES", block)
    rows = [
        [i, 11, 3027018, "2020-01-01", "2020-01-01 09:00:00", str(i % 97), 8541, "", "HR"]
        for i in range(1, 80_001)
    ]
    write_csv(tmp_path, "measurement", MEASUREMENT_HEADER, rows)
    path = tmp_path / "measurement.csv"
    assert path.stat().st_size > 60 * block
    for _ in omop_module.iter_batches(path):
        pass  # once first, so that Arrow's own code is paged in before the count below

    # Arrow's allocations while reading, counted apart; kept for the whole session, since
    # freeing a pool that a buffer still points to crashes the process.
    pool = pa.proxy_memory_pool(pa.system_memory_pool())
    POOLS.append(pool)
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    file_pages = resident_file_kb()
    try:
        ids: list[int] = []
        batches = 0
        most_file_pages = 0
        for batch in omop_module.iter_batches(path):
            ids.extend(int(v) for v in batch.column("measurement_id").to_pylist())
            batches += 1
            most_file_pages = max(most_file_pages, resident_file_kb() - file_pages)
        del batch
    finally:
        pa.set_memory_pool(previous)
    assert ids == list(range(1, 80_001))
    assert batches > 30  # still about a block per batch
    assert pool.max_memory() < 8 * block  # no copies read ahead
    assert most_file_pages * 1024 < 8 * block  # and the file's parsed pages given back


POOLS: list[pa.MemoryPool] = []


def resident_file_kb() -> int:
    """File-backed pages mapped in this process (Linux: /proc/self/status RssFile)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    pytest.skip("no RssFile in /proc/self/status")


def test_a_note_longer_than_a_block_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rows that straddle two blocks, the first one among them.
    monkeypatch.setattr(omop_module, "CSV_BLOCK_BYTES", 4096)
    long_text = "IMPRESSION:" + " no acute process;" * 200  # 3.6 KB: straddles, at most two
    notes = [[1, 12, "2021-02-02", "", 0, 0, "Discharge", long_text]]
    notes += [[2 + i, 12, "2021-02-04", "", 0, 0, "CT", "ok"] for i in range(500)]
    notes += [[600, 12, "2021-02-05", "", 0, 0, "Discharge 2", long_text]]
    import_release(write_omop(tmp_path, note=(NOTES[0], notes)), dataset_name="o")
    assert Event.objects.get(note_type="Discharge").text == long_text
    assert Event.objects.get(note_type="Discharge 2").text == long_text
    assert Event.objects.filter(event_type="note").count() == 502


def test_an_empty_table_file_is_named(tmp_path: Path) -> None:
    write_omop(tmp_path)
    (tmp_path / "drug_exposure.csv").write_text("")
    assert "drug_exposure.csv" in refused(tmp_path)


def test_the_import_gives_back_arrows_default_allocator_even_when_refused(tmp_path: Path) -> None:
    before = pa.default_memory_pool().backend_name
    refused(write_omop(tmp_path / "bad", person=(PERSON[0], [*PERSON[1], PERSON[1][0]])))
    assert pa.default_memory_pool().backend_name == before
    import_release(write_omop(tmp_path / "good"), dataset_name="o")
    assert pa.default_memory_pool().backend_name == before


def test_a_small_cohort_takes_a_few_statements_not_one_per_person_or_scratch_table(
    tmp_path: Path,
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    persons = [[100 + i, 8507, 1950, 1, 1, "", 0, 0, "M"] for i in range(50)]
    folder = write_omop(tmp_path, person=(PERSON[0], [*PERSON[1], *persons]))
    with CaptureQueriesContext(connection) as queries:
        summary = import_release(folder, dataset_name="o")
    assert summary.counts["patients"] == 52
    statements = [q["sql"] for q in queries.captured_queries]
    # Patients of a batch go in together; their tallies are one UPDATE at the end.
    assert sum('INSERT INTO "review_patient"' in s for s in statements) == 1
    # Tables this small are scanned, not indexed (an index and ANALYZE per table cost more).
    assert not [s for s in statements if "CREATE INDEX" in s]
    if connection.vendor == "postgresql":
        # The scratch tables are made in one round trip and dropped in another.
        scratch = [s for s in statements if "omop_import_" in s and ("CREATE" in s or "DROP" in s)]
        assert len(scratch) == 2
        assert len(statements) < 35  # 101 when every person and scratch table took its own
    # An event table read in one batch is checked for duplicate ids in memory.
    assert not [
        s for s in statements if "omop_import_key" in s and not s.startswith(("CREATE", "DROP"))
    ]


def test_duplicate_ids_in_different_batches_are_refused_naming_both_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(omop_module, "CSV_BLOCK_BYTES", 2048)
    rows = [[i, 11, 3027018, "2020-01-01", "", str(i), "", "", "HR"] for i in range(1, 301)]
    rows.append([7, 11, 3027018, "2020-01-02", "", "1", "", "", "HR"])
    message = refused(write_omop(tmp_path, measurement=(MEASUREMENT_HEADER, rows)))
    assert (
        "measurement.csv, row 301, field 'measurement_id': measurement_id 7 appears again "
        "(first at row 7)"
    ) in message


def _key_statements(queries: Any) -> list[str]:
    return [
        q["sql"]
        for q in queries.captured_queries
        if "omop_import_key" in q["sql"] and not q["sql"].startswith(("CREATE", "DROP"))
    ]


@pytest.mark.parametrize("held", [100_000, 120])
def test_keys_of_a_table_read_in_many_batches_are_checked_in_memory_up_to_a_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: int
) -> None:
    """The scratch table's COPY, aggregate and DELETE cost PostgreSQL about a second per
    million keys; held in memory (12 bytes a key) up to ``HELD_KEYS_MAX`` they cost NumPy
    milliseconds. Beyond the cap they go to the scratch table, so memory stays bounded."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    monkeypatch.setattr(omop_module, "CSV_BLOCK_BYTES", 2048)
    monkeypatch.setattr(omop_module, "HELD_KEYS_MAX", held)
    rows = [[i, 11, 3027018, "2020-01-01", "", str(i), "", "", "HR"] for i in range(1, 301)]
    rows.append([7, 11, 3027018, "2020-01-02", "", "1", "", "", "HR"])
    rows.append([300, 11, 3027018, "2020-01-02", "", "1", "", "", "HR"])
    with CaptureQueriesContext(connection) as queries:
        message = refused(write_omop(tmp_path, measurement=(MEASUREMENT_HEADER, rows)))
    assert "row 301, field 'measurement_id': measurement_id 7 appears again (first at row 7)" in (
        message
    )
    assert "row 302, field 'measurement_id': measurement_id 300 appears again" in message
    if held > len(rows):
        assert not _key_statements(queries)
    else:
        assert _key_statements(queries)  # spilled to the scratch table past the cap


def test_a_table_that_cannot_be_memory_mapped_is_read_as_a_plain_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("mmap not supported here")  # e.g. some network file systems

    monkeypatch.setattr(omop_module.mmap, "mmap", refuse)
    summary = import_release(write_omop(tmp_path), dataset_name="o")
    assert summary.counts["events"] == 5


def test_the_vocabulary_synonyms_of_the_codes_used_are_stored_and_searched(
    tmp_path: Path,
) -> None:
    from review.models import EventNameSynonym
    from review.selectors.records import record_search_page

    synonyms = (
        ["concept_id", "concept_synonym_name", "language_concept_id"],
        [
            [3027018, "Pulse rate", 4180186],
            [3027018, "Heart rate", 4180186],  # the name itself: no synonym
            [3027018, "Fréquence cardiaque", 4180190],  # not English
            [9999999, "Unused concept synonym", 4180186],  # no event uses it
            [201826, "T2DM", ""],
        ],
    )
    import_release(write_omop(tmp_path, concept_synonym=synonyms), dataset_name="o")
    stored = sorted(EventNameSynonym.objects.values_list("name", "synonym"))
    assert stored == [("Heart rate", "Pulse rate"), ("Type 2 diabetes mellitus", "T2DM")]
    eleven = Patient.objects.get(person_id="11")
    _, page = record_search_page(eleven, query="pulse")
    assert [row.name for row in page.rows] == ["Heart rate"]


def test_without_a_concept_synonym_table_nothing_is_stored(tmp_path: Path) -> None:
    from review.models import EventNameSynonym

    import_release(write_omop(tmp_path), dataset_name="o")
    assert not EventNameSynonym.objects.exists()


def test_the_audit_record_of_an_import_keeps_what_each_table_read_fell_back_and_ignored(
    tmp_path: Path,
) -> None:
    """A data manager answering for the DUA reads the audit log, not a terminal's scrollback:
    the per-table summary goes into the import's audit record, bounded."""
    from review.models import AuditEvent
    from review.services.imports import dataset_import

    rows = [[1, 11, 999999, "2020-01-01", "", "1", "", "", "X"]]
    dataset_import(
        path=write_omop(tmp_path, measurement=(MEASUREMENT_HEADER, rows)), dataset_name="o"
    )
    details = AuditEvent.objects.get(action=AuditEvent.Action.DATA_IMPORTED).details
    assert details["sources"]["measurement"] == {"read": 0, "fell back": 1}
    assert details["sources"]["person"]["read"] == 2
    assert any("999999" in w for w in details["warnings"])
    assert details["counts"]["events"] == Event.objects.count()


def test_the_audit_record_keeps_the_largest_entries_and_sums_the_rest() -> None:
    from review.services.imports import AUDIT_ENTRIES, _largest

    families = {f"VOCAB{i}": {"read": i} for i in range(AUDIT_ENTRIES + 50)}
    kept = _largest(families, key=lambda counts: sum(counts.values()))
    assert len(kept) == AUDIT_ENTRIES + 1
    assert f"VOCAB{AUDIT_ENTRIES + 49}" in kept and "VOCAB0" not in kept
    assert kept["(others)"] == {"entries": 50, "rows": sum(range(50))}
    assert _largest({"a": 1}, key=int) == {"a": 1}


def test_repeated_keys_held_in_memory_are_found_across_chunks_in_row_order() -> None:
    ids = pa.chunked_array([pa.array([5, 9, 2], pa.int64()), pa.array([7, 9, 5], pa.int64())])
    rows = pa.chunked_array([pa.array([1, 2, 3], pa.int32()), pa.array([4, 5, 6], pa.int32())])
    assert omop_module._repeats(ids, rows) == [(9, 2, 5), (5, 1, 6)]
    unique = pa.chunked_array([pa.array([3, 1], pa.int64()), pa.array([2], pa.int64())])
    assert omop_module._repeats(unique, rows) == []
    empty = pa.chunked_array([], pa.int64())
    assert omop_module._repeats(empty, pa.chunked_array([], pa.int32())) == []


# Text columns as CSV gives them: clean values, blanks, NULL words in any case, padding, a
# spreadsheet's "8507.0", and values no parser takes.
CELLS = {
    "int": ["8507", "", " 12 ", "NULL", "null", "Na", "NaN", "-3", "007", "8507.0", "x1"],
    "float": ["1.5", "", " 2 ", "NULL", "nan", "NaN", "inf", "-0.0", "1e3", "NA", "abc"],
    "time": ["2015-01-02", "2015-01-02 08:30:00", "", " 2015-01-03", "NULL", "01/02/2015"],
}


@pytest.mark.parametrize("kind", sorted(CELLS))
@pytest.mark.parametrize("pick", range(24))
def test_a_columns_values_are_the_same_whether_it_casts_straight_or_the_careful_way(
    kind: str, pick: int
) -> None:
    """Columns whose every value is clean are cast straight (the common case, a sixth of the
    work); any other goes through trimming and NULL words. Both must read the same values and
    name the same problems, whatever mix a column holds."""
    import random

    rng = random.Random(pick)
    cells = CELLS[kind]
    # Clean values alone (the straight cast), or with one or two other kinds of cell.
    pool = [cells[0], *rng.sample(cells[1:], k=pick % 3)]
    values = [rng.choice(pool) for _ in range(40)]
    batch = pa.RecordBatch.from_pydict({"c": pa.array(values, pa.string())})

    def read(straight: bool) -> tuple[list[Any], list[tuple[int, str, str]]]:
        columns = omop_module._Columns(batch, offset=0)
        if not straight:
            columns._straight = lambda column, target: None  # type: ignore[method-assign]
        method = {"int": columns.ints, "float": columns.floats, "time": columns.times}[kind]
        return method("c"), columns.problems

    assert read(straight=True) == read(straight=False)
