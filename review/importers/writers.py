"""How an import's rows reach the database: one path for every format.

Events go in chunks of ``EVENT_FLUSH_ROWS`` through ``write_event_rows``: a binary COPY on
PostgreSQL (no text for the server to parse, timestamps above all), bulk INSERTs elsewhere, the
same rows either way (``test_import_bulk_path`` compares them). Encounters go the same way
(``write_encounters``). Their primary keys are reserved up front (``IdReserver``) so that
events can point at an encounter, or a patient, before its row exists: the foreign keys are
checked at commit (Django creates them DEFERRABLE INITIALLY DEFERRED).
"""

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import connection, models, transaction
from psycopg.types.string import BytesBinaryDumper

from review.models import Encounter, Event, Patient, RecordExcerpt

from .ehr_xml import EventData
from .timestamps import aware

EVENT_FLUSH_ROWS = 5000


class IdReserver:
    """Reserves primary keys before the rows exist, so children can be written first.

    PostgreSQL: blocks from the table's sequence. SQLite: counting up from the current maximum,
    which is safe because the import holds SQLite's write lock for its whole transaction.
    """

    BLOCK = 256
    # Blocks double up to this: each block is a round trip, and each waits for the event COPY
    # in flight (``copier``), so a cohort's encounters take few. Ids left unused are gaps, as
    # after a rollback.
    MAX_BLOCK = 16_384

    def __init__(self, model: type[models.Model]) -> None:
        self.model = model
        self.pool: list[int] = []
        self.sqlite_next: int | None = None
        self.block = self.BLOCK

    def next(self) -> int:
        if connection.vendor == "postgresql":
            if not self.pool:
                table = self.model._meta.db_table
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT nextval(pg_get_serial_sequence(%s, 'id')) "
                        "FROM generate_series(1, %s)",
                        [table, self.block],
                    )
                    self.pool = [row[0] for row in cursor.fetchall()][::-1]
                self.block = min(self.block * 2, self.MAX_BLOCK)
            return self.pool.pop()
        if self.sqlite_next is None:
            current = self.model._default_manager.aggregate(m=models.Max("id"))["m"] or 0
            self.sqlite_next = current + 1
        self.sqlite_next += 1
        return self.sqlite_next - 1


class EventWriter:
    """Buffers events and writes them in chunks: COPY on PostgreSQL, bulk INSERT elsewhere."""

    COLUMNS = (
        "patient_id",
        "encounter_id",
        "seq",
        "timestamp",
        "event_type",
        "code",
        "name",
        "value",
        "value_numeric",
        "unit",
        "text",
        "note_type",
        "attributes",
    )

    def __init__(self, patient: Patient, rows: list[tuple[Any, ...]] | None = None) -> None:
        self.patient_id = patient.pk
        self.encounter_id: int | None = None
        self.encounter_ordinal = 0
        # MEDS and OMOP share one buffer between many patients' writers, so a cohort of small
        # records still goes to the database in large COPY batches.
        self.rows: list[tuple[Any, ...]] = rows if rows is not None else []
        self.total = 0
        self.notes = 0
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.encounter_events: Counter[int] = Counter()  # encounter ordinal -> events

    @property
    def pending(self) -> int:
        return len(self.rows)

    def add(self, event: EventData) -> None:
        self.total += 1
        if event.event_type == "note":
            self.notes += 1
        ts = event.timestamp
        if ts is not None:
            if self.first is None or ts < self.first:
                self.first = ts
            if self.last is None or ts > self.last:
                self.last = ts
        if self.encounter_id is not None:
            self.encounter_events[self.encounter_ordinal] += 1
        self.rows.append(
            (
                self.patient_id,
                self.encounter_id,
                self.total,
                ts,
                event.event_type[:40],
                event.code[:120],
                event.name[:500],  # bounded: it is in a b-tree index
                event.value[:100],
                event.value_numeric,
                event.unit[:60],
                event.text,
                event.note_type[:120],
                event.attributes,
            )
        )

    def flush(self) -> None:
        write_event_rows(self.rows)
        self.rows.clear()


EVENT_COLUMNS = EventWriter.COLUMNS
# Shared by every event row without attributes; nothing writes to it.
NO_ATTRIBUTES: dict[str, str] = {}


def write_event_rows(rows: list[tuple[Any, ...]], *, naive_utc: bool = False) -> None:
    """Write event rows (``EVENT_COLUMNS`` order, attributes last as a dict): the one path every
    importer's events take to the database. COPY on PostgreSQL, bulk INSERT elsewhere.

    ``naive_utc``: the rows' timestamps are naive datetimes holding UTC wall-clock time
    (``columnar.utc_wall_times``), which the MEDS and OMOP importers make far faster than
    aware ones. A binary COPY sends ``timestamp`` and ``timestamptz`` alike, as microseconds
    since 2000-01-01 (UTC for ``timestamptz``), so naive UTC values sent as ``timestamp`` land
    as the same instants (tested against aware ones in ``test_import_bulk_path``)."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        if naive_utc:
            rows = [(*r[:3], aware(r[3]) if r[3] is not None else None, *r[4:]) for r in rows]
        insert_event_rows(rows)
        return
    with connection.cursor() as cursor:
        copy_event_rows(cursor.cursor, rows, naive_utc=naive_utc)


def copy_event_rows(raw: Any, rows: list[tuple[Any, ...]], *, naive_utc: bool = False) -> None:
    """COPY event rows through ``raw``, a psycopg 3 cursor (Django's, or one a worker thread
    opened on the import's own connection: ``copier.BackgroundCopy``)."""
    table = Event._meta.db_table
    columns = ", ".join(EVENT_COLUMNS)
    sql = f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)"  # noqa: S608 - a model's table
    # bytes as bytea by psycopg's own (C) dumper: the one registered last for bytea is
    # its DB-API ``Binary`` wrapper's, in Python, and slow on every row.
    raw.adapters.register_dumper(bytes, BytesBinaryDumper)
    dumps = json.dumps
    with raw.copy(sql) as copy:
        # Binary: PostgreSQL parses no text (timestamps above all); psycopg formats less.
        copy.set_types(EVENT_COPY_TYPES_NAIVE_UTC if naive_utc else EVENT_COPY_TYPES)
        write = copy.write_row
        for row in rows:
            # jsonb's binary form is a version byte (1) and the JSON text. Most events have
            # no attributes: a constant, without a trip through json.
            attributes = row[-1]
            jsonb = (b"\x01" + dumps(attributes).encode()) if attributes else EMPTY_JSONB
            write(row[:-1] + (jsonb,))


def insert_event_rows(rows: list[tuple[Any, ...]]) -> None:
    """The same rows by multi-row INSERTs (SQLite; and the reference the COPY is tested against)."""
    Event.objects.bulk_create(
        (Event(**dict(zip(EVENT_COLUMNS, row, strict=True))) for row in rows),
        batch_size=2000,
    )


# The event columns' types for a binary COPY (``EVENT_COLUMNS`` order). Text for the character
# columns: PostgreSQL still checks their lengths. ``attributes`` goes as bytes already in
# jsonb's binary form (``EMPTY_JSONB``), so nothing is encoded twice.
EVENT_COPY_TYPES = (
    "int8",
    "int8",
    "int4",
    "timestamptz",
    "text",
    "text",
    "text",
    "text",
    "float8",
    "text",
    "text",
    "text",
    "bytea",
)
EMPTY_JSONB = b"\x01{}"
EVENT_COPY_TYPES_NAIVE_UTC = (*EVENT_COPY_TYPES[:3], "timestamp", *EVENT_COPY_TYPES[4:])


ENCOUNTER_COLUMNS = (
    "id",
    "patient_id",
    "ordinal",
    "encounter_type",
    "start",
    "end",
    "care_sites",
    "providers",
    "event_count",
)


class PendingEncounter:
    """An encounter row an importer is building, with its reserved id: the fields of
    ``Encounter`` without a model instance, whose making (signals, field defaults) weighs on a
    cohort with many visits."""

    __slots__ = ENCOUNTER_COLUMNS

    def __init__(
        self,
        id: int,  # noqa: A002 - the column's name
        patient_id: int,
        ordinal: int,
        encounter_type: str,
        start: datetime | None,
        end: datetime | None,
    ) -> None:
        self.id = id
        self.patient_id = patient_id
        self.ordinal = ordinal
        self.encounter_type = encounter_type
        self.start = start
        self.end = end
        self.care_sites: list[str] = []
        self.providers: list[str] = []
        self.event_count = 0

    def as_model(self) -> Encounter:
        return Encounter(**{name: getattr(self, name) for name in ENCOUNTER_COLUMNS})


def write_encounters(encounters: Sequence[Encounter | PendingEncounter]) -> None:
    """Write encounters whose ids were reserved (``IdReserver``): COPY on PostgreSQL, as the
    events go (not a model save per encounter), bulk INSERT elsewhere."""
    if not encounters:
        return
    if connection.vendor != "postgresql":
        Encounter.objects.bulk_create(
            [e.as_model() if isinstance(e, PendingEncounter) else e for e in encounters],
            batch_size=500,
        )
        return
    table = Encounter._meta.db_table
    columns = ", ".join(f'"{c}"' for c in ENCOUNTER_COLUMNS)  # "end" is a keyword
    dumps = json.dumps
    sql = f"COPY {table} ({columns}) FROM STDIN"  # noqa: S608 - a model's table
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        write = copy.write_row
        for e in encounters:
            # fmt: off
            write((e.id, e.patient_id, e.ordinal, e.encounter_type, e.start, e.end,
                   dumps(e.care_sites), dumps(e.providers), e.event_count))
            # fmt: on


@transaction.atomic
def record_excerpts_invalidate(
    *, patients: Iterable[int] = (), instructions: Iterable[int] = ()
) -> int:
    """Delete the stored excerpts of reloaded records and changed instructions (ids)."""
    patients, instructions = list(patients), list(instructions)
    deleted = 0
    if patients:
        deleted += RecordExcerpt.objects.filter(patient_id__in=patients).delete()[0]
    if instructions:
        deleted += RecordExcerpt.objects.filter(instruction_id__in=instructions).delete()[0]
    return deleted
