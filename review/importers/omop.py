"""OMOP CDM importer: ``person``, ``visit_occurrence``, the event tables and ``note``, as CSV/TSV
or Parquet, with names from ``concept`` when that table is present.

Every table is read in Arrow record batches (``BATCH_ROWS`` rows; CSV columns read as text). A
batch is parsed a column at a time with ``pyarrow.compute`` casts; a column holding something the
cast refuses is parsed value by value, so a bad value is still named by table, row and column.

Unlike MEDS, OMOP tables are not grouped by patient, and an event may name any visit. What must
be remembered across the input lives in temporary tables (``scratch.py``), not in Python:
concepts, the visit map (visit id -> person, encounter), every primary key read (duplicates are
found in SQL when a table ends) and each batch's events per encounter. A batch asks them, in one
query each, for what it needs. Encounters are written as their visits are read, with provisional
ordinals, and numbered by start time in SQL at the end. The importer's own memory holds a few
numbers per person (ids, birth, tallies) and one batch: flat in the number of events and visits.

Codes are ``VOCABULARY/concept_code`` from ``concept`` (e.g. ``LOINC/8867-4``); without a concept
table, or for concept 0 ("no matching concept"), an event keeps ``CONCEPT/<id>`` and its source
value as the name. A concept id that a present concept table lacks is a problem: it usually means
the vocabulary export does not match the CDM.

Problems, all named by table, row (1 = first data row) and column: a person or visit that is not
in its table, duplicate primary keys, unknown concept ids, unreadable dates, events dated before
the person's birth (compared by date: birth times are often just midnight).
"""

import mmap
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from django.db import connection
from django.utils import timezone

from review.models import Encounter, Patient
from review.services.vocabulary import omop_concept_synonyms_import

from .columnar import BATCH_ROWS, CohortWriter, local_times
from .loader import EVENT_FLUSH_ROWS, NO_ATTRIBUTES, _Importer
from .scratch import ScratchTable, drop_scratch_tables, scratch_tables
from .tables import normalise_header
from .timestamps import BadTimestamp, parse_timestamp

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
}
TABLES = ("concept", "person", "visit_occurrence", *EVENT_TABLES)


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


class _Person:
    """What the importer keeps per person: ids, birth, tallies. Never per event or visit."""

    __slots__ = ("patient_id", "birth", "born", "events", "notes", "first", "last", "visits")

    def __init__(self, patient_id: int, birth: date | None) -> None:
        self.patient_id = patient_id
        self.birth = birth
        # Local midnight of the birth date: an event before it is on an earlier day.
        self.born = timezone.make_aware(datetime.combine(birth, time())) if birth else None
        self.events = 0
        self.notes = 0
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.visits = 0


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
        self.bad: set[int] = set()

    def _fail(self, i: int, column: str, message: str) -> None:
        self.problems.append((self.offset + i + 1, column, message))
        self.bad.add(i)

    def _per_value(self, column: str, parse: Any) -> list[Any]:
        out: list[Any] = []
        for i, value in enumerate(self.batch.column(column).to_pylist()):
            try:
                out.append(parse(value))
            except (ValueError, TypeError, BadTimestamp) as exc:
                self._fail(i, column, str(exc) or f"{value!r} is not valid")
                out.append(None)
        return out

    def _blank_as_null(self, column: str) -> pa.Array:
        """A text column trimmed, with '', NULL, NA and NAN as nulls."""
        array = self.batch.column(column).cast(pa.string())
        array = pc.utf8_trim_whitespace(array)
        upper = pc.utf8_upper(array)
        blank = pc.or_(pc.equal(array, ""), pc.is_in(upper, value_set=_NULL_WORDS))
        return pc.if_else(blank, pa.scalar(None, pa.string()), array)

    def ints(self, column: str) -> list[int | None]:
        if column not in self.names:
            return [None] * self.n
        array = self.batch.column(column)
        if pa.types.is_integer(array.type):
            return array.to_pylist()  # type: ignore[no-any-return]
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            try:
                return pc.cast(self._blank_as_null(column), pa.int64()).to_pylist()  # type: ignore[no-any-return]
            except pa.ArrowInvalid:
                pass  # "8507.0", or a bad value: the slow way names the row
        return self._per_value(column, _int)

    def floats(self, column: str) -> list[float | None]:
        if column not in self.names:
            return [None] * self.n
        array = self.batch.column(column)
        if pa.types.is_floating(array.type) or pa.types.is_integer(array.type):
            array = array.cast(pa.float64())
        elif pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            try:
                array = pc.cast(self._blank_as_null(column), pa.float64())
            except pa.ArrowInvalid:
                return self._per_value(column, _float)
        else:
            return self._per_value(column, _float)
        return pc.if_else(pc.is_nan(array), pa.scalar(None, pa.float64()), array).to_pylist()  # type: ignore[no-any-return]

    def _timestamps(self, column: str) -> pa.Array | None:
        """The column as Arrow timestamps or dates; None when only the slow way can read it."""
        array = self.batch.column(column)
        if pa.types.is_timestamp(array.type) or pa.types.is_date(array.type):
            return array
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            try:
                # ISO dates and times without a zone, the CDM's own form; anything else (a zone
                # offset, US order, a bad value) goes the slow way, which names the row.
                return pc.cast(self._blank_as_null(column), pa.timestamp("us"))
            except pa.ArrowInvalid:
                pass
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
            return [_str(v) for v in array.to_pylist()]
        array = pc.utf8_trim_whitespace(array)
        array = pc.if_else(pc.equal(pc.utf8_upper(array), "NULL"), "", array)
        return pc.fill_null(array, "").to_pylist()  # type: ignore[no-any-return]


_NULL_WORDS = pa.array(["NULL", "NA", "NAN"])
_MISSING = object()
# Concepts looked up for earlier batches are kept, up to this many (then forgotten, and looked up
# again when needed): a full vocabulary export holds millions.
CONCEPT_CACHE_MAX = 100_000
# Visits get provisional ordinals above any real one while they are read (the ordinal is unique
# per patient); the final numbering, by start time, happens in SQL at the end.
PROVISIONAL_ORDINAL = 1_000_000_000


class OmopLoader:
    def __init__(self, importer: _Importer, tables: dict[str, Path]) -> None:
        self.importer = importer
        self.tables = tables
        self.cohort = CohortWriter(importer, "omop")
        self.has_concepts = "concept" in tables
        self.concepts: dict[int, tuple[str, str, str] | None] = {}  # id -> vocab, code, name
        self.persons: dict[int, _Person | None] = {}  # None: kept as already imported
        self.scratch: list[ScratchTable] = []
        self.pending_visits: list[tuple[int, int, int | None, int]] = []
        self.queued_persons: list[tuple[int, Patient]] = []
        # The current event table's primary keys (see _remember_keys).
        self.held_keys: tuple[pa.Array, pa.Array] | None = None
        self.keys_in_table = False

    def problem(self, file: str, row: int | None, column: str | None, message: str) -> None:
        self.importer.problems.add(file, row, column, message, unit="row")

    def _table(self, name: str, columns: list[tuple[str, str]]) -> ScratchTable:
        table = ScratchTable(f"omop_import_{name}", columns)
        self.scratch.append(table)
        return table

    def run(self) -> None:
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
                self._read(name, ("person_id", spec.date), self._events(spec, f"{name}_id"))
                self._report_key_repeats(
                    self.tables[name].name,
                    f"{name}_id",
                    f"{name}_id {{id}} appears again (first at row {{first}})",
                )
        self.cohort.flush()
        if self.importer.problems.problems:
            return  # the import is refused: no need to finish the records
        self._finish_records()
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
                columns = _Columns(batch, row)
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
            values_by_column = {n: batch.column(n).to_pylist() for n in batch.schema.names}
            self._prefetch_concepts(
                [columns.ints(c) for c in concept_columns if c in columns.names]
            )
            for i in range(columns.n):
                if i in columns.bad:
                    continue
                values = {n: column[i] for n, column in values_by_column.items()}
                try:
                    handle(file, columns.offset + i + 1, values)
                except _BadValue as exc:
                    columns.problems.append((columns.offset + i + 1, exc.column, exc.message))
            if after is not None:
                after()

        return handle_batch

    def _value(self, values: dict[str, Any], column: str, parse: Any) -> Any:
        try:
            return parse(values.get(column))
        except (ValueError, TypeError, BadTimestamp) as exc:
            raise _BadValue(column, str(exc) or f"{values.get(column)!r} is not valid") from None

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

    def _concept(self, concept_id: int | None, column: str) -> tuple[str, str] | None:
        """(code, name) of a concept id; None when empty or 0 ("no matching concept")."""
        if not concept_id:
            return None
        if not self.has_concepts:
            return f"CONCEPT/{concept_id}", ""
        concept = self.concepts.get(concept_id, _MISSING)
        if concept is _MISSING:
            self._prefetch_concepts([[concept_id]])
            concept = self.concepts.get(concept_id)
        if concept is None:
            raise _BadValue(column, f"concept {concept_id} is not in the concept table")
        vocab, code, name = concept  # type: ignore[misc]
        return f"{vocab}/{code}", name

    def _name(
        self, file: str, row: int, values: dict[str, Any], column: str
    ) -> tuple[str, str] | None:
        return self._concept(self._value(values, column, _int), column)

    def _person(self, file: str, row: int, values: dict[str, Any]) -> None:
        person_id = self._value(values, "person_id", _int)
        if person_id is None:
            raise _BadValue("person_id", "required value is empty")
        if person_id in self.persons:
            raise _BadValue("person_id", f"person {person_id} appears twice")
        birth = self._value(values, "birth_datetime", _when)
        birth_date = birth.date() if birth else None
        if birth_date is None:
            year = self._value(values, "year_of_birth", _int)
            if year:
                month = self._value(values, "month_of_birth", _int) or 1
                day = self._value(values, "day_of_birth", _int) or 1
                try:
                    birth_date = date(year, month, day)
                except ValueError as exc:
                    raise _BadValue("year_of_birth", f"no such birth date ({exc})") from None
        demographics = {}
        for target in ("gender", "race", "ethnicity"):
            named = self._name(file, row, values, f"{target}_concept_id")
            source = _str(values.get(f"{target}_source_value"))
            demographics[target] = (named[1] if named and named[1] else "") or source
        patient = self.cohort.queue_patient(
            str(person_id),
            file,
            birth_date=birth_date,
            gender=demographics["gender"][:32],
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

    def _known_person(self, values: dict[str, Any], table: str) -> tuple[int, _Person | None]:
        person_id = self._value(values, "person_id", _int)
        if person_id is None:
            raise _BadValue("person_id", "required value is empty")
        if person_id not in self.persons:
            raise _BadValue("person_id", f"person {person_id} is not in the person table")
        return person_id, self.persons[person_id]

    def _visit(self, file: str, row: int, values: dict[str, Any]) -> None:
        visit_id = self._value(values, "visit_occurrence_id", _int)
        if visit_id is None:
            raise _BadValue("visit_occurrence_id", "required value is empty")
        person_id, person = self._known_person(values, "visit_occurrence")
        start = self._start(values, "visit_start_datetime", "visit_start_date")
        end = self._value(values, "visit_end_datetime", _when)
        if end is None:
            end_date = self._value(values, "visit_end_date", _when)
            # A date alone ends at the end of that day, so the day's events fall inside the visit.
            end = end_date.replace(hour=23, minute=59, second=59) if end_date else None
        named = self._name(file, row, values, "visit_concept_id")
        kind = (named[1] or named[0]) if named else _str(values.get("visit_source_value"))
        encounter_id = None
        if person is not None:
            self._check_birth(person, start, person_id, "visit_start_date")
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

    def _start(self, values: dict[str, Any], dt_column: str, date_column: str) -> datetime:
        when = self._value(values, dt_column, _when) or self._value(values, date_column, _when)
        if when is None:
            raise _BadValue(date_column, "required value is empty")
        return when

    def _check_birth(self, person: _Person, when: datetime, person_id: int, column: str) -> None:
        if person.birth is not None and when.date() < person.birth:
            raise _BadValue(
                column,
                f"event on {when.date()} is before person {person_id}'s birth on {person.birth}",
            )

    def _report_repeats(self, table: ScratchTable, file: str, column: str, message: str) -> None:
        limit = self.importer.problems.MAX_KEPT
        for key, first, again in table.repeats("id", "row", limit):
            self.problem(file, again, column, message.format(id=key, first=first))

    # --- events -----------------------------------------------------------------------------
    def _events(self, spec: EventTable, key: str) -> Any:
        def handle_batch(file: str, columns: _Columns) -> None:
            self._event_batch(file, columns, spec, key)

        return handle_batch

    def _event_batch(self, file: str, columns: _Columns, spec: EventTable, key: str) -> None:
        """One batch of an event table: parsed a column at a time, then one lean pass."""
        n = columns.n
        event_ids = columns.ints(key)
        self._remember_keys(columns, event_ids)
        person_ids = columns.ints("person_id")
        whens = columns.times(spec.datetime, spec.date)
        concept_ids = columns.ints(spec.concept)
        visit_ids = columns.ints("visit_occurrence_id")
        sources = columns.texts(spec.source_value)
        note = spec.event_type == "note"
        if note:
            titles = columns.texts("note_title")
            note_texts = columns.texts("note_text")
            note_kinds = columns.ints("note_type_concept_id")
            extra_concepts = [note_kinds]
        else:
            numerics = columns.floats("value_as_number")
            value_texts = columns.texts("value_as_string")
            value_concepts = columns.ints("value_as_concept_id")
            unit_sources = columns.texts("unit_source_value")
            unit_concepts = columns.ints("unit_concept_id")
            extra_concepts = [value_concepts, unit_concepts]
        self._prefetch_concepts([concept_ids, *extra_concepts])
        # Each distinct concept of the batch is resolved once: (code, name), None, or the
        # problem to name on every row that uses it.
        names = self._resolve(concept_ids, spec.concept)
        if note:
            kinds = self._resolve(note_kinds, "note_type_concept_id")
        else:
            value_names = self._resolve(value_concepts, "value_as_concept_id")
            units = {
                cid: (
                    named
                    if isinstance(named, _BadValue)
                    # UCUM's concept code is the unit ("mg/dL"); a bare concept id is none.
                    else named[0].split("/", 1)[1]
                    if named and not named[0].startswith("CONCEPT/")
                    else ""
                )
                for cid, named in self._resolve(unit_concepts, "unit_concept_id").items()
            }
        visits: dict[Any, tuple[Any, ...]] = {}
        if "visit_occurrence" in self.tables:
            visits = self.visit_table.lookup(
                "id", (v for v in visit_ids if v is not None), ("person_id", "encounter_id")
            )
        persons = self.persons
        bad = columns.bad
        offset = columns.offset
        problems = columns.problems
        rows = self.cohort.rows
        append = rows.append
        per_encounter: Counter[int] = Counter()
        event_type = spec.event_type
        for i in range(n):
            if i in bad:
                continue
            row = offset + i + 1
            try:
                person_id = person_ids[i]
                if person_id is None:
                    raise _BadValue("person_id", "required value is empty")
                person = persons.get(person_id, _MISSING)
                if person is _MISSING:
                    raise _BadValue("person_id", f"person {person_id} is not in the person table")
                when = whens[i]
                if when is None:
                    raise _BadValue(spec.date, "required value is empty")
                named = names[concept_ids[i]]
                if isinstance(named, _BadValue):
                    raise named
                encounter_id = None
                visit_id = visit_ids[i]
                if visit_id is not None and "visit_occurrence" in self.tables:
                    visit = visits.get(visit_id)
                    if visit is None:
                        raise _BadValue(
                            "visit_occurrence_id", f"visit {visit_id} is not in the table"
                        )
                    if visit[0] != person_id:
                        raise _BadValue(
                            "visit_occurrence_id", f"visit {visit_id} belongs to another person"
                        )
                    encounter_id = visit[1]
                if person is None:
                    continue  # kept as already imported
                born = person.born  # type: ignore[union-attr]
                if born is not None and when < born:
                    self._check_birth(person, when, person_id, spec.date)  # type: ignore[arg-type]
                source = sources[i]
                code, name = named if named else ("", "")  # concept 0: "no matching concept"
                name = name or source or code or "unmapped"
                attributes = (
                    {"source_value": source} if source and source != name else NO_ATTRIBUTES
                )
                person.events += 1
                if person.first is None or when < person.first:
                    person.first = when
                if person.last is None or when > person.last:
                    person.last = when
                if encounter_id is not None:
                    per_encounter[encounter_id] += 1
                if note:
                    kind = kinds[note_kinds[i]]
                    if isinstance(kind, _BadValue):
                        raise kind
                    note_type = titles[i] or (kind[1] if kind else "") or name
                    person.notes += 1
                    # fmt: off
                    append((person.patient_id, encounter_id, person.events, when, "note",
                            code[:120], note_type[:500], "", None, "", note_texts[i],
                            note_type[:120], attributes))
                    # fmt: on
                else:
                    numeric = numerics[i]
                    value = f"{numeric:g}" if numeric is not None else value_texts[i]
                    if not value:
                        as_concept = value_names[value_concepts[i]]
                        if isinstance(as_concept, _BadValue):
                            raise as_concept
                        value = as_concept[1] if as_concept else ""
                    unit = unit_sources[i]
                    if not unit:
                        unit_or_problem = units[unit_concepts[i]]
                        if isinstance(unit_or_problem, _BadValue):
                            raise unit_or_problem
                        unit = unit_or_problem
                    # fmt: off
                    append((person.patient_id, encounter_id, person.events, when, event_type,
                            code[:120], name[:500], value[:100], numeric, unit[:60], "", "",
                            attributes))
                    # fmt: on
            except _BadValue as exc:
                problems.append((row, exc.column, exc.message))
                continue
            if len(rows) >= EVENT_FLUSH_ROWS:
                self.cohort.flush()
        if per_encounter:
            self.count_table.insert(per_encounter.items())

    def _resolve(
        self, ids: list[int | None], column: str
    ) -> dict[int | None, tuple[str, str] | None | _BadValue]:
        resolved: dict[int | None, tuple[str, str] | None | _BadValue] = {}
        for concept_id in set(ids):
            try:
                resolved[concept_id] = self._concept(concept_id, column)
            except _BadValue as exc:
                resolved[concept_id] = exc
        return resolved

    def _remember_keys(self, columns: _Columns, ids: list[int | None]) -> None:
        """Primary keys and their rows go to a temporary table; duplicates are found in SQL.
        A table's first batch is held back: a table read in one batch (every table of a small
        cohort) is checked in memory, without the table's COPY, query and DELETE."""
        id_array = pa.array(ids, pa.int64())
        rows = pa.array(range(columns.offset + 1, columns.offset + columns.n + 1), pa.int32())
        present = pc.is_valid(id_array)
        keys = (id_array.filter(present), rows.filter(present))
        if self.held_keys is None and not self.keys_in_table:
            self.held_keys = keys
            return
        if self.held_keys is not None:
            self.key_table.insert_arrays(self.held_keys)
            self.held_keys = None
        self.keys_in_table = True
        self.key_table.insert_arrays(keys)

    def _report_key_repeats(self, file: str, column: str, message: str) -> None:
        """Name every repeated primary key of the table just read; forget its keys."""
        limit = self.importer.problems.MAX_KEPT
        if self.held_keys is not None:
            repeats = _repeats(*self.held_keys)[:limit]
        elif self.keys_in_table:
            repeats = self.key_table.repeats("id", "row", limit)
            self.key_table.clear()
        else:
            repeats = []
        self.held_keys = None
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
        for start in range(0, len(people), 500):
            chunk = people[start : start + 500]
            Patient.objects.bulk_update(
                [
                    Patient(
                        pk=p.patient_id,
                        event_count=p.events,
                        note_count=p.notes,
                        first_event_at=p.first,
                        last_event_at=p.last,
                    )
                    for p in chunk
                ],
                ["event_count", "note_count", "first_event_at", "last_event_at"],
            )
        self.cohort.count(
            patients=len(people),
            events=sum(p.events for p in people),
            notes=sum(p.notes for p in people),
        )


_PERSON_CONCEPTS = ("gender_concept_id", "race_concept_id", "ethnicity_concept_id")


def _repeats(ids: pa.Array, rows: pa.Array) -> list[tuple[int, int, int]]:
    """(id, first row, repeated row) for each row whose id an earlier row had, by row: what
    ``ScratchTable.repeats`` finds in SQL, for one batch's keys."""
    if pc.count_distinct(ids).as_py() == len(ids):
        return []  # the usual case, without a Python step per row
    first: dict[int, int] = {}
    found = []
    for key, row in zip(ids.to_pylist(), rows.to_pylist(), strict=True):
        if key in first:
            found.append((key, first[key], row))
        else:
            first[key] = row
    return found


def load_omop(importer: _Importer, tables: dict[str, Path]) -> None:
    """Load OMOP CDM ``tables`` (by table name) through ``importer`` (inside its transaction)."""
    # Arrow's default allocator (mimalloc) keeps the CSV blocks' and casts' freed pages: over a
    # 1M-event import its peak grew 1.33x (261 -> 348 MB) while the importer's own data stayed
    # flat. The system allocator (glibc) gives most of them back but still grew 16 MB from 100k
    # to 1M events (fragmentation); jemalloc, where pyarrow has it, stays flat (234 -> 238 MB).
    # Restored afterwards.
    pool = pa.default_memory_pool()
    pa.set_memory_pool(_import_memory_pool())
    try:
        OmopLoader(importer, tables).run()
    finally:
        pa.set_memory_pool(pool)


def _import_memory_pool() -> pa.MemoryPool:
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc
        return pa.system_memory_pool()
