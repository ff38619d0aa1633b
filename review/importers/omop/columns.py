"""How an OMOP record batch is read: a column at a time, into Python lists.

Ids, numbers and times are parsed with ``pyarrow.compute`` casts, a whole column at once; a
column holding something the cast refuses (padding, blanks, NULL words, a bad value) is cast
again trimmed with its blanks as nulls, and only a column that still refuses is parsed value by
value (``values``), which names the row and column of each bad value. A row with a value that
does not parse is left out.
"""

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..columnar import local_times, pylist
from ..timestamps import BadTimestamp
from .values import BadValue, parse_float, parse_int, parse_text, parse_when

# Text that means no value, in capitals.
NULL_WORDS = pa.array(["NULL", "NA", "NAN"])


class Columns:
    """One record batch's columns as Python lists, parsed column-wise (``pyarrow.compute`` casts,
    a per-value pass only for a column that holds something the cast refuses). A value that does
    not parse is a problem named by its row and column, and its row is left out."""

    def __init__(self, batch: pa.RecordBatch, offset: int) -> None:
        self.batch = batch
        self.n = batch.num_rows
        self.offset = offset  # rows before this batch: row offset + i + 1 is value i
        self.names = set(batch.schema.names)
        self.problems: list[tuple[int, str, str]] = []  # (row, column, message)
        self.bad: dict[int, set[str]] = {}  # row index -> the columns that did not parse

    def fail(self, i: int, column: str, message: str) -> None:
        """Name value ``i`` of ``column`` as a problem; its row is left out."""
        self.problems.append((self.offset + i + 1, column, message))
        self.bad.setdefault(i, set()).add(column)

    def fail_row(self, i: int, problems: list[BadValue]) -> None:
        """Name each of a row's problems, but not again a column that did not parse."""
        already = self.bad.get(i, ())
        for problem in problems:
            if problem.column not in already:
                self.problems.append((self.offset + i + 1, problem.column, problem.message))

    def _per_value(self, column: str, parse: Callable[[Any], Any]) -> list[Any]:
        out: list[Any] = []
        for i, value in enumerate(pylist(self.batch.column(column))):
            try:
                out.append(parse(value))
            except (ValueError, TypeError, BadTimestamp) as exc:
                self.fail(i, column, str(exc) or f"{value!r} is not valid")
                out.append(None)
        return out

    def _straight(self, column: str, target: pa.DataType) -> pa.Array | None:
        """The column cast to ``target`` as it is, or None when a value needs trimming or is a
        blank or NULL word (or bad): most columns are clean, and one cast is a fraction of the
        careful way's work. The cast refuses padding, blanks and words, so what it accepts the
        careful way reads alike."""
        try:
            return pc.cast(self.batch.column(column), target)
        except pa.ArrowInvalid:
            return None

    def _blank_as_null(self, column: str) -> pa.Array:
        """A text column trimmed, with '', NULL, NA and NAN as nulls."""
        array = self.batch.column(column).cast(pa.string())
        array = pc.utf8_trim_whitespace(array)
        upper = pc.utf8_upper(array)
        blank = pc.or_(pc.equal(array, ""), pc.is_in(upper, value_set=NULL_WORDS))
        return pc.if_else(blank, pa.scalar(None, pa.string()), array)

    def _cast_text(self, column: str, target: pa.DataType) -> pa.Array | None:
        """A text column cast to ``target``: straight when it is clean, else trimmed with blanks
        and NULL words as nulls; None when some value still does not cast (the caller then
        reads it value by value, which names the row)."""
        straight = self._straight(column, target)
        if straight is not None:
            return straight
        try:
            return pc.cast(self._blank_as_null(column), target)
        except pa.ArrowInvalid:
            return None

    def ints(self, column: str) -> list[int | None]:
        if column not in self.names:
            return [None] * self.n
        array = self.batch.column(column)
        if pa.types.is_integer(array.type):
            return pylist(array)
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            cast = self._cast_text(column, pa.int64())
            if cast is not None:
                return pylist(cast)
            # "8507.0", or a bad value: the slow way names the row
        return self._per_value(column, parse_int)

    def floats(self, column: str) -> list[float | None]:
        if column not in self.names:
            return [None] * self.n
        array = self.batch.column(column)
        if pa.types.is_floating(array.type) or pa.types.is_integer(array.type):
            array = array.cast(pa.float64())
        elif pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            cast = self._cast_text(column, pa.float64())
            if cast is None:
                return self._per_value(column, parse_float)
            array = cast
        else:
            return self._per_value(column, parse_float)
        return pylist(pc.if_else(pc.is_nan(array), pa.scalar(None, pa.float64()), array))

    def _timestamps(self, column: str) -> pa.Array | None:
        """The column as Arrow timestamps or dates; None when only the slow way can read it."""
        array = self.batch.column(column)
        if pa.types.is_timestamp(array.type) or pa.types.is_date(array.type):
            return array
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            # ISO dates and times without a zone, the CDM's own form; anything else (a zone
            # offset, US order, a bad value) goes the slow way, which names the row.
            return self._cast_text(column, pa.timestamp("us"))
        return None

    def times(self, column: str, fallback: str | None = None) -> list[datetime | None]:
        """Aware datetimes of ``column``, or of ``fallback`` where ``column`` is empty."""
        present = [c for c in (column, fallback) if c and c in self.names]
        if not present:
            return [None] * self.n
        arrays = [self._timestamps(c) for c in present]
        if len(arrays) == 2 and arrays[0] is not None and arrays[1] is not None:
            # A datetime, else its date at midnight: both columns in one Arrow pass when their
            # types agree (a zoned and a naive column go the way below).
            first, second = (
                a.cast(pa.timestamp("us")) if pa.types.is_date(a.type) else a
                for a in arrays
                if a is not None
            )
            if first.type == second.type:
                return local_times(pc.coalesce(first, second))
        values = [
            local_times(a) if a is not None else self._per_value(c, parse_when)
            for a, c in zip(arrays, present, strict=True)
        ]
        if len(values) == 1:
            return values[0]
        return [v if v is not None else o for v, o in zip(*values, strict=True)]

    def texts(self, column: str) -> list[str]:
        if column not in self.names:
            return [""] * self.n
        array = self.batch.column(column)
        if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
            return [parse_text(v) for v in pylist(array)]
        array = pc.utf8_trim_whitespace(array)
        array = pc.if_else(pc.equal(pc.utf8_upper(array), "NULL"), "", array)
        return pylist(pc.fill_null(array, ""))
