"""Event batches COPY'd on a worker thread (``review/importers/copier.py``), on PostgreSQL: the
rows land in the import's own transaction, in order with everything the importer sends, a
failed batch fails the import with its own error and nothing stored, and no thread outlives it."""

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import DataError, connection

from review.importers import ImportFailed, import_release
from review.importers import copier as copier_module
from review.importers import meds as meds_module
from review.models import Encounter, Event, Patient
from tests.review.test_meds_importer import T, table, write_meds

pytestmark = pytest.mark.django_db(transaction=True)


def postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite writes events in the importer's thread")


def cohort(tmp_path: Path, subjects: int = 30, per_subject: int = 40) -> Path:
    rows = []
    for sid in range(1, subjects + 1):
        rows.append((sid, T(2020, 1, 1, 8), "VISIT/OP", None, None))
        rows += [
            (sid, T(2020, 1, 1, 9) + timedelta(minutes=k), "LOINC/8867-4", float(k), None)
            for k in range(per_subject)
        ]
    return write_meds(tmp_path / "cohort", {"0.parquet": table(rows)})


def copy_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("event-copy")]


def test_batches_copied_beside_the_importer_are_all_stored_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    postgres_only()
    monkeypatch.setattr(meds_module, "EVENT_FLUSH_ROWS", 50)  # 25 batches, not one
    submitted = []
    real_submit = copier_module.BackgroundCopy.submit

    def counting_submit(self, rows):  # type: ignore[no-untyped-def]
        submitted.append(len(rows))
        real_submit(self, rows)

    monkeypatch.setattr(copier_module.BackgroundCopy, "submit", counting_submit)
    summary = import_release(cohort(tmp_path), dataset_name="m")

    assert len(submitted) >= 20  # the worker really carried the batches
    assert summary.counts["events"] == Event.objects.count() == 30 * 41
    for patient in Patient.objects.all():
        seqs = list(Event.objects.filter(patient=patient).values_list("seq", flat=True))
        assert sorted(seqs) == list(range(1, 42))
        visit = Encounter.objects.get(patient=patient)
        assert visit.event_count == 41 == patient.event_count
    assert not copy_threads()


def test_a_failed_batch_fails_the_import_with_its_error_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    postgres_only()
    monkeypatch.setattr(meds_module, "EVENT_FLUSH_ROWS", 50)
    calls = []
    real_copy = copier_module.copy_event_rows

    def failing_copy(raw, rows, *, naive_utc=False):  # type: ignore[no-untyped-def]
        calls.append(len(rows))
        if len(calls) == 3:
            raise DataError("value too long for type character varying(40)")
        real_copy(raw, rows, naive_utc=naive_utc)

    monkeypatch.setattr(copier_module, "copy_event_rows", failing_copy)
    with pytest.raises((DataError, ImportFailed), match="too long"):
        import_release(cohort(tmp_path), dataset_name="m")

    assert len(calls) == 3  # nothing more was sent after the failure surfaced
    assert not Event.objects.exists()
    assert not Patient.objects.exists()
    assert not copy_threads()


def test_an_import_failing_elsewhere_waits_for_the_batch_in_flight_and_keeps_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    postgres_only()
    monkeypatch.setattr(meds_module, "EVENT_FLUSH_ROWS", 50)
    real_close = meds_module.MedsLoader._close_subject
    closed = []

    def close_then_fail(self):  # type: ignore[no-untyped-def]
        real_close(self)
        closed.append(1)
        if len(closed) == 5:
            raise RuntimeError("the loader's own failure")

    monkeypatch.setattr(meds_module.MedsLoader, "_close_subject", close_then_fail)
    with pytest.raises(RuntimeError, match="the loader's own failure"):
        import_release(cohort(tmp_path), dataset_name="m")
    assert not Event.objects.exists()
    assert not copy_threads()
