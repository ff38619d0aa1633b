"""bench_import's report: medians, the ratio to XML and the verdicts (figures made up here)."""

import time
from io import StringIO
from typing import Any

import pytest

from tests.bench.management.commands.bench_import import Command


def result(events: int, seconds: float, peak: float) -> dict[str, float]:
    return {"events": events, "seconds": seconds, "peak_mb": peak, "rss_before_mb": 200.0}


def test_the_report_takes_medians_and_compares_each_format_with_xml_at_the_same_size() -> None:
    command = Command(stdout=StringIO())
    results = {
        # XML: medians 10 s and 100 s; one slow outlier each that a mean would have counted.
        "xml": {
            1000: [result(1000, 10, 200), result(1000, 10, 200), result(1000, 50, 200)],
            10000: [result(10000, 100, 210), result(10000, 100, 210), result(10000, 400, 210)],
        },
        # MEDS: twice XML's rate at both sizes, memory flat.
        "meds": {
            1000: [result(1000, 5, 220), result(1000, 5, 220), result(1000, 6, 220)],
            10000: [result(10000, 50, 230), result(10000, 50, 230), result(10000, 40, 230)],
        },
        # OMOP: faster at the small size, slower at the large one, memory grows 1.5x.
        "omop": {
            1000: [result(1000, 5, 200), result(1000, 5, 200), result(1000, 5, 200)],
            10000: [result(10000, 200, 300), result(10000, 200, 300), result(10000, 200, 300)],
        },
    }
    baselines = {fmt: {1000: 1e5, 10000: 1e5} for fmt in results}
    loads = {1000: [1.0, 2.5], 10000: [3.0, 4.0]}

    command._report(["xml", "meds", "omop"], [1000, 10000], results, baselines, loads)
    out = command.stdout.getvalue()

    assert "meds: events/s vs XML (median of each) at each size: 2.00x, 2.00x" in out
    assert "(target >= 1.00x: met)" in out
    assert "omop: events/s vs XML (median of each) at each size: 2.00x, 0.50x" in out
    assert "(target >= 1.00x: NOT met)" in out
    assert "meds: peak memory at 10,000 / 1,000 events: 1.05x (target <= 1.2x: met)" in out
    assert "omop: peak memory at 10,000 / 1,000 events: 1.50x (target <= 1.2x: NOT met)" in out
    assert "xml: slowest median import 100 events/s" in out
    # The largest size's peak against XML's at that size (the bar the issue set).
    assert "meds: peak memory at 10,000 events vs XML's: 1.10x (target <= 1.2x: met)" in out
    assert "omop: peak memory at 10,000 events vs XML's: 1.43x (target <= 1.2x: NOT met)" in out
    assert "3.0-4.0" in out  # the load average while each size ran


def test_the_mimic_shaped_cohort_has_many_codes_and_stays_nested_in_admissions(tmp_path) -> None:
    import pyarrow.parquet as pq

    from tests.bench.management.commands.bench_import import write_mimic_bench

    root = write_mimic_bench(tmp_path / "mimic", 20_000)
    rows = pq.read_table(root / "data" / "0.parquet").to_pylist()
    timed = [r for r in rows if r["time"] is not None]
    assert abs(len(timed) - 20_000) <= 10  # about the size asked for
    assert len({r["subject_id"] for r in rows}) == 2  # ~9,000 rows a subject, as in MIMIC-IV
    assert len({r["code"] for r in rows}) > 500
    for sid in {r["subject_id"] for r in rows}:
        mine = [r for r in timed if r["subject_id"] == sid]
        assert [r["time"] for r in mine] == sorted(r["time"] for r in mine)
        codes = [r["code"] for r in mine]
        # The ED stay starts before the admission and ends inside it, before the discharge.
        ed, admit = (
            codes.index("ED_REGISTRATION"),
            codes.index("HOSPITAL_ADMISSION//EW EMER.//EMERGENCY ROOM"),
        )
        assert ed < admit < codes.index("ED_OUT") < codes.index("HOSPITAL_DISCHARGE//HOME")


def test_the_report_shows_the_bare_copy_rate_and_cpu_time() -> None:
    command = Command(stdout=StringIO())
    run = {**result(100_000, 2.0, 250), "bare_copy_seconds": 0.5, "cpu_s": 0.8, "db_cpu_s": 0.7}
    command._report(
        ["mimic"],
        [100_000],
        {"mimic": {100_000: [run]}},
        {"mimic": {100_000: 1e5}},
        {100_000: [1.0]},
    )
    out = command.stdout.getvalue()
    assert "200,000" in out  # bare COPY events/s
    assert "25%" in out  # the import's rate as a share of it
    assert "0.80+0.70" in out


def _events(dataset_name: str, n: int) -> None:
    from datetime import UTC, datetime

    from review.models import Dataset, Event, Patient

    dataset = Dataset.objects.create(name=dataset_name)
    patient = Patient.objects.create(dataset=dataset, person_id="1")
    when = datetime(2020, 1, 1, tzinfo=UTC)
    Event.objects.bulk_create(
        Event(patient=patient, seq=k, timestamp=when, event_type="lab", name=f"test {k}")
        for k in range(n)
    )


def _sessions_holding_snapshots() -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, state, application_name, left(query, 60) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_xmin IS NOT NULL"
        )
        return list(cursor.fetchall())


def _pages(table: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size(%s::regclass)", [table])
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)  # VACUUM runs outside a transaction
def test_each_bench_import_starts_from_a_table_of_a_new_installation() -> None:
    """A plain VACUUM left the deleted rows' pages allocated, and row-by-row index upkeep
    grew slower run after run: the bench compared code on tables in different states."""
    from django.db import connection

    from review.models import Encounter, Event
    from tests.bench.management.commands.bench_import import DATASET, _drop_bench_dataset

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's storage")
    # The tables as in a new installation: nothing but the bench's dataset in them.
    Event.objects.all().delete()
    Encounter.objects.all().delete()
    _events(DATASET, 3000)
    assert _pages("review_event") > 0 and _pages("event_patient_time") > 8192
    _drop_bench_dataset()
    assert not Event.objects.exists()
    # VACUUM FULL keeps the deleted rows that a snapshot may still see. In the parallel suite on
    # CI it sometimes left them with no session on this test's database holding one (so held
    # elsewhere on the server, for a moment). The drop is idempotent: tried again for 10 s.
    # A plain VACUUM can empty the heap as well, but never shrinks the index: the index's size
    # below is what tells the two apart.
    for _ in range(50):
        if _pages("review_event") == 0:
            break
        time.sleep(0.2)
        _drop_bench_dataset()
    assert _pages("review_event") == 0, (
        f"sessions holding snapshots: {_sessions_holding_snapshots()}"
    )
    assert _pages("event_patient_time") == 8192  # a b-tree's metapage, as when created


@pytest.mark.django_db(transaction=True)
def test_the_bench_leaves_other_datasets_events_in_place() -> None:
    from django.db import connection

    from review.models import Event
    from tests.bench.management.commands.bench_import import DATASET, _drop_bench_dataset

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's storage")
    _events(DATASET, 500)
    _events("someone else's", 200)
    _drop_bench_dataset()
    assert Event.objects.count() == 200
    assert Event.objects.filter(patient__dataset__name=DATASET).count() == 0
