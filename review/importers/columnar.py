"""What the MEDS and OMOP importers share: Arrow batches in, patients, encounters and events out.

Both formats describe a whole cohort in a few large files rather than one file per patient, so
many patients' events share one row buffer and a cohort of small records still reaches the
database in large COPY batches, through the same ``write_event_rows`` as the XML importer's.
Values leave Arrow a column at a time (``to_pylist`` per column, ``pyarrow.compute`` for parsing
and time zones), and the loaders build each event's row tuple directly: no object and no call
per event. Encounter ids are reserved up front (``_IdReserver``) so events can point at an
encounter before its row exists.
"""

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from django.conf import settings
from django.utils import timezone

from review.models import Encounter, Event, Patient

from .loader import _IdReserver, _Importer, write_encounters, write_event_rows

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
    """Creates (or, with ``replace``, clears) patients and writes their encounters and events.

    Loaders append event rows (``EVENT_COLUMNS`` order) to ``rows`` themselves, without an
    object or a call per event, and call ``flush`` when it holds ``EVENT_FLUSH_ROWS``.
    """

    def __init__(self, importer: _Importer, source_format: str) -> None:
        self.importer = importer
        self.source_format = source_format
        self.rows: list[tuple[Any, ...]] = []
        self.ids = _IdReserver(Encounter)
        # Patient ids only: the dataset may hold many records, and only replaced ones are read.
        self.existing: dict[str, int] = dict(
            Patient.objects.filter(dataset=importer.dataset).values_list("person_id", "id")
        )
        self.pending_encounters: list[Encounter] = []
        self.queued_patients: list[Patient] = []

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
        patient = Patient.objects.create(
            dataset=self.importer.dataset,
            person_id=person_id,
            source_file=source_file[:300],
            source_format=self.source_format,
            **fields,
        )
        self.existing[person_id] = patient.pk
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
    ) -> Encounter:
        encounter = Encounter(
            id=self.ids.next(),
            patient_id=patient_id,
            ordinal=ordinal,
            encounter_type=encounter_type[:100],
            start=start,
            end=end,
        )
        self.pending_encounters.append(encounter)
        return encounter

    def flush(self) -> None:
        write_event_rows(self.rows)
        self.rows.clear()

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
        patient.first_event_at = first
        patient.last_event_at = last
        patient.save()
        self.count(patients=1, encounters=encounters, events=events, notes=notes)

    def count(self, **counts: int) -> None:
        for name, value in counts.items():
            self.importer.summary.counts[name] += value

    def write_encounters(self) -> None:
        """Write the encounters made so far; their fields must be final."""
        write_encounters(self.pending_encounters)
        self.pending_encounters = []

    def finish(self) -> None:
        self.flush()
        # Events already point at these reserved ids; the foreign key is checked at commit
        # (Django creates it DEFERRABLE INITIALLY DEFERRED), so the order does not matter.
        self.write_encounters()


def batch_rows(batch: pa.RecordBatch, names: list[str]) -> Iterator[tuple[Any, ...]]:
    """Rows of the named columns (absent ones read as None), as plain Python values."""
    n = batch.num_rows
    columns = [
        batch.column(name).to_pylist() if name in batch.schema.names else [None] * n
        for name in names
    ]
    return zip(*columns, strict=True)
