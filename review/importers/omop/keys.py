"""Whether an event table's primary key repeats, and at which rows.

Every event table but ``death`` has a ``<table>_id`` primary key, and a repeated one is a
problem named by its row and the row that had it first. The keys are checked when the table
ends: up to ``HELD_KEYS_MAX`` of them are held in memory (12 bytes a key) and checked with a
NumPy sort; a table with more goes to a temporary table and is checked in SQL, so memory stays
bounded however large the table.
"""

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..scratch import ScratchTable
from .columns import Columns

# Primary keys of one table checked for repeats in memory (12 bytes each, and 17 more while
# checked, a joined and a sorted copy: 29 MB at most); a larger table's go to a temporary table,
# whose COPY, aggregate and DELETE cost PostgreSQL far more than a NumPy sort.
HELD_KEYS_MAX = 1_000_000


class KeyCheck:
    """The primary keys of the table being read, with their rows."""

    def __init__(self, table: ScratchTable) -> None:
        self.table = table  # id, row: used once a table has more than HELD_KEYS_MAX keys
        self.held: list[tuple[pa.Array, pa.Array]] = []  # (ids, rows) per batch
        self.in_table = False

    def remember(self, columns: Columns, ids: list[int | None]) -> None:
        """A batch's primary keys and their rows, to find repeats when the table ends. Up to
        ``HELD_KEYS_MAX`` keys are held in memory and checked there (12 bytes a key); a table
        with more goes to a temporary table and is checked in SQL, so memory stays bounded."""
        id_array = pa.array(ids, pa.int64())
        rows = pa.array(range(columns.offset + 1, columns.offset + columns.n + 1), pa.int32())
        present = pc.is_valid(id_array)
        keys = (id_array.filter(present), rows.filter(present))
        held = sum(len(ids) for ids, _ in self.held)
        if not self.in_table and held + len(keys[0]) <= HELD_KEYS_MAX:
            self.held.append(keys)
            return
        for earlier in self.held:
            self.table.insert_arrays(earlier)
        self.held = []
        self.in_table = True
        self.table.insert_arrays(keys)

    def take_repeats(self, limit: int) -> list[tuple[Any, int, int]]:
        """(key, first row, repeated row) for at most ``limit`` repeated keys of the table just
        read, by row; its keys are forgotten, ready for the next table."""
        if self.in_table:
            found = self.table.repeats("id", "row", limit)
            self.table.clear()
        elif self.held:
            ids = pa.chunked_array([k for k, _ in self.held], pa.int64())
            rows = pa.chunked_array([r for _, r in self.held], pa.int32())
            found = repeats(ids, rows)[:limit]
        else:
            found = []
        self.held = []
        self.in_table = False
        return found


def repeats(
    ids: pa.Array | pa.ChunkedArray, rows: pa.Array | pa.ChunkedArray
) -> list[tuple[int, int, int]]:
    """(id, first row, repeated row) for each row whose id an earlier row had, by row: what
    ``ScratchTable.repeats`` finds in SQL, for keys held in memory."""
    # Whether any id repeats, by sorting a copy: Arrow's distinct count builds a hash table
    # four times the ids' size.
    ordered = np.sort(ids.to_numpy())
    if not len(ordered) or not (ordered[1:] == ordered[:-1]).any():
        return []  # the usual case, without a Python step per row
    first: dict[int, int] = {}
    found = []
    for key, row in zip(ids.to_pylist(), rows.to_pylist(), strict=True):
        if key in first:
            found.append((key, first[key], row))
        else:
            first[key] = row
    return found
