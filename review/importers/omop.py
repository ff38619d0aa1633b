"""OMOP CDM importer: ``person``, ``visit_occurrence``, the event tables (``condition_occurrence``,
``drug_exposure``, ``procedure_occurrence``, ``measurement``, ``observation``, ``note``,
``visit_detail``, ``device_exposure``, ``death``) and ``observation_period``, as CSV/TSV or
Parquet, with names from ``concept`` when that table is present. The CDM's other tables found
beside them are not read, and the import summary lists them as ignored.

Every table is read in Arrow record batches (``BATCH_ROWS`` rows; CSV columns read as text). A
batch is parsed a column at a time with ``pyarrow.compute`` casts; a column holding something the
cast refuses is parsed value by value, so a bad value is still named by table, row and column.

Unlike MEDS, OMOP tables are not grouped by patient, and an event may name any visit. What must
be remembered across the input lives in temporary tables (``scratch.py``), not in Python:
concepts, the visit map (visit id -> person, encounter), the primary keys of a table with more
than ``HELD_KEYS_MAX`` rows (duplicates found in SQL when the table ends; a smaller table's keys
are held and checked in memory, 12 bytes a key) and each batch's events per encounter. A batch
asks them, in one query each, for what it needs. Encounters are written as their visits are
read, with provisional ordinals, and numbered by start time in SQL at the end. The importer's own
memory holds a few numbers per person (ids, birth, tallies, observation periods) and one batch:
flat in the number of events and visits.

Codes are ``VOCABULARY/concept_code`` from ``concept`` (e.g. ``LOINC/8867-4``); without a concept
table, or for concept 0 ("no matching concept"), an event keeps ``CONCEPT/<id>`` and its source
value as the name. A concept id that a present concept table lacks is a gap in the vocabulary
export, not in the record (OHDSI's own Synthea sample lacks the gender concepts): the row keeps
``CONCEPT/<id>`` and its source value, and the summary counts it as fallen back and names the ids.

A value is read as OMOP's conventions and ``meds_etl`` read it: ``value_as_number``, else
``value_as_string``, else ``value_as_concept_id``'s name, else ``value_source_value`` (a number
there is a number too). ``visit_detail`` rows are events of their visit's encounter (with their
end), ``death`` is a ``MEDS_DEATH`` event whose value is the cause, ``observation_period`` is kept
on the patient's demographics as the span the record covers.

Problems, all named by table, row (1 = first data row) and column, every one of a row's: a
person or visit that is not in its table, duplicate primary keys, unreadable ids or dates, empty
required values, events dated before the person's birth (compared by date: birth times are often
just midnight).
"""

import json
import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import Any, NamedTuple

import meds
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from django.db import connection
from django.utils import timezone

from review.models import Encounter, Patient
from review.services.vocabulary import omop_concept_synonyms_import

from .columnar import (
    BATCH_ROWS,
    NUL_PROBLEM,
    CohortWriter,
    NumberTexts,
    local_times,
    local_zone,
    nul_cells,
    pylist,
)
from .demographics import normalise_sex
from .descriptions import patients_count_undescribed
from .run import ImportRun
from .scratch import ScratchTable, drop_scratch_tables, scratch_tables
from .tables import normalise_header
from .timestamps import BadTimestamp, parse_timestamp
from .writers import EVENT_FLUSH_ROWS, NO_ATTRIBUTES

SUFFIXES = {".csv": ",", ".tsv": "\t", ".parquet": None}
# CSV is read a block at a time, one thread: every block becomes Python values before it is
# used, so the block bounds memory (8 MB blocks with read-ahead peaked at 440 MB). A row may
# straddle two blocks, not three, so the block is also the longest note a table can hold.
CSV_BLOCK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class EventTable:
    event_type: str
    concept: str  # the concept id column that names the event
    datetime: str
    date: str
    source_value: str
    end: tuple[str, str] | None = None  # (datetime, date) columns kept as the "end" attribute
    has_key: bool = True  # a ``<table>_id`` primary key (``death`` has none: one per person)


EVENT_TABLES = {
    "condition_occurrence": EventTable(
        "condition",
        "condition_concept_id",
        "condition_start_datetime",
        "condition_start_date",
        "condition_source_value",
    ),
    "drug_exposure": EventTable(
        "drug",
        "drug_concept_id",
        "drug_exposure_start_datetime",
        "drug_exposure_start_date",
        "drug_source_value",
    ),
    "procedure_occurrence": EventTable(
        "procedure",
        "procedure_concept_id",
        "procedure_datetime",
        "procedure_date",
        "procedure_source_value",
    ),
    "measurement": EventTable(
        "measurement",
        "measurement_concept_id",
        "measurement_datetime",
        "measurement_date",
        "measurement_source_value",
    ),
    "observation": EventTable(
        "observation",
        "observation_concept_id",
        "observation_datetime",
        "observation_date",
        "observation_source_value",
    ),
    "note": EventTable("note", "note_class_concept_id", "note_datetime", "note_date", "note_title"),
    # A stay inside a visit (a ward, the ICU): an event of its visit's encounter, so the visit
    # stays one encounter and the stay shows inside it, with its end.
    "visit_detail": EventTable(
        "visit",
        "visit_detail_concept_id",
        "visit_detail_start_datetime",
        "visit_detail_start_date",
        "visit_detail_source_value",
        end=("visit_detail_end_datetime", "visit_detail_end_date"),
    ),
    "device_exposure": EventTable(
        "device",
        "device_concept_id",
        "device_exposure_start_datetime",
        "device_exposure_start_date",
        "device_source_value",
        end=("device_exposure_end_datetime", "device_exposure_end_date"),
    ),
    # The concept is the cause of death; the event itself is MEDS's death code.
    "death": EventTable(
        "death",
        "cause_concept_id",
        "death_datetime",
        "death_date",
        "cause_source_value",
        has_key=False,
    ),
}
TABLES = ("concept", "person", "visit_occurrence", *EVENT_TABLES, "observation_period")
# The other tables of OMOP CDM 5.4 and its vocabulary: not read here, and listed as ignored in
# the import summary (``concept_synonym`` is read beside ``concept`` by the vocabulary service).
UNREAD_CDM_TABLES = frozenset(
    {
        "specimen", "note_nlp", "fact_relationship", "location", "care_site", "provider",
        "payer_plan_period", "cost", "drug_era", "dose_era", "condition_era", "episode",
        "episode_event", "metadata", "cdm_source", "vocabulary", "domain", "concept_class",
        "concept_relationship", "relationship", "concept_ancestor", "source_to_concept_map",
        "drug_strength", "cohort", "cohort_definition", "attribute_definition",
        "location_history", "survey_conduct", "concept_synonym",
    }
)  # fmt: skip


def find_omop_tables(path: Path, exclude_root: Path | None = None) -> dict[str, Path]:
    """OMOP tables under ``path`` by name (``person.csv``, ``measurement.parquet``…)."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    found: dict[str, Path] = {}
    for file in files:
        if exclude_root is not None and exclude_root in file.parents:
            continue
        name = file.stem.lower()
        if name in TABLES and file.suffix.lower() in SUFFIXES:
            found.setdefault(name, file)
    return found


def find_unread_omop_tables(path: Path, exclude_root: Path | None = None) -> dict[str, Path]:
    """The CDM's other tables under ``path`` (``care_site.csv``…): not read, but named in the
    summary as ignored rather than reported as unrecognised files."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    found: dict[str, Path] = {}
    for file in files:
        if exclude_root is not None and exclude_root in file.parents:
            continue
        name = file.stem.lower()
        if name in UNREAD_CDM_TABLES and file.suffix.lower() in SUFFIXES:
            found.setdefault(name, file)
    return found


def _row_count(path: Path) -> int:
    """Rows of a table not read: Parquet's footer, or a CSV's lines less its header (a quoted
    newline counts twice: the summary says "about")."""
    if SUFFIXES[path.suffix.lower()] is None:
        try:
            return int(pq.ParquetFile(path).metadata.num_rows)
        except (pa.ArrowException, OSError):
            return 0
    lines = 0
    last = b"\n"
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return max(lines + (last != b"\n") - 1, 0)


class _MappedTable:
    """A table file for Arrow's CSV reader, memory-mapped, its pages given back as it is read.

    Arrow's streaming CSV reader reads blocks on a background thread up to 32 ahead of its
    consumer, even with ``use_threads=False``, and Arrow does not expose the limit: from an
    ordinary file, with 1 MB blocks, a 60 MB table held 40 MB of read-ahead and a 6 MB one
    10 MB, so the import's peak memory followed the size of its largest table. (Smaller blocks
    would bound it but refuse long notes: a row may straddle two blocks, not three.) From a
    memory map the reader's blocks are views of the file, not copies; the pages it has parsed
    are given back to the kernel (``madvise(MADV_DONTNEED)``, clean file pages: read again
    from the file if touched again) as the batches go, so only the blocks being parsed are
    resident. Nothing here runs Python on Arrow's thread.
    """

    def __init__(self, path: Path) -> None:
        self.source: pa.NativeFile | str
        self.map: mmap.mmap | None = None
        self.released = 0  # bytes from the start given back
        try:
            with path.open("rb") as fh:
                self.map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # no mmap on this file system; an empty file (ValueError)
            self.source = str(path)  # read as before, read-ahead included
            return
        self.source = pa.BufferReader(pa.py_buffer(self.map))  # views of the map, no copies

    def release_before(self, offset: int) -> None:
        """Give back the pages wholly before ``offset``."""
        if self.map is None or not hasattr(mmap, "MADV_DONTNEED"):
            return  # not Linux: the pages stay mapped (memory follows the file again)
        end = min(offset, len(self.map)) // mmap.PAGESIZE * mmap.PAGESIZE
        if end > self.released:
            self.map.madvise(mmap.MADV_DONTNEED, self.released, end - self.released)
            self.released = end


def iter_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """Record batches with lower-cased column names; CSV values as text."""
    delimiter = SUFFIXES[path.suffix.lower()]
    if delimiter is None:
        parquet = pq.ParquetFile(path)
        names = [normalise_header(n) for n in parquet.schema_arrow.names]
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
            yield batch.rename_columns(names)
        return
    with path.open("r", encoding="utf-8-sig") as fh:
        header = fh.readline().rstrip("\r\n").split(delimiter)
    names = [normalise_header(n) for n in header]
    table = _MappedTable(path)
    reader = pacsv.open_csv(
        table.source,
        read_options=pacsv.ReadOptions(
            column_names=names, skip_rows=1, block_size=CSV_BLOCK_BYTES, use_threads=False
        ),
        parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types=dict.fromkeys(names, pa.string()),
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    for taken, batch in enumerate(reader):
        # Batch n comes from block n or later (a block gives at most one batch, with the row
        # straddling into the next block): everything before block n has been parsed already.
        table.release_before(taken * CSV_BLOCK_BYTES)
        if batch.num_rows:
            yield batch


def _int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not text or text.upper() in ("NULL", "NA", "NAN"):
        return None
    number = float(text)  # "8507.0" from a spreadsheet round trip is still 8507
    if not number.is_integer() or not -(2**63) <= number < 2**63:
        raise ValueError(f"{value!r} is not an id")
    return int(number)


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, int | float):
        return None if value is None or value != value else float(value)
    text = str(value).strip()
    if not text or text.upper() in ("NULL", "NA", "NAN"):
        return None
    return float(text)


def _str(value: Any) -> str:
    if value is None:
        return ""
    text = str(value).strip()
    return "" if text.upper() == "NULL" else text


def _when(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else timezone.make_aware(value)
    if isinstance(value, date):
        return timezone.make_aware(datetime.combine(value, time()))
    text = str(value).strip()
    if not text or text.upper() == "NULL":
        return None
    return parse_timestamp(text)


class _BadValue(Exception):
    def __init__(self, column: str, message: str) -> None:
        self.column = column
        self.message = message
        super().__init__(message)


class _BadRow(Exception):
    """Several bad values of one row: each is named, not only the first."""

    def __init__(self, problems: list[_BadValue]) -> None:
        self.problems = problems
        super().__init__("; ".join(p.message for p in problems))


class _RowValues:
    """One row's values, read by column: a value that does not parse, or a check that fails,
    is noted and the row reads on, so ``check`` names every problem of the row at once."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self.problems: list[_BadValue] = []

    def get(self, column: str, parse: Any) -> Any:
        value = self.values.get(column)
        try:
            return parse(value)
        except (ValueError, TypeError, BadTimestamp) as exc:
            self.fail(column, str(exc) or f"{value!r} is not valid")
            return None

    def fail(self, column: str, message: str) -> None:
        self.problems.append(_BadValue(column, message))

    def start(self, dt_column: str, date_column: str) -> datetime | None:
        when = self.get(dt_column, _when) if dt_column != date_column else None
        when = when or self.get(date_column, _when)
        if when is None and not any(p.column in (dt_column, date_column) for p in self.problems):
            self.fail(date_column, "required value is empty")
        return when  # type: ignore[no-any-return]

    def check_birth(self, person: "_Person", when: datetime, person_id: Any, column: str) -> None:
        if person.birth is not None and when.date() < person.birth:
            self.fail(
                column,
                f"event on {when.date()} is before person {person_id}'s birth on {person.birth}",
            )

    def check(self) -> None:
        if self.problems:
            raise _BadRow(self.problems)


class _Named(NamedTuple):
    """A concept as the record shows it. ``fell_back``: the concept table lacks the id, so the
    code is ``CONCEPT/<id>`` and the row's source value names it."""

    code: str
    name: str
    fell_back: bool = False


class _Person:
    """What the importer keeps per person: ids, birth, tallies. Never per event or visit."""

    __slots__ = (
        "patient_id", "birth", "born", "events", "notes", "first", "last", "visits", "periods",
    )  # fmt: skip

    def __init__(self, patient_id: int, birth: date | None) -> None:
        self.patient_id = patient_id
        self.birth = birth
        # Local midnight of the birth date: an event before it is on an earlier day.
        # In the zone object the events' times carry (``local_zone``): compared with every event.
        self.born = (
            timezone.make_aware(datetime.combine(birth, time())).astimezone(local_zone())
            if birth
            else None
        )
        self.events = 0
        self.notes = 0
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.visits = 0
        self.periods: list[str] = []  # observation periods, as shown


class _Columns:
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

    def _fail(self, i: int, column: str, message: str) -> None:
        self.problems.append((self.offset + i + 1, column, message))
        self.bad.setdefault(i, set()).add(column)

    def fail_row(self, i: int, problems: list["_BadValue"]) -> None:
        """Name each of a row's problems, but not again a column that did not parse."""
        already = self.bad.get(i, ())
        for problem in problems:
            if problem.column not in already:
                self.problems.append((self.offset + i + 1, problem.column, problem.message))

    def _per_value(self, column: str, parse: Any) -> list[Any]:
        out: list[Any] = []
        for i, value in enumerate(pylist(self.batch.column(column))):
            try:
                out.append(parse(value))
            except (ValueError, TypeError, BadTimestamp) as exc:
                self._fail(i, column, str(exc) or f"{value!r} is not valid")
                out.append(None)
        return out

    def _straight(self, column: str, target: pa.DataType) -> pa.Array | None:
        """The column cast to ``target`` as it is, or None when a value needs trimming or is a
        blank or NULL word (or bad): most columns are clean, and one cast is a sixth of the
        careful way's work (0.12 against 0.79 ms a 16k batch). The cast refuses padding, blanks
        and words, so what it accepts the careful way reads alike."""
        try:
            return pc.cast(self.batch.column(column), target)
        except pa.ArrowInvalid:
            return None

    def _blank_as_null(self, column: str) -> pa.Array:
        """A text column trimmed, with '', NULL, NA and NAN as nulls."""
        array = self.batch.column(column).cast(pa.string())
        array = pc.utf8_trim_whitespace(array)
        upper = pc.utf8_upper(array)
        blank = pc.or_(pc.equal(array, ""), pc.is_in(upper, value_set=_NULL_WORDS))
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
        return self._per_value(column, _int)

    def floats(self, column: str) -> list[float | None]:
        if column not in self.names:
            return [None] * self.n
        array = self.batch.column(column)
        if pa.types.is_floating(array.type) or pa.types.is_integer(array.type):
            array = array.cast(pa.float64())
        elif pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            cast = self._cast_text(column, pa.float64())
            if cast is None:
                return self._per_value(column, _float)
            array = cast
        else:
            return self._per_value(column, _float)
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
                a.cast(pa.timestamp("us")) if pa.types.is_date(a.type) else a for a in arrays
            )
            if first.type == second.type:
                return local_times(pc.coalesce(first, second))
        values = [
            local_times(a) if a is not None else self._per_value(c, _when)
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
            return [_str(v) for v in pylist(array)]
        array = pc.utf8_trim_whitespace(array)
        array = pc.if_else(pc.equal(pc.utf8_upper(array), "NULL"), "", array)
        return pylist(pc.fill_null(array, ""))


_NULL_WORDS = pa.array(["NULL", "NA", "NAN"])
_MISSING = object()
# Concepts looked up for earlier batches are kept, up to this many (then forgotten, and looked up
# again when needed): a full vocabulary export holds millions.
CONCEPT_CACHE_MAX = 100_000
# Primary keys of one table checked for repeats in memory (12 bytes each, and 17 more while
# checked, a joined and a sorted copy: 29 MB at most); a larger table's go to a temporary table.
# At a million keys the temporary table's COPY, aggregate and DELETE cost PostgreSQL about
# 0.9 s; a NumPy sort 10 ms.
HELD_KEYS_MAX = 1_000_000
# Visits get provisional ordinals above any real one while they are read (the ordinal is unique
# per patient); the final numbering, by start time, happens in SQL at the end.
PROVISIONAL_ORDINAL = 1_000_000_000


class OmopLoader:
    def __init__(
        self, importer: ImportRun, tables: dict[str, Path], unread: dict[str, Path] | None = None
    ) -> None:
        self.importer = importer
        self.tables = tables
        self.unread = unread or {}
        # Concept ids a present concept table lacks, by the column that used them: their rows
        # fall back to the source value and the summary names them.
        self.missing_concepts: dict[str, set[int]] = {}
        self.cohort = CohortWriter(importer, "omop")
        self.has_concepts = "concept" in tables
        self.concepts: dict[int, tuple[str, str, str] | None] = {}  # id -> vocab, code, name
        self.persons: dict[int, _Person | None] = {}  # None: kept as already imported
        self.number_texts = NumberTexts()
        self.scratch: list[ScratchTable] = []
        self.pending_visits: list[tuple[int, int, int | None, int]] = []
        self.queued_persons: list[tuple[int, Patient]] = []
        # The current event table's primary keys and their rows (see _remember_keys).
        self.held_keys: list[tuple[pa.Array, pa.Array]] = []
        self.keys_in_table = False

    def problem(self, file: str, row: int | None, column: str | None, message: str) -> None:
        self.importer.problems.add(file, row, column, message, unit="row")

    def _table(self, name: str, columns: list[tuple[str, str]]) -> ScratchTable:
        table = ScratchTable(f"omop_import_{name}", columns)
        self.scratch.append(table)
        return table

    def run(self) -> None:
        try:
            self._run()
        except BaseException:
            self.cohort.close(failing=True)
            raise
        self.cohort.close()

    def _run(self) -> None:
        if "person" not in self.tables:
            first = next(iter(self.tables.values()))
            self.problem(first.name, None, None, "OMOP tables need the person table (person.csv)")
            return
        # What must be remembered across tables goes to temporary tables, not Python memory:
        # concepts, visits (id -> person, encounter), primary keys for the duplicate check, and
        # each batch's events per encounter (summed into the encounters at the end).
        self.concept_table = self._table(
            "concept",
            [("id", "bigint"), ("vocabulary", "text"), ("code", "text"), ("name", "text")],
        )
        self.visit_table = self._table(
            "visit",
            [
                ("id", "bigint"),
                ("person_id", "bigint"),
                ("encounter_id", "bigint"),
                ("row", "integer"),
            ],
        )
        self.key_table = self._table("key", [("id", "bigint"), ("row", "integer")])
        self.count_table = self._table("count", [("encounter_id", "bigint"), ("n", "integer")])
        self.tally_table = self._table(
            "tally",
            [
                ("patient_id", "bigint"),
                ("events", "integer"),
                ("notes", "integer"),
                ("first_at", "timestamptz"),
                ("last_at", "timestamptz"),
                ("demographics", "text"),
            ],
        )
        scratch_tables(*self.scratch)
        if self.has_concepts:
            self._read("concept", ("concept_id", "vocabulary_id", "concept_code"), self._concepts)
            self.concept_table.index("id")
        self._read(
            "person",
            ("person_id",),
            self._rows(self._person, _PERSON_CONCEPTS, after=self._create_persons),
        )
        if self.importer.problems.problems:
            return  # every later table is keyed on person: its problems would only repeat these
        if "visit_occurrence" in self.tables:
            self._read(
                "visit_occurrence",
                ("visit_occurrence_id", "person_id", "visit_start_date"),
                self._rows(self._visit, ("visit_concept_id",), after=self._write_visits),
            )
            self._report_repeats(
                self.visit_table,
                self.tables["visit_occurrence"].name,
                "visit_occurrence_id",
                "visit {id} appears twice",
            )
            self.visit_table.index("id")
            self.cohort.write_encounters()
        for name, spec in EVENT_TABLES.items():
            if name in self.tables:
                self._read(name, ("person_id", spec.date), self._events(name, spec))
                if spec.has_key:
                    self._report_key_repeats(
                        self.tables[name].name,
                        f"{name}_id",
                        f"{name}_id {{id}} appears again (first at row {{first}})",
                    )
        if "observation_period" in self.tables:
            self._read(
                "observation_period",
                ("person_id", "observation_period_start_date"),
                self._rows(self._observation_period, ()),
            )
        self.cohort.flush()
        self._summarise()
        if self.importer.problems.problems:
            return  # the import is refused: no need to finish the records
        self._finish_records()
        # Rows whose concept the vocabulary lacks keep CONCEPT/<id>: the review page says so
        # when they are most of a record.
        patients_count_undescribed(dataset_id=self.importer.dataset.pk)
        omop_concept_synonyms_import(
            dataset=self.importer.dataset, tables=self.tables, concepts=self.concept_table
        )
        drop_scratch_tables(self.scratch)

    # --- reading ----------------------------------------------------------------------------
    def _read(self, name: str, required: tuple[str, ...], handle: Any) -> None:
        path = self.tables[name]
        size = path.stat().st_size
        row = reported = 0
        try:
            for batch in iter_batches(path):
                if row == 0:
                    missing = [c for c in required if c not in batch.schema.names]
                    for column in missing:
                        self.problem(path.name, None, column, "required column is missing")
                    if missing:
                        break
                    self.importer.summary.files[path.name] = f"omop:{name}"
                nuls = list(nul_cells(batch))
                for at, column_name in nuls:
                    self.problem(path.name, row + at + 1, column_name, NUL_PROBLEM)
                columns = _Columns(batch, row)
                if not nuls:  # the import fails anyway: nothing of it reaches the database
                    handle(path.name, columns)
                # Problems in row order, whichever column they were found in.
                for problem_row, column, message in sorted(columns.problems):
                    self.problem(path.name, problem_row, column, message)
                row += batch.num_rows
                # The reader does not say how many bytes a batch came from; its Arrow size is
                # close for text columns, and the bar is squared up at the end of the table.
                step = min(batch.nbytes, size - reported)
                self.importer.progress(step)
                reported += step
        except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
            self.problem(path.name, row + 1, None, f"unreadable table ({exc})")
        self.importer.progress(size - reported)

    def _rows(self, handle: Any, concept_columns: tuple[str, ...], after: Any = None) -> Any:
        """A batch handler that calls ``handle`` per row with a dict of values (small tables)."""

        def handle_batch(file: str, columns: _Columns) -> None:
            batch = columns.batch
            values_by_column = {n: pylist(batch.column(n)) for n in batch.schema.names}
            self._prefetch_concepts(
                [columns.ints(c) for c in concept_columns if c in columns.names]
            )
            for i in range(columns.n):
                # A row with a value that did not parse is still checked, so each of its
                # problems is named; what it writes goes nowhere (the import is refused).
                values = {n: column[i] for n, column in values_by_column.items()}
                try:
                    handle(file, columns.offset + i + 1, values)
                except _BadValue as exc:
                    columns.fail_row(i, [exc])
                except _BadRow as exc:
                    columns.fail_row(i, exc.problems)
            if after is not None:
                after()

        return handle_batch

    def _summarise(self) -> None:
        """What the summary adds to the counts: the concepts that fell back, and the CDM's
        tables that were there but not read."""
        summary = self.importer.summary
        for column, ids in sorted(self.missing_concepts.items()):
            shown = ", ".join(str(i) for i in sorted(ids)[:10]) + (", …" if len(ids) > 10 else "")
            summary.warnings[
                f"{column}: concept(s) not in the concept table, shown by source value: {shown}"
            ] += len(ids)
        for name, path in sorted(self.unread.items()):
            if name == "concept_synonym" and self.has_concepts:
                continue  # read beside concept by the vocabulary service
            summary.tally(name, "ignored", _row_count(path))
            summary.files[path.name] = "omop:ignored"

    def _concepts(self, file: str, columns: _Columns) -> None:
        ids = columns.ints("concept_id")
        vocabularies = columns.texts("vocabulary_id")
        codes = columns.texts("concept_code")
        names = columns.texts("concept_name")
        rows = []
        for i, concept_id in enumerate(ids):
            if concept_id is None:
                if i not in columns.bad:
                    columns._fail(i, "concept_id", "required value is empty")
                continue
            rows.append((concept_id, vocabularies[i], codes[i], names[i]))
        self.concept_table.insert(rows)

    def _prefetch_concepts(self, id_columns: list[list[int | None]]) -> None:
        """Look up, in one query, the concepts of a batch that earlier batches did not need."""
        if not self.has_concepts:
            return
        wanted = {i for ids in id_columns for i in ids if i and i not in self.concepts}
        if not wanted:
            return
        if len(self.concepts) + len(wanted) > CONCEPT_CACHE_MAX:
            self.concepts = {}
        found = self.concept_table.lookup("id", wanted, ("vocabulary", "code", "name"))
        for concept_id in wanted:
            self.concepts[concept_id] = found.get(concept_id)  # type: ignore[assignment]

    def _concept(self, concept_id: int | None, column: str) -> _Named | None:
        """The code and name of a concept id; None when empty or 0 ("no matching concept").
        An id the concept table lacks is a gap in the vocabulary export, not in the record:
        ``CONCEPT/<id>``, named by the row's source value, counted as a fallback."""
        if not concept_id:
            return None
        if not self.has_concepts:
            return _Named(f"CONCEPT/{concept_id}", "")
        concept = self.concepts.get(concept_id, _MISSING)
        if concept is _MISSING:
            self._prefetch_concepts([[concept_id]])
            concept = self.concepts.get(concept_id)
        if concept is None:
            self.missing_concepts.setdefault(column, set()).add(concept_id)
            return _Named(f"CONCEPT/{concept_id}", "", True)
        vocab, code, name = concept  # type: ignore[misc]
        return _Named(f"{vocab}/{code}", name)

    def _person(self, file: str, row: int, values: dict[str, Any]) -> None:
        read = _RowValues(values)
        person_id = read.get("person_id", _int)
        if person_id is None:
            read.fail("person_id", "required value is empty")
        elif person_id in self.persons:
            read.fail("person_id", f"person {person_id} appears twice")
        birth = read.get("birth_datetime", _when)
        birth_date = birth.date() if birth else None
        if birth_date is None:
            year = read.get("year_of_birth", _int)
            if year:
                month = read.get("month_of_birth", _int) or 1
                day = read.get("day_of_birth", _int) or 1
                try:
                    birth_date = date(year, month, day)
                except ValueError as exc:
                    read.fail("year_of_birth", f"no such birth date ({exc})")
        demographics = {}
        fell_back = False
        for target in ("gender", "race", "ethnicity"):
            named = self._concept(read.get(f"{target}_concept_id", _int), f"{target}_concept_id")
            source = _str(values.get(f"{target}_source_value"))
            demographics[target] = (named.name if named and named.name else "") or source
            fell_back = fell_back or bool(named and named.fell_back)
        read.check()
        self.importer.summary.tally("person", "fell back" if fell_back else "read")
        patient = self.cohort.queue_patient(
            str(person_id),
            file,
            birth_date=birth_date,
            gender=normalise_sex(demographics["gender"])[:32],
            race=demographics["race"][:100],
            ethnicity=demographics["ethnicity"][:100],
        )
        if patient is None:
            self.persons[person_id] = None
            return
        # A queued patient's id comes when its batch's patients are created (_create_persons).
        self.persons[person_id] = _Person(patient.pk, birth_date)
        if patient.pk is None:
            self.queued_persons.append((person_id, patient))

    def _create_persons(self) -> None:
        self.cohort.create_patients()
        for person_id, patient in self.queued_persons:
            self.persons[person_id].patient_id = patient.pk  # type: ignore[union-attr]
        self.queued_persons = []

    def _known_person(self, read: "_RowValues") -> tuple[int | None, _Person | None]:
        """The row's person id and what is kept of them (None: kept as already imported, or
        a problem noted on ``read``)."""
        person_id = read.get("person_id", _int)
        if person_id is None:
            read.fail("person_id", "required value is empty")
            return None, None
        if person_id not in self.persons:
            read.fail("person_id", f"person {person_id} is not in the person table")
            return person_id, None
        return person_id, self.persons[person_id]

    def _visit(self, file: str, row: int, values: dict[str, Any]) -> None:
        read = _RowValues(values)
        visit_id = read.get("visit_occurrence_id", _int)
        if visit_id is None:
            read.fail("visit_occurrence_id", "required value is empty")
        person_id, person = self._known_person(read)
        start = read.start("visit_start_datetime", "visit_start_date")
        end = read.get("visit_end_datetime", _when)
        if end is None:
            end_date = read.get("visit_end_date", _when)
            # A date alone ends at the end of that day, so the day's events fall inside the visit.
            end = end_date.replace(hour=23, minute=59, second=59) if end_date else None
        named = self._concept(read.get("visit_concept_id", _int), "visit_concept_id")
        kind = (named.name or named.code) if named else _str(values.get("visit_source_value"))
        if person is not None and start is not None:
            read.check_birth(person, start, person_id, "visit_start_date")
        read.check()
        self.importer.summary.tally(
            "visit_occurrence", "fell back" if named and named.fell_back else "read"
        )
        encounter_id = None
        if person is not None and start is not None:
            # Written as read, numbered in SQL at the end (visits come in any order).
            person.visits += 1
            encounter = self.cohort.new_encounter(
                person.patient_id, PROVISIONAL_ORDINAL + person.visits, kind or "visit", start, end
            )
            encounter_id = encounter.id
            self.cohort.count(encounters=1)
            if len(self.cohort.pending_encounters) >= 500:
                self.cohort.write_encounters()
        self.pending_visits.append((visit_id, person_id, encounter_id, row))

    def _write_visits(self) -> None:
        self.visit_table.insert(self.pending_visits)
        self.pending_visits = []

    def _observation_period(self, file: str, row: int, values: dict[str, Any]) -> None:
        """The span the record covers: kept on the patient, not as an event."""
        read = _RowValues(values)
        _, person = self._known_person(read)
        start = read.start("observation_period_start_date", "observation_period_start_date")
        end = read.get("observation_period_end_date", _when)
        read.check()
        self.importer.summary.tally("observation_period", "read")
        if person is not None and start is not None:
            shown = f"{start.date()} to {end.date()}" if end else f"from {start.date()}"
            person.periods.append(shown)

    def _report_repeats(self, table: ScratchTable, file: str, column: str, message: str) -> None:
        limit = self.importer.problems.MAX_KEPT
        for key, first, again in table.repeats("id", "row", limit):
            self.problem(file, again, column, message.format(id=key, first=first))

    # --- events -----------------------------------------------------------------------------
    def _events(self, name: str, spec: EventTable) -> Any:
        def handle_batch(file: str, columns: _Columns) -> None:
            self._event_batch(file, columns, name, spec)

        return handle_batch

    def _event_batch(self, file: str, columns: _Columns, table: str, spec: EventTable) -> None:
        """One batch of an event table: parsed a column at a time, then one lean pass."""
        n = columns.n
        if spec.has_key:
            self._remember_keys(columns, columns.ints(f"{table}_id"))
        person_ids = columns.ints("person_id")
        whens = columns.times(spec.datetime, spec.date)
        ends = columns.times(*spec.end) if spec.end else None
        concept_ids = columns.ints(spec.concept)
        visit_ids = columns.ints("visit_occurrence_id")
        sources = columns.texts(spec.source_value)
        note = spec.event_type == "note"
        death = spec.event_type == "death"
        if note:
            titles = columns.texts("note_title")
            note_texts = columns.texts("note_text")
            note_kinds = columns.ints("note_type_concept_id")
            extra_concepts = [note_kinds]
        else:
            numerics = columns.floats("value_as_number")
            value_texts = columns.texts("value_as_string")
            value_concepts = columns.ints("value_as_concept_id")
            value_sources = columns.texts("value_source_value")
            unit_sources = columns.texts("unit_source_value")
            unit_concepts = columns.ints("unit_concept_id")
            extra_concepts = [value_concepts, unit_concepts]
        self._prefetch_concepts([concept_ids, *extra_concepts])
        # Each distinct concept of the batch is resolved once: a code and name, or None.
        names = self._resolve(concept_ids, spec.concept)
        if note:
            kinds = self._resolve(note_kinds, "note_type_concept_id")
        else:
            value_names = self._resolve(value_concepts, "value_as_concept_id")
            unit_names = self._resolve(unit_concepts, "unit_concept_id")
            units = {
                # UCUM's concept code is the unit ("mg/dL"); a bare concept id is none.
                cid: named.code.split("/", 1)[1]
                if named and not named.code.startswith("CONCEPT/")
                else ""
                for cid, named in unit_names.items()
            }
        has_visits = "visit_occurrence" in self.tables
        visits: dict[Any, tuple[Any, ...]] = {}
        if has_visits:
            visits = self.visit_table.lookup(
                "id", (v for v in visit_ids if v is not None), ("person_id", "encounter_id")
            )
        persons = self.persons
        bad = columns.bad
        rows = self.cohort.rows
        append = rows.append
        # A plain dict: a Counter's ``+= 1`` costs 220 ns a row here, ``get`` and a store 50.
        per_encounter: dict[int, int] = {}
        count = per_encounter.get
        number_texts = self.number_texts
        event_type = spec.event_type
        read = fell_back = 0
        for i in range(n):
            # Every check runs, so a row with several bad fields names each of them.
            problems: list[_BadValue] | None = None
            person_id = person_ids[i]
            person: Any = _MISSING
            if person_id is None:
                problems = [_BadValue("person_id", "required value is empty")]
            else:
                person = persons.get(person_id, _MISSING)
                if person is _MISSING:
                    problems = [
                        _BadValue("person_id", f"person {person_id} is not in the person table")
                    ]
            when = whens[i]
            if when is None:
                problems = problems or []
                problems.append(_BadValue(spec.date, "required value is empty"))
            encounter_id = None
            visit_id = visit_ids[i]
            if visit_id is not None and has_visits:
                visit = visits.get(visit_id)
                message = None
                if visit is None:
                    message = f"visit {visit_id} is not in the table"
                elif person_id is not None and visit[0] != person_id:
                    message = f"visit {visit_id} belongs to another person"
                else:
                    encounter_id = visit[1]
                if message:
                    problems = problems or []
                    problems.append(_BadValue("visit_occurrence_id", message))
            if (
                person is not _MISSING
                and person is not None
                and when is not None
                and person.born is not None
                and when < person.born
                and when.date() < person.birth
            ):
                problems = problems or []
                problems.append(
                    _BadValue(
                        spec.date,
                        f"event on {when.date()} is before person {person_id}'s birth "
                        f"on {person.birth}",
                    )
                )
            if problems or i in bad:
                columns.fail_row(i, problems or [])
                continue
            if person is None:
                continue  # kept as already imported
            named = names[concept_ids[i]]
            source = sources[i]
            code, name, missing = named if named else ("", "", False)  # 0: no matching concept
            if death:
                # MEDS's death code; the concept, when there is one, is the cause.
                value = (name or source)[:100]
                attributes = {"cause": code} if code else {}
                code, name = meds.death_code, "Death"
            else:
                name = name or source or code or "unmapped"
                attributes = {"source_value": source} if source and source != name else {}
            if ends is not None and ends[i] is not None:
                attributes["end"] = ends[i].isoformat()  # type: ignore[union-attr]
            person.events += 1
            if person.first is None or when < person.first:
                person.first = when
            if person.last is None or when > person.last:
                person.last = when
            if encounter_id is not None:
                per_encounter[encounter_id] = count(encounter_id, 0) + 1
            if note:
                kind = kinds[note_kinds[i]]
                missing = missing or bool(kind and kind.fell_back)
                note_type = titles[i] or (kind.name if kind else "") or name
                person.notes += 1
                # fmt: off
                append((person.patient_id, encounter_id, person.events, when, "note",
                        code[:120], note_type[:500], "", None, "", note_texts[i],
                        note_type[:120], attributes or NO_ATTRIBUTES))
                # fmt: on
            else:
                # As OMOP's conventions and meds_etl read a result: the number, else the
                # string, else the answer concept's name, else the source value (where
                # Synthea keeps urinalysis results and T-scores).
                numeric = numerics[i]
                if numeric is not None:
                    value = number_texts[numeric]
                elif not death:
                    value = value_texts[i]
                    as_concept = value_names[value_concepts[i]]
                    if not value and as_concept:
                        missing = missing or as_concept.fell_back
                        value = as_concept.name
                    if not value:
                        value = value_sources[i]
                        numeric = _number_or_none(value) if value else None
                unit = unit_sources[i]
                if not unit:
                    unit_named = unit_names[unit_concepts[i]]
                    missing = missing or bool(unit_named and unit_named.fell_back)
                    unit = units[unit_concepts[i]]
                # fmt: off
                append((person.patient_id, encounter_id, person.events, when, event_type,
                        code[:120], name[:500], value[:100], numeric, unit[:60], "", "",
                        attributes or NO_ATTRIBUTES))
                # fmt: on
            if missing:
                fell_back += 1
            else:
                read += 1
            if len(rows) >= EVENT_FLUSH_ROWS:
                self.cohort.flush_later()
        if per_encounter:
            self.count_table.insert(per_encounter.items())
        summary = self.importer.summary
        summary.tally(table, "read", read)
        if fell_back:
            summary.tally(table, "fell back", fell_back)

    def _resolve(self, ids: list[int | None], column: str) -> dict[int | None, _Named | None]:
        return {concept_id: self._concept(concept_id, column) for concept_id in set(ids)}

    def _remember_keys(self, columns: _Columns, ids: list[int | None]) -> None:
        """Primary keys and their rows, to find repeats when the table ends. Up to
        ``HELD_KEYS_MAX`` keys are held in memory and checked there (12 bytes a key); a table
        with more goes to a temporary table and is checked in SQL, so memory stays bounded."""
        id_array = pa.array(ids, pa.int64())
        rows = pa.array(range(columns.offset + 1, columns.offset + columns.n + 1), pa.int32())
        present = pc.is_valid(id_array)
        keys = (id_array.filter(present), rows.filter(present))
        held = sum(len(ids) for ids, _ in self.held_keys)
        if not self.keys_in_table and held + len(keys[0]) <= HELD_KEYS_MAX:
            self.held_keys.append(keys)
            return
        for earlier in self.held_keys:
            self.key_table.insert_arrays(earlier)
        self.held_keys = []
        self.keys_in_table = True
        self.key_table.insert_arrays(keys)

    def _report_key_repeats(self, file: str, column: str, message: str) -> None:
        """Name every repeated primary key of the table just read; forget its keys."""
        limit = self.importer.problems.MAX_KEPT
        if self.keys_in_table:
            repeats = self.key_table.repeats("id", "row", limit)
            self.key_table.clear()
        elif self.held_keys:
            ids = pa.chunked_array([k for k, _ in self.held_keys], pa.int64())
            rows = pa.chunked_array([r for _, r in self.held_keys], pa.int32())
            repeats = _repeats(ids, rows)[:limit]
        else:
            repeats = []
        self.held_keys = []
        self.keys_in_table = False
        for key, first, again in repeats:
            self.problem(file, again, column, message.format(id=key, first=first))

    # --- finishing ----------------------------------------------------------------------------
    def _finish_records(self) -> None:
        """Encounter numbers and counts, patient tallies: set-based, from what was written."""
        encounters = Encounter._meta.db_table
        visits = self.visit_table.name
        counts = self.count_table.name
        with connection.cursor() as cursor:
            # OMOP visits come in any order: number them by start time, as the record page
            # lists them. Provisional ordinals are above any final one, so no two collide.
            cursor.execute(
                f"UPDATE {encounters} SET ordinal = ranked.ordinal FROM ("  # noqa: S608
                f"SELECT id, ROW_NUMBER() OVER (PARTITION BY patient_id ORDER BY start, id) "
                f"AS ordinal FROM {encounters} WHERE id IN "
                f"(SELECT encounter_id FROM {visits} WHERE encounter_id IS NOT NULL)"
                f") AS ranked WHERE {encounters}.id = ranked.id"
            )
            cursor.execute(
                f"UPDATE {encounters} SET event_count = summed.n FROM ("  # noqa: S608
                f"SELECT encounter_id, SUM(n) AS n FROM {counts} GROUP BY encounter_id"
                f") AS summed WHERE {encounters}.id = summed.encounter_id"
            )
        people = [p for p in self.persons.values() if p is not None]
        # One statement from a scratch table, not Django's bulk_update: its CASE expressions
        # cost 1.9 s of Python for 1,000 people.
        adapt = connection.ops.adapt_datetimefield_value
        self.tally_table.insert(
            (
                p.patient_id,
                p.events,
                p.notes,
                adapt(p.first),
                adapt(p.last),
                # OMOP demographics are columns; only the observation periods land here.
                json.dumps({"observation_period": "; ".join(p.periods)} if p.periods else {}),
            )
            for p in people
        )
        patients = Patient._meta.db_table
        tallies = self.tally_table.name
        as_json = "t.demographics::jsonb" if connection.vendor == "postgresql" else "t.demographics"
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {patients} SET event_count = t.events, note_count = t.notes, "  # noqa: S608
                f"first_event_at = t.first_at, last_event_at = t.last_at, "
                f"demographics = {as_json} FROM {tallies} AS t WHERE {patients}.id = t.patient_id"
            )
        self.cohort.count(
            patients=len(people),
            events=sum(p.events for p in people),
            notes=sum(p.notes for p in people),
        )


_PERSON_CONCEPTS = ("gender_concept_id", "race_concept_id", "ethnicity_concept_id")


def _number_or_none(text: str) -> float | None:
    """A result kept as text ("-2.7") as a number too; None for words ("Negative")."""
    try:
        number = float(text)
    except ValueError:
        return None
    return number if number == number and abs(number) != float("inf") else None


def _repeats(
    ids: pa.Array | pa.ChunkedArray, rows: pa.Array | pa.ChunkedArray
) -> list[tuple[int, int, int]]:
    """(id, first row, repeated row) for each row whose id an earlier row had, by row: what
    ``ScratchTable.repeats`` finds in SQL, for keys held in memory."""
    # Whether any id repeats, by sorting a copy: Arrow's distinct count builds a hash table
    # four times the ids' size (60 MB more peak memory at a million keys).
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


def load_omop(
    importer: ImportRun, tables: dict[str, Path], unread: dict[str, Path] | None = None
) -> None:
    """Load OMOP CDM ``tables`` (by table name) through ``importer`` (inside its transaction);
    ``unread``: the CDM's other tables found beside them, named in the summary as ignored."""
    # Arrow's default allocator (mimalloc) keeps the CSV blocks' and casts' freed pages: over a
    # 1M-event import its peak grew 1.33x (261 -> 348 MB) while the importer's own data stayed
    # flat. The system allocator (glibc) gives most of them back but still grew 16 MB from 100k
    # to 1M events (fragmentation); jemalloc, where pyarrow has it, stays flat (234 -> 238 MB).
    # Restored afterwards.
    pool = pa.default_memory_pool()
    pa.set_memory_pool(_import_memory_pool())
    try:
        OmopLoader(importer, tables, unread).run()
    finally:
        pa.set_memory_pool(pool)


def _import_memory_pool() -> pa.MemoryPool:
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc
        return pa.system_memory_pool()
