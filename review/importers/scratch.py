"""Temporary tables for what an import must remember across a whole input.

The OMOP importer has to remember every visit (events name theirs by id, in any table, any
order), every primary key it has read (to find duplicates) and every concept. Kept in Python
those grow with the input; in a temporary table they cost the importer nothing, and it asks for
only what one record batch needs. The tables live in the import's transaction: a failed import
rolls them back with everything else, and PostgreSQL drops them at commit in any case.

PostgreSQL: rows go in by COPY (integer columns by pyarrow's CSV writer, no Python per row).
SQLite (tests, a laptop): plain ``executemany``.
"""

import io
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
from django.db import connection

# SQLite allows 32,766 bound variables; lookups go in chunks well below that.
LOOKUP_CHUNK = 900
# Below this many rows a scratch table is scanned rather than indexed (see ``index``).
INDEX_MIN_ROWS = 10_000


class ScratchTable:
    """A temporary table ``name`` with ``columns`` ((name, SQL type) pairs). Made by
    ``scratch_tables``, several in one round trip."""

    def __init__(self, name: str, columns: Sequence[tuple[str, str]]) -> None:
        self.name = name
        self.columns = [column for column, _ in columns]
        self.definition = ", ".join(f"{column} {kind}" for column, kind in columns)
        self.postgres = connection.vendor == "postgresql"
        self.rows = 0  # rows inserted (``clear`` resets): a small table needs no index

    def insert(self, rows: Iterable[Sequence[Any]]) -> None:
        """Rows of Python values, in column order."""
        columns = ", ".join(self.columns)
        with connection.cursor() as cursor:
            if self.postgres:
                with cursor.cursor.copy(f"COPY {self.name} ({columns}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
                        self.rows += 1
                return
            marks = ", ".join("%s" for _ in self.columns)
            values = [tuple(row) for row in rows]
            cursor.executemany(
                f"INSERT INTO {self.name} ({columns}) VALUES ({marks})",  # noqa: S608
                values,
            )
            self.rows += len(values)

    def insert_arrays(self, arrays: Sequence[pa.Array]) -> None:
        """Whole integer columns at once (no nulls), without a Python step per row."""
        if not len(arrays[0]):
            return
        if not self.postgres:
            self.insert(zip(*(array.to_pylist() for array in arrays), strict=True))
            return
        self.rows += len(arrays[0])
        table = pa.Table.from_arrays(list(arrays), names=self.columns)
        buffer = io.BytesIO()
        pacsv.write_csv(table, buffer, pacsv.WriteOptions(include_header=False))
        columns = ", ".join(self.columns)
        with connection.cursor() as cursor:
            sql = f"COPY {self.name} ({columns}) FROM STDIN (FORMAT csv)"
            with cursor.cursor.copy(sql) as copy:
                copy.write(buffer.getbuffer())

    def index(self, column: str) -> None:
        """Index ``column`` for lookups, unless the table is small enough to scan: below
        ``INDEX_MIN_ROWS`` rows an index and fresh statistics cost more than they save."""
        if self.rows < INDEX_MIN_ROWS:
            return
        create = f"CREATE INDEX {self.name}_{column} ON {self.name} ({column})"
        with connection.cursor() as cursor:
            if self.postgres:
                # A temporary table is never analysed by autovacuum; the planner needs figures.
                # Both statements in one round trip (no parameters, so psycopg allows it).
                cursor.execute(f"{create}; ANALYZE {self.name}")
            else:
                cursor.execute(create)

    def lookup(
        self, key: str, keys: Iterable[Any], values: Sequence[str]
    ) -> dict[Any, tuple[Any, ...]]:
        """``{key: (values…)}`` for the given keys that the table holds (the last row wins)."""
        wanted = list(set(keys))
        found: dict[Any, tuple[Any, ...]] = {}
        if not wanted:
            return found
        selected = ", ".join([key, *values])
        with connection.cursor() as cursor:
            if self.postgres:
                cursor.execute(
                    f"SELECT {selected} FROM {self.name} WHERE {key} = ANY(%s)",  # noqa: S608
                    [wanted],
                )
                rows: list[tuple[Any, ...]] = cursor.fetchall()
            else:
                rows = []
                for start in range(0, len(wanted), LOOKUP_CHUNK):
                    chunk = wanted[start : start + LOOKUP_CHUNK]
                    marks = ", ".join("%s" for _ in chunk)
                    cursor.execute(
                        f"SELECT {selected} FROM {self.name} WHERE {key} IN ({marks})",  # noqa: S608
                        chunk,
                    )
                    rows.extend(cursor.fetchall())
        for row in rows:
            found[row[0]] = tuple(row[1:])
        return found

    def repeats(self, key: str, row: str, limit: int) -> list[tuple[Any, int, int]]:
        """(key, first row, repeated row) for each row whose key an earlier row already had."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT t.{key}, f.first_row, t.{row} FROM {self.name} t JOIN ("  # noqa: S608
                f"SELECT {key}, MIN({row}) AS first_row FROM {self.name} "
                f"GROUP BY {key} HAVING COUNT(*) > 1) f ON t.{key} = f.{key} "
                f"WHERE t.{row} > f.first_row ORDER BY t.{row} LIMIT %s",
                [limit],
            )
            return [(k, int(first), int(again)) for k, first, again in cursor.fetchall()]

    def clear(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {self.name}")  # noqa: S608
        self.rows = 0


def scratch_tables(*tables: ScratchTable) -> list[ScratchTable]:
    """Create ``tables``. PostgreSQL: one round trip, no DROP first, since a temporary table
    made inside the import's transaction (or savepoint) goes with its rollback and, ``ON COMMIT
    DROP``, with its commit. SQLite keeps temporary tables for the connection: a failed import's
    are dropped first, one statement at a time (its driver takes one per call)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "; ".join(
                    f"CREATE TEMPORARY TABLE {t.name} ({t.definition}) ON COMMIT DROP"
                    for t in tables
                )
            )
            return list(tables)
        for t in tables:
            cursor.execute(f"DROP TABLE IF EXISTS {t.name}")
            cursor.execute(f"CREATE TEMPORARY TABLE {t.name} ({t.definition})")
    return list(tables)


def drop_scratch_tables(tables: Sequence[ScratchTable]) -> None:
    """Drop ``tables`` now (PostgreSQL would at commit; an import inside a longer transaction,
    or SQLite, would keep them): one statement on PostgreSQL."""
    if not tables:
        return
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"DROP TABLE IF EXISTS {', '.join(t.name for t in tables)}")
            return
        for t in tables:
            cursor.execute(f"DROP TABLE IF EXISTS {t.name}")
