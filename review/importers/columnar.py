"""What the MEDS and OMOP importers share: Arrow batches in, patients, encounters and events out.

Both formats describe a whole cohort in a few large files rather than one file per patient, so
the writing differs from the XML importer's in one way: many patients' writers share one row
buffer (``_EventWriter`` with a shared ``rows``), and a cohort of small records still reaches the
database in large COPY batches. Encounter ids are reserved up front (``_IdReserver``) so events can
point at an encounter before its row exists.
"""

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from django.conf import settings
from django.utils import timezone

from review.models import Encounter, Event, Patient

from .loader import EVENT_FLUSH_ROWS, _EventWriter, _IdReserver, _Importer

# Rows per record batch: its Python values stay a few MB (65,536 grew peak RSS by 50 MB).
BATCH_ROWS = 16_384


def local_times(column: pa.Array | pa.ChunkedArray) -> list[datetime | None]:
    """Aware datetimes from a timestamp or date column. Naive values are wall-clock time in
    ``TIME_ZONE``, as the XML importer reads them, so records from all formats line up."""
    if pa.types.is_date(column.type) or pa.types.is_string(column.type):
        column = column.cast(pa.timestamp("us"))
    if not pa.types.is_timestamp(column.type):
        raise TypeError(f"not a timestamp column: {column.type}")
    if column.type.tz is None:
        column = pc.assume_timezone(
            column, settings.TIME_ZONE, ambiguous="earliest", nonexistent="earliest"
        )
    # pyarrow's own conversion of zoned timestamps tries to import pytz once per value (a failed
    # import each time when it is absent: 90% of the import's time). Naive UTC values convert
    # fast; the zone is attached here.
    utc_values = column.cast(pa.timestamp("us")).to_pylist()
    zone = timezone.get_default_timezone()
    if str(zone) == "UTC":
        return [v.replace(tzinfo=UTC) if v is not None else None for v in utc_values]
    return [v.replace(tzinfo=UTC).astimezone(zone) if v is not None else None for v in utc_values]


class CohortWriter:
    """Creates (or, with ``replace``, clears) patients and writes their encounters and events."""

    def __init__(self, importer: _Importer, source_format: str) -> None:
        self.importer = importer
        self.source_format = source_format
        self.rows: list[tuple[Any, ...]] = []
        self.ids = _IdReserver(Encounter)
        self.existing = {p.person_id: p for p in Patient.objects.filter(dataset=importer.dataset)}
        self.pending_encounters: list[Encounter] = []
        self.flusher: _EventWriter | None = None

    def open_patient(self, person_id: str, source_file: str) -> _EventWriter | None:
        """A writer for this patient's events, or None when the record is kept as it is."""
        patient = self.existing.get(person_id)
        summary = self.importer.summary
        if patient is not None and not self.importer.replace:
            summary.skipped["record already imported (use --replace)"] += 1
            return None
        if patient is not None:
            self.flush()  # rows already buffered for this patient would survive the delete
            Event.objects.filter(patient=patient).delete()
            Encounter.objects.filter(patient=patient).delete()
            for attr in ("gender", "race", "ethnicity"):
                setattr(patient, attr, "")
            patient.birth_date = None
            patient.demographics = {}
            patient.source_file = source_file[:300]
            patient.source_format = self.source_format
        else:
            patient = Patient.objects.create(
                dataset=self.importer.dataset,
                person_id=person_id,
                source_file=source_file[:300],
                source_format=self.source_format,
            )
            self.existing[person_id] = patient
        writer = _EventWriter(patient, rows=self.rows)
        writer.patient = patient  # type: ignore[attr-defined]
        self.flusher = writer
        return writer

    def new_encounter(
        self,
        writer: _EventWriter,
        ordinal: int,
        encounter_type: str,
        start: datetime | None,
        end: datetime | None,
        attributes: dict[str, str] | None = None,
    ) -> Encounter:
        encounter = Encounter(
            id=self.ids.next(),
            patient_id=writer.patient_id,
            ordinal=ordinal,
            encounter_type=encounter_type[:100],
            start=start,
            end=end,
            care_sites=[attributes] if attributes else [],
        )
        self.pending_encounters.append(encounter)
        return encounter

    def add(self, writer: _EventWriter, event: Any) -> None:
        writer.add(event)
        if len(self.rows) >= EVENT_FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.flusher is not None:
            self.flusher.flush()

    def close_patient(self, writer: _EventWriter, encounters: dict[int, Encounter]) -> None:
        for ordinal, encounter in encounters.items():
            encounter.event_count = writer.encounter_events.get(ordinal, 0)
        patient: Patient = writer.patient  # type: ignore[attr-defined]
        patient.event_count = writer.total
        patient.note_count = writer.notes
        patient.first_event_at = writer.first
        patient.last_event_at = writer.last
        patient.save()
        counts = self.importer.summary.counts
        counts["patients"] += 1
        counts["encounters"] += len(encounters)
        counts["events"] += writer.total
        counts["notes"] += writer.notes
        if len(self.pending_encounters) >= 500:
            self._write_encounters()

    def finish(self) -> None:
        self.flush()
        # Last, as in the XML importer: events already point at these reserved ids, and the
        # foreign key is checked at commit (Django creates it DEFERRABLE INITIALLY DEFERRED).
        self._write_encounters()

    def _write_encounters(self) -> None:
        Encounter.objects.bulk_create(self.pending_encounters, batch_size=500)
        self.pending_encounters = []


def batch_rows(batch: pa.RecordBatch, names: list[str]) -> Iterator[tuple[Any, ...]]:
    """Rows of the named columns (absent ones read as None), as plain Python values."""
    n = batch.num_rows
    columns = [
        batch.column(name).to_pylist() if name in batch.schema.names else [None] * n
        for name in names
    ]
    return zip(*columns, strict=True)
