"""A large import on PostgreSQL: the event table's secondary indexes and foreign keys are set
aside while the events are copied in, then built once.

Maintained row by row, the four secondary indexes and the two deferred foreign-key checks cost
PostgreSQL several times the COPY itself (docs/benchmarks.md, the importer's section). Built
once, an index is a sort; a foreign key is one join (``ALTER TABLE ... ADD CONSTRAINT`` validates
the whole table that way), whatever the table's size. That is worth it only when the import
brings at least as many events as the table holds (rebuilding costs the whole table), and it
holds the table's ``ACCESS EXCLUSIVE`` lock until the import commits, so record pages wait for
it: ``IMPORT_BULK_MIN_EVENTS`` sets the smallest import that may do it (0: never).

Everything happens inside the import's transaction: a failed import rolls the dropped indexes
and constraints back with its rows, and the table is exactly as it was. The definitions come
from PostgreSQL's catalogue (``pg_get_indexdef``, ``pg_get_constraintdef``), so what is rebuilt
is what the migrations made, under the same names. When the import replaces records already
in the dataset, the index that leads with the patient is kept: their events are deleted by
patient while the import runs.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection, transaction

from review.models import Event

# Kept during a bulk load that may replace records: ``Event.objects.filter(patient=...)
# .delete()`` would otherwise scan the whole table, once per record.
PATIENT_INDEX = "event_patient_time"
# How long to wait for the table's exclusive lock before importing row by row instead.
LOCK_TIMEOUT = "3s"
# Rough bytes per event in the formats whose row count is not in the file's metadata.
BYTES_PER_EVENT = {".xml": 200, ".csv": 80, ".tsv": 80}
# OMOP tables that hold no events (vocabulary, people, places): not counted.
NOT_EVENTS = frozenset(
    {
        "person",
        "concept",
        "concept_relationship",
        "concept_ancestor",
        "concept_synonym",
        "concept_class",
        "vocabulary",
        "domain",
        "relationship",
        "drug_strength",
        "care_site",
        "provider",
        "location",
        "cdm_source",
        "metadata",
        "source_to_concept_map",
    }
)


@dataclass
class BulkLoad:
    """The secondary indexes and foreign keys set aside, as (name, definition)."""

    indexes: list[tuple[str, str]]
    foreign_keys: list[tuple[str, str]]

    def finish(self) -> None:
        """Build the indexes and add back (and so validate) the foreign keys: one sort per
        index, one join per key. A row pointing nowhere fails here, as it would at commit."""
        table = Event._meta.db_table
        with connection.cursor() as cursor:
            # Sorts in memory rather than on disk, for this transaction only.
            cursor.execute("SET LOCAL maintenance_work_mem = '256MB'")
            for _, definition in self.indexes:
                cursor.execute(definition)
            for name, definition in self.foreign_keys:
                cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')


def estimate_events(files: Iterable[Path], omop_tables: dict[str, Path]) -> int:
    """About how many events ``files`` (XML records, MEDS shards) and the OMOP tables hold: a
    Parquet file's row count, a text file's size over a typical row's."""
    import pyarrow.parquet as pq

    total = 0
    paths = [*files, *(p for name, p in omop_tables.items() if name.lower() not in NOT_EVENTS)]
    for path in paths:
        suffix = path.suffix.lower()
        if suffix == ".parquet":
            try:
                total += pq.ParquetFile(path).metadata.num_rows
            except (OSError, ValueError):  # unreadable: the importer reports it
                total += 0
        elif suffix in BYTES_PER_EVENT or path.name.lower().endswith((".csv.gz", ".tsv.gz")):
            total += path.stat().st_size // BYTES_PER_EVENT.get(suffix, 20)
    return total


def events_in_table() -> int:
    """The planner's estimate of the event table's rows: no scan of a large table to decide."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT GREATEST(reltuples, 0)::bigint FROM pg_class WHERE oid = %s::regclass",
            [Event._meta.db_table],
        )
        return int(cursor.fetchone()[0])


def bulk_load_begin(expected_events: int, *, replaces: bool = True) -> BulkLoad | None:
    """Set the event table's secondary indexes and foreign keys aside when an import of about
    ``expected_events`` is worth it (see the module docstring); None when it is not, or when
    the table is in use. ``replaces``: the import may delete records' events (``--replace``
    into a dataset that has records), so the patient index stays. Must run before the import
    writes any event (PostgreSQL refuses to drop a constraint with checks pending)."""
    minimum = settings.IMPORT_BULK_MIN_EVENTS
    if connection.vendor != "postgresql" or minimum <= 0 or expected_events < minimum:
        return None
    if events_in_table() > expected_events:
        return None
    table = Event._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('lock_timeout')")
        (lock_timeout,) = cursor.fetchone()
        # Plain indexes only: one that backs a constraint (the primary key) stays.
        cursor.execute(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass "
            "AND NOT i.indisunique AND NOT EXISTS "
            "(SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid) ORDER BY c.relname",
            [table],
        )
        kept = {PATIENT_INDEX} if replaces else set()
        indexes = [(name, sql) for name, sql in cursor.fetchall() if name not in kept]
        cursor.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = %s::regclass AND contype = 'f' ORDER BY conname",
            [table],
        )
        foreign_keys = list(cursor.fetchall())
    drops = [f'DROP INDEX "{name}"' for name, _ in indexes] + [
        f'ALTER TABLE {table} DROP CONSTRAINT "{name}"' for name, _ in foreign_keys
    ]
    if not drops:
        return None
    try:
        # A savepoint: when the table is busy the import goes on row by row, not aborted.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            cursor.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            cursor.execute("; ".join(drops))
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [lock_timeout])
    except DatabaseError:
        return None
    return BulkLoad(indexes=indexes, foreign_keys=foreign_keys)
