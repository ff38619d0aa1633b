"""The importers' path to PostgreSQL: events by binary COPY and, for a large import, the event
table's indexes and foreign keys built once. Both must store exactly what plain INSERTs store,
and a failed import must leave the table as it was, indexes and constraints included."""

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest
from django.db import DataError, connection, transaction

from review.importers import ImportFailed, import_release
from review.importers import bulk as bulk_module
from review.importers.bulk import bulk_load_begin, estimate_events
from review.importers.dispatch import planned_event_columns
from review.importers.writers import EVENT_COLUMNS, insert_event_rows, write_event_rows
from review.models import Dataset, Encounter, Event, Patient
from tests.review.test_meds_importer import T, table, write_meds

pytestmark = pytest.mark.django_db

STORED = [c.removesuffix("_id") if c.endswith("_id") else c for c in EVENT_COLUMNS]


def postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the COPY and bulk paths are PostgreSQL's; SQLite inserts")


def event_rows(patient_id: int, encounter_id: int) -> list[tuple]:
    """Rows with the values that COPY formats differently from an INSERT's parameters."""
    plus_five = timezone(timedelta(hours=5, minutes=30))
    return [
        # fmt: off
        (
            patient_id,
            encounter_id,
            1,
            datetime(2020, 1, 1, 9, 30, 15, 123456, tzinfo=UTC),
            "measurement",
            "LOINC/8867-4",
            "Heart rate",
            "104",
            104.0,
            "/min",
            "",
            "",
            {},
        ),
        (
            patient_id,
            encounter_id,
            2,
            datetime(1901, 12, 31, 23, 59, tzinfo=plus_five),
            "note",
            "NOTE//X",
            "Hämoglobin ✓",
            "",
            None,
            "",
            "tab\there\nnew line \\ back",
            "Discharge",
            {"visit_id": "7", "nested": {"a": [1, "x", None]}, "ü": "ç"},
        ),
        (patient_id, None, 3, None, "observation", "", "", "", -0.1, "", "", "", {}),
        (
            patient_id,
            encounter_id,
            4,
            datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC),
            "e" * 40,
            "c" * 120,
            "n" * 500,
            "v" * 100,
            1e300,
            "u" * 60,
            "",
            "t" * 120,
            {"k": ""},
        ),
        (
            patient_id,
            encounter_id,
            5,
            datetime(2020, 1, 1, tzinfo=UTC),
            "measurement",
            "LAB//1",
            "Integer value",
            "5",
            5,
            "",
            "",
            "",
            {},
        ),
        # fmt: on
    ]


def stored(patient: Patient) -> list[tuple]:
    return list(Event.objects.filter(patient=patient).order_by("seq").values_list(*STORED[1:]))


def test_copy_stores_the_same_rows_as_insert() -> None:
    postgres_only()
    dataset = Dataset.objects.create(name="d")
    patient = Patient.objects.create(dataset=dataset, person_id="1")
    encounter = Encounter.objects.create(patient=patient, ordinal=1, encounter_type="visit")
    rows = event_rows(patient.pk, encounter.pk)

    write_event_rows(rows)  # COPY, binary
    copied = stored(patient)
    Event.objects.all().delete()
    insert_event_rows(rows)  # what SQLite does
    inserted = stored(patient)

    assert copied == inserted
    assert len(copied) == len(rows)
    assert copied[1][-1] == {"visit_id": "7", "nested": {"a": [1, "x", None]}, "ü": "ç"}
    assert copied[1][9] == "tab\there\nnew line \\ back"


def test_naive_utc_rows_store_the_same_instants_as_aware_rows() -> None:
    """The MEDS and OMOP importers send naive UTC wall-clock times (sent as ``timestamp`` in the
    binary COPY, made aware on SQLite): what is stored is exactly what aware rows store, on
    either database, whatever the session's time zone."""
    dataset = Dataset.objects.create(name="d")
    patient = Patient.objects.create(dataset=dataset, person_id="1")
    encounter = Encounter.objects.create(patient=patient, ordinal=1, encounter_type="visit")
    rows = event_rows(patient.pk, encounter.pk)
    write_event_rows(rows)
    from_aware = stored(patient)
    Event.objects.all().delete()
    naive = [
        (*r[:3], r[3].astimezone(UTC).replace(tzinfo=None) if r[3] else None, *r[4:]) for r in rows
    ]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET TIME ZONE 'Asia/Kolkata'")  # not the server's nor UTC
    write_event_rows(naive, naive_utc=True)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET TIME ZONE 'UTC'")
    assert stored(patient) == from_aware
    assert from_aware[1][2] == datetime(1901, 12, 31, 18, 29, tzinfo=UTC)


def test_copy_refuses_a_value_longer_than_its_column_as_insert_does() -> None:
    postgres_only()
    dataset = Dataset.objects.create(name="d")
    patient = Patient.objects.create(dataset=dataset, person_id="1")
    row = event_rows(patient.pk, None)[2]  # type: ignore[arg-type]
    too_long = (*row[:4], "e" * 41, *row[5:])
    with pytest.raises((DataError, psycopg.DataError), match="too long"), transaction.atomic():
        write_event_rows([too_long])


# --- a large import: indexes and foreign keys built once --------------------------------------
def schema_of_events() -> tuple[list, list]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index "
            "WHERE indrelid = 'review_event'::regclass ORDER BY 1"
        )
        indexes = cursor.fetchall()
        cursor.execute(
            "SELECT conname, pg_get_constraintdef(oid), convalidated FROM pg_constraint "
            "WHERE conrelid = 'review_event'::regclass ORDER BY 1"
        )
        return indexes, cursor.fetchall()


def cohort(root: Path, subjects: int = 3, bad_last_row: bool = False) -> Path:
    rows = []
    for s in range(1, subjects + 1):
        rows.append((s, None, "GENDER/F", None, None))
        rows.append((s, T(2020, 1, 1, 9), "VISIT/IP", None, None))
        for i in range(40):
            rows.append(
                (s, T(2020, 1, 1, 10) + timedelta(minutes=i), "LOINC/8867-4", 80.0 + i, None)
            )
        rows.append((s, T(2020, 1, 3, 10), "HOSPITAL_DISCHARGE//HOME", None, None))
        rows.append((s, T(2020, 2, 1, 10), "LOINC/2345-7", None, "positive"))
    if bad_last_row:
        rows.append((subjects, T(2019, 1, 1), "LOINC/8867-4", 1.0, None))  # out of time order
    return write_meds(root, {"0.parquet": table(rows)})


def events_by_person(dataset: str) -> list[tuple]:
    return list(
        Event.objects.filter(patient__dataset__name=dataset)
        .order_by("patient__person_id", "seq")
        .values_list("patient__person_id", "encounter__ordinal", *STORED[2:])
    )


@pytest.fixture
def bulk_loads(monkeypatch) -> list:
    """What each import's ``bulk_load_begin`` returned: the indexes and keys it set aside, or
    None when the import went row by row."""
    loads: list = []
    # An ANALYZE by an earlier test's import outlives its rollback (PostgreSQL updates the
    # statistics in place): the table counts as empty here, as on a fresh server.
    monkeypatch.setattr(bulk_module, "events_in_table", lambda: 0)

    def spy(expected: int, **options):
        loads.append(bulk_load_begin(expected, **options))
        return loads[-1]

    monkeypatch.setattr("review.importers.dispatch.bulk_load_begin", spy)
    return loads


def used(loads: list) -> list[bool]:
    return [load is not None for load in loads]


def test_a_bulk_import_stores_what_a_row_by_row_one_does_and_rebuilds_the_same_schema(
    tmp_path: Path, settings, bulk_loads: list
) -> None:
    postgres_only()
    before = schema_of_events()
    root = cohort(tmp_path)

    settings.IMPORT_BULK_MIN_EVENTS = 1
    import_release(root, dataset_name="bulk")
    settings.IMPORT_BULK_MIN_EVENTS = 0  # never
    import_release(root, dataset_name="rows")

    assert used(bulk_loads) == [True, False]
    assert events_by_person("bulk") == events_by_person("rows")
    assert len(events_by_person("bulk")) == 3 * 43
    # The same indexes and constraints, under the same names, validated.
    assert schema_of_events() == before
    assert all(validated for _, _, validated in before[1])


def test_a_failed_bulk_import_stores_nothing_and_leaves_the_indexes(
    tmp_path: Path, settings, bulk_loads: list
) -> None:
    postgres_only()
    before = schema_of_events()
    settings.IMPORT_BULK_MIN_EVENTS = 1
    with pytest.raises(ImportFailed) as failure:
        import_release(cohort(tmp_path, bad_last_row=True), dataset_name="bulk")
    assert used(bulk_loads) == [True]
    # The problem names the file, the row and the field, as on the row-by-row path.
    assert "0.parquet, row 133, field 'time': subject 3's rows are not sorted" in str(failure.value)
    assert not Event.objects.exists()
    assert not Patient.objects.exists()
    assert schema_of_events() == before


def test_a_bulk_load_waits_briefly_for_a_busy_table_then_goes_row_by_row(
    settings, monkeypatch
) -> None:
    postgres_only()
    settings.IMPORT_BULK_MIN_EVENTS = 1
    monkeypatch.setattr(bulk_module, "LOCK_TIMEOUT", "100ms")
    params = connection.get_connection_params()
    with psycopg.connect(**params) as other:
        # Another session reading the events (a record page) holds a lock until it commits.
        other.execute("LOCK TABLE review_event IN ACCESS SHARE MODE")
        assert bulk_load_begin(10**6) is None
        other.rollback()
    # The import's own transaction is intact, and the table keeps its indexes.
    assert Event.objects.count() == 0
    assert any(name == "event_patient_name" for name, _ in schema_of_events()[0])


def test_a_small_import_or_a_table_larger_than_the_import_goes_row_by_row(
    settings, monkeypatch
) -> None:
    postgres_only()
    settings.IMPORT_BULK_MIN_EVENTS = 1000
    assert bulk_load_begin(999) is None
    settings.IMPORT_BULK_MIN_EVENTS = 0
    assert bulk_load_begin(10**9) is None
    # Rebuilding costs the whole table: not for an import smaller than what it holds.
    settings.IMPORT_BULK_MIN_EVENTS = 1
    monkeypatch.setattr(bulk_module, "events_in_table", lambda: 5000)
    assert bulk_load_begin(4999) is None
    assert bulk_load_begin(5000) is not None


def test_sqlite_never_bulk_loads(settings) -> None:
    if connection.vendor == "postgresql":
        pytest.skip("SQLite's path")
    settings.IMPORT_BULK_MIN_EVENTS = 1
    assert bulk_load_begin(10**9) is None


def test_the_estimate_counts_parquet_rows_and_event_tables_by_size(tmp_path: Path) -> None:
    root = cohort(tmp_path / "meds", subjects=2)
    shards = list((root / "data").glob("*.parquet"))
    (tmp_path / "measurement.csv").write_text("x" * 8000)
    (tmp_path / "concept.csv").write_text("x" * 80_000)  # vocabulary: no events
    (tmp_path / "1.xml").write_text("x" * 2000)

    estimate = estimate_events(
        [*shards, tmp_path / "1.xml"],
        {"measurement": tmp_path / "measurement.csv", "concept": tmp_path / "concept.csv"},
    )
    assert estimate == 2 * 44 + 8000 // 80 + 2000 // 200


@pytest.mark.django_db(transaction=True)  # each import commits, as in use
def test_a_bulk_import_with_replace_reloads_records_already_there(
    tmp_path: Path, settings, bulk_loads: list
) -> None:
    postgres_only()
    settings.IMPORT_BULK_MIN_EVENTS = 1
    root = cohort(tmp_path)
    import_release(root, dataset_name="bulk")
    first = events_by_person("bulk")
    # The replaced records' events and encounters are deleted while the indexes are set aside.
    import_release(root, dataset_name="bulk", replace=True)

    assert used(bulk_loads) == [True, True]
    assert events_by_person("bulk") == first
    assert Encounter.objects.filter(patient__dataset__name="bulk").count() == 3 * 2
    # A new dataset replaces nothing: every secondary index goes. Replacing records keeps the
    # one their events are deleted by.
    dropped_first, dropped_again = ({name for name, _ in load.indexes} for load in bulk_loads)
    assert dropped_first == {
        "event_encounter_time",
        "event_patient_name",
        "event_patient_time",
        "event_patient_type_seq",
    }
    assert dropped_again == dropped_first - {"event_patient_time"}


def test_an_import_in_a_transaction_with_pending_checks_goes_row_by_row(
    tmp_path: Path, settings, bulk_loads: list
) -> None:
    """Two imports in one transaction: the first one's deferred checks on the encounters are
    still pending, so PostgreSQL refuses to drop the keys; the second goes row by row."""
    postgres_only()
    settings.IMPORT_BULK_MIN_EVENTS = 1
    root = cohort(tmp_path)
    import_release(root, dataset_name="bulk")
    first = events_by_person("bulk")
    import_release(root, dataset_name="bulk", replace=True)

    assert used(bulk_loads) == [True, False]
    assert events_by_person("bulk") == first


def test_a_large_import_leaves_the_planner_statistics_of_the_columns_the_record_pages_use(
    tmp_path: Path,
) -> None:
    """Without fresh statistics PostgreSQL plans the record pages as if the table were small.
    ANALYZE's statistics are rows of a catalogue, so they roll back with the test: what is
    seen here is what this import's ANALYZE gathered (it sees its own transaction's rows)."""
    postgres_only()
    from tests.bench.management.commands.bench_import import write_meds_bench

    import_release(write_meds_bench(tmp_path / "meds", 10_000), dataset_name="stats")

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname, most_common_vals::text FROM pg_stats WHERE tablename = %s",
            [Event._meta.db_table],
        )
        stats = dict(cursor.fetchall())
    assert set(planned_event_columns()) <= set(stats)
    # The bench cohort's four lab names (and the note and visit events), nothing older.
    names = stats["name"]
    assert all(name in names for name in ("HR", "Na", "Creat", "Hb")), names
