"""What the MEDS and OMOP importers share: Arrow batches in, patients, encounters and events out.

Both formats describe a whole cohort in a few large files rather than one file per patient, so
many patients' events share one row buffer and a cohort of small records still reaches the
database in large COPY batches, through the same ``write_event_rows`` as the XML importer's.
Values leave Arrow a column at a time (``pylist``: through NumPy, ``pyarrow.compute`` for
parsing and time zones), and the loaders build each event's row tuple directly: no object and
no call per event. Encounter and (MEDS) patient ids are reserved up front (``IdReserver``) so
events can point at them before their rows exist; on PostgreSQL each batch of rows is COPY'd by
a worker thread while the loader reads the next (``copier``).
"""

from collections.abc import Iterator
from datetime import UTC, datetime, tzinfo
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from django.conf import settings
from django.db import connection
from django.utils import timezone

from review.models import Encounter, Event, Patient

from .copier import BackgroundCopy
from .run import ImportRun
from .timestamps import aware
from .writers import IdReserver, PendingEncounter, write_encounters, write_event_rows

NUL_PROBLEM = "holds a NUL character, which the database cannot store"
# Rows per record batch: its Python values stay a few MB (larger batches grew peak memory).
BATCH_ROWS = 16_384


def nul_cells(batch: pa.RecordBatch) -> Iterator[tuple[int, str]]:
    """(row in the batch, column) of the first value holding a NUL in each text column of
    ``batch``: PostgreSQL cannot store it (in text or jsonb), so the import names it instead of
    failing at the database. One vectorised pass per text column."""
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            continue
        found = pc.match_substring(column, "\x00")
        if pc.any(found).as_py():
            yield int(pc.index(found, True).as_py()), name


def pylist(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """``array.to_pylist()``, the same values, through NumPy for the types the importers read in
    bulk (integers, floats, booleans, strings). pyarrow 21's ``to_pylist`` builds a scalar per
    value, many times slower than NumPy's conversion and a large share of an import's Python
    time. Other types (times, lists, structs) go the library's way."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind = array.type
    if not (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
    ):
        return array.to_pylist()  # type: ignore[no-any-return]
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        # Object arrays of str, with None where the value is null.
        return array.to_numpy(zero_copy_only=False).tolist()  # type: ignore[no-any-return]
    if array.null_count == 0:
        return array.to_numpy(zero_copy_only=False).tolist()  # type: ignore[no-any-return]
    # NumPy would give nulls as NaN (and integers as floats): fill, then put None back.
    values = np.asarray(
        array.fill_null(False if pa.types.is_boolean(kind) else 0).to_numpy(zero_copy_only=False)
    ).astype(object)
    values[array.is_null().to_numpy(zero_copy_only=False)] = None
    return values.tolist()  # type: ignore[no-any-return]


class NumberTexts(dict[float, str]):
    """A numeric value as the event's text (``f"{x:g}"``), remembered per value: lab results
    repeat, and a dictionary hit costs a fraction of formatting. Zero is not remembered, as
    -0.0 and 0.0 are one key ("-0" and "0"), nor is NaN, which matches no key; the table is
    emptied when it holds ``LIMIT`` values, so distinct values cannot grow memory with the
    input."""

    LIMIT = 16_384

    def __missing__(self, number: float) -> str:
        text = f"{number:g}"
        if number and number == number:
            if len(self) >= self.LIMIT:
                self.clear()
            self[number] = text
        return text


def _utc_microseconds(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The column's instants as UTC timestamps (us, no zone): naive values are wall-clock time in
    ``TIME_ZONE``, as the XML importer reads them, so records from all formats line up."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_date(column.type) or pa.types.is_string(column.type):
        column = column.cast(pa.timestamp("us"))
    if not pa.types.is_timestamp(column.type):
        raise TypeError(f"not a timestamp column: {column.type}")
    if column.type.tz is None:
        column = pc.assume_timezone(
            column, settings.TIME_ZONE, ambiguous="earliest", nonexistent="earliest"
        )
    return column.cast(pa.timestamp("us"))


# datetime's range in microseconds since 1970: NumPy gives an int, not a datetime, outside it.
_DATETIME_MIN_US = int((datetime(1, 1, 1) - datetime(1970, 1, 1)).total_seconds()) * 1_000_000
_DATETIME_MAX_US = int((datetime(9999, 12, 31) - datetime(1970, 1, 1)).total_seconds()) * 1_000_000


def utc_wall_times(column: pa.Array | pa.ChunkedArray) -> list[datetime | None]:
    """Naive datetimes holding each value's UTC wall-clock time (None for a null): what a binary
    COPY into a ``timestamptz`` column sends (``write_event_rows(..., naive_utc=True)``), built in
    C by NumPy rather than one aware datetime at a time (attaching a zone costs more than the
    rest of an event's handling). ``aware`` turns one back."""
    utc = _utc_microseconds(column)
    bounds = pc.min_max(utc.cast(pa.int64()))
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is not None and (low < _DATETIME_MIN_US or high > _DATETIME_MAX_US):
        # Out of datetime's range: the library's conversion raises as it always did.
        return [v.replace(tzinfo=None) if v is not None else None for v in utc.to_pylist()]
    return utc.to_numpy(zero_copy_only=False).tolist()  # type: ignore[no-any-return]


def local_zone() -> tzinfo:
    """``TIME_ZONE`` as the tzinfo ``local_times`` gives its values: aware datetimes compare
    several times faster when they share one tzinfo object (no ``utcoffset`` call)."""
    zone: tzinfo = timezone.get_default_timezone()
    return UTC if str(zone) == "UTC" else zone


def local_times(column: pa.Array | pa.ChunkedArray) -> list[datetime | None]:
    """Aware datetimes in ``TIME_ZONE`` from a timestamp or date column (naive values read as
    wall-clock time there). Each distinct instant is made aware once: attaching a zone is
    costly, and a batch's rows share few instants (a lab panel, a visit's events)."""
    utc = _utc_microseconds(column)
    if len(utc) == 0:
        return []
    nulls = utc.null_count
    as_int = utc.cast(pa.int64())
    instants = (as_int.fill_null(0) if nulls else as_int).to_numpy(zero_copy_only=False)
    distinct, positions = np.unique(instants, return_inverse=True)
    zone = local_zone()
    naive = utc_wall_times(pa.array(distinct, pa.timestamp("us", tz="UTC")))
    made = np.empty(len(distinct), dtype=object)
    made[:] = [aware(v, zone) for v in naive]  # type: ignore[arg-type]
    values = made[positions]
    if nulls:
        values[utc.is_null().to_numpy(zero_copy_only=False)] = None
    return values.tolist()  # type: ignore[no-any-return]


class CohortWriter:
    """Creates (or, with ``replace``, clears) patients and writes their encounters and events.

    Loaders append event rows (``EVENT_COLUMNS`` order) to ``rows`` themselves, without an
    object or a call per event, and call ``flush`` when it holds ``EVENT_FLUSH_ROWS``.

    With ``naive_utc`` every time a loader hands over (event rows, encounters' start and end,
    a patient's first and last event) is a naive UTC wall-clock time (``utc_wall_times``);
    the few that leave as model fields are made aware here, the rows go as they are.
    """

    def __init__(self, importer: ImportRun, source_format: str, *, naive_utc: bool = False) -> None:
        self.importer = importer
        self.source_format = source_format
        self.naive_utc = naive_utc
        # PostgreSQL: batches are COPY'd on a worker thread while the loader reads on.
        self.copier = (
            BackgroundCopy(naive_utc=naive_utc) if connection.vendor == "postgresql" else None
        )
        self.rows: list[tuple[Any, ...]] = []
        self.ids = IdReserver(Encounter)
        # Patient ids only: the dataset may hold many records, and only replaced ones are read.
        self.existing: dict[str, int] = dict(
            Patient.objects.filter(dataset=importer.dataset).values_list("person_id", "id")
        )
        self.pending_encounters: list[PendingEncounter] = []
        self.queued_patients: list[Patient] = []
        # New patients made by ``open_patient``: their ids are reserved and the rows written,
        # final, when closed (``write_patients``), as encounters are: not a create and a save
        # per patient, which weighed on cohorts of many small records.
        self.patient_ids = IdReserver(Patient)
        self.unwritten: set[int] = set()
        self.closed_patients: list[Patient] = []

    def open_patient(self, person_id: str, source_file: str, **fields: Any) -> Patient | None:
        """The patient to load this record into, or None when the record is kept as it is.
        ``fields`` (demographics known up front) are saved with it."""
        pk = self.existing.get(person_id)
        summary = self.importer.summary
        if pk is not None and not self.importer.replace:
            summary.skipped["record already imported (use --replace)"] += 1
            return None
        if pk is not None:
            self.flush()  # rows already buffered for this patient would survive the delete
            Event.objects.filter(patient_id=pk).delete()
            Encounter.objects.filter(patient_id=pk).delete()
            patient = Patient.objects.get(pk=pk)
            for attr in ("gender", "race", "ethnicity"):
                setattr(patient, attr, "")
            patient.birth_date = None
            patient.demographics = {}
            patient.source_file = source_file[:300]
            patient.source_format = self.source_format
            if fields:
                for name, value in fields.items():
                    setattr(patient, name, value)
                patient.save()
            return patient
        patient = Patient(
            id=self.patient_ids.next(),
            dataset=self.importer.dataset,
            person_id=person_id,
            source_file=source_file[:300],
            source_format=self.source_format,
            **fields,
        )
        self.existing[person_id] = patient.pk
        self.unwritten.add(patient.pk)
        return patient

    def queue_patient(self, person_id: str, source_file: str, **fields: Any) -> Patient | None:
        """Like ``open_patient``, but a new patient is only queued, to be created with the
        others of its batch by ``create_patients`` (one INSERT, not one per person); its ``pk``
        is set then. A patient already in the dataset is opened (or kept) at once."""
        if person_id in self.existing:
            return self.open_patient(person_id, source_file, **fields)
        patient = Patient(
            dataset=self.importer.dataset,
            person_id=person_id,
            source_file=source_file[:300],
            source_format=self.source_format,
            **fields,
        )
        self.queued_patients.append(patient)
        return patient

    def create_patients(self) -> None:
        """Create the queued patients, in one statement per 500."""
        created = Patient.objects.bulk_create(self.queued_patients, batch_size=500)
        for patient in created:
            self.existing[patient.person_id] = patient.pk
        self.queued_patients = []

    def new_encounter(
        self,
        patient_id: int,
        ordinal: int,
        encounter_type: str,
        start: datetime | None,
        end: datetime | None,
    ) -> PendingEncounter:
        encounter = PendingEncounter(
            self.ids.next(), patient_id, ordinal, encounter_type[:100], start, end
        )
        self.pending_encounters.append(encounter)
        return encounter

    def flush(self) -> None:
        """Write the rows buffered so far and wait until they are stored."""
        self.flush_later()
        if self.copier is not None:
            self.copier.wait()

    def flush_later(self) -> None:
        """Write the rows buffered so far, on PostgreSQL while the loader goes on (``copier``);
        ``rows`` is empty again at once, the same list (loaders hold its ``append``)."""
        if self.copier is None or not self.rows:
            write_event_rows(self.rows, naive_utc=self.naive_utc)
        else:
            self.copier.submit(self.rows.copy())
        self.rows.clear()

    def close(self, *, failing: bool = False) -> None:
        """Stop the copy worker, after its last batch (``failing``: without raising its error
        over the one the loader is raising)."""
        if self.copier is not None:
            self.copier.close(quietly=failing)

    def _aware(self, value: datetime | None) -> datetime | None:
        return aware(value) if self.naive_utc and value is not None else value

    def close_patient(
        self,
        patient: Patient,
        *,
        events: int,
        notes: int,
        first: datetime | None,
        last: datetime | None,
        encounters: int,
    ) -> None:
        patient.event_count = events
        patient.note_count = notes
        patient.first_event_at = self._aware(first)
        patient.last_event_at = self._aware(last)
        if patient.pk in self.unwritten:
            self.closed_patients.append(patient)
            if len(self.closed_patients) >= 500:
                self.write_patients()
        else:
            patient.save()
        self.count(patients=1, encounters=encounters, events=events, notes=notes)

    def write_patients(self) -> None:
        """Insert the closed new patients, final, with the ids their events already hold (the
        foreign key is checked at commit, as for encounters)."""
        Patient.objects.bulk_create(self.closed_patients, batch_size=500)
        self.unwritten.difference_update(p.pk for p in self.closed_patients)
        self.closed_patients = []

    def count(self, **counts: int) -> None:
        for name, value in counts.items():
            self.importer.summary.counts[name] += value

    def write_encounters(self) -> None:
        """Write the encounters made so far; their fields must be final."""
        if self.naive_utc:
            for encounter in self.pending_encounters:
                encounter.start = self._aware(encounter.start)
                encounter.end = self._aware(encounter.end)
        write_encounters(self.pending_encounters)
        self.pending_encounters = []

    def finish(self) -> None:
        self.flush()
        self.write_patients()
        # Events already point at these reserved ids; the foreign key is checked at commit
        # (Django creates it DEFERRABLE INITIALLY DEFERRED), so the order does not matter.
        self.write_encounters()


def batch_rows(batch: pa.RecordBatch, names: list[str]) -> Iterator[tuple[Any, ...]]:
    """Rows of the named columns (absent ones read as None), as plain Python values."""
    n = batch.num_rows
    columns = [
        pylist(batch.column(name)) if name in batch.schema.names else [None] * n for name in names
    ]
    return zip(*columns, strict=True)
