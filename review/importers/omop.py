"""OMOP CDM importer: ``person``, ``visit_occurrence``, the event tables and ``note``, as CSV/TSV
or Parquet, with names from ``concept`` when that table is present.

Every table is read in Arrow record batches (``BATCH_ROWS`` rows; CSV columns read as text and
parsed here, so a bad value is named by table, row and column instead of failing a whole block).
Unlike MEDS, OMOP tables are not grouped by patient, so the importer keeps one small state per
patient and per visit (ids, counters) and streams the events; memory grows with the number of
patients and visits, not events (plus 16 bytes an event for the duplicate-key check).

Codes are ``VOCABULARY/concept_code`` from ``concept`` (e.g. ``LOINC/8867-4``); without a concept
table, or for concept 0 ("no matching concept"), an event keeps ``CONCEPT/<id>`` and its source
value as the name. A concept id that a present concept table lacks is a problem: it usually means
the vocabulary export does not match the CDM.

Problems, all named by table, row (1 = first data row) and column: a person or visit that is not
in its table, duplicate primary keys, unknown concept ids, unreadable dates, events dated before
the person's birth (compared by date: birth times are often just midnight).
"""

from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from django.utils import timezone

from review.models import Encounter

from .columnar import BATCH_ROWS, CohortWriter
from .ehr_xml import EventData
from .loader import _EventWriter, _Importer
from .tables import normalise_header
from .timestamps import BadTimestamp, parse_timestamp

SUFFIXES = {".csv": ",", ".tsv": "\t", ".parquet": None}
# CSV is read a block at a time, one thread, no read-ahead: every block becomes Python values
# before it is used, so the block bounds memory (8 MB blocks with read-ahead peaked at 440 MB).
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
    reader = pacsv.open_csv(
        path,
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
    for batch in reader:
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
    if not number.is_integer():
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


@dataclass
class _Person:
    writer: _EventWriter
    birth: date | None
    encounters: dict[int, Encounter] = field(default_factory=dict)  # by encounter id


class OmopLoader:
    def __init__(self, importer: _Importer, tables: dict[str, Path]) -> None:
        self.importer = importer
        self.tables = tables
        self.cohort = CohortWriter(importer, "omop")
        self.concepts: dict[int, tuple[str, str, str]] | None = None  # id -> vocab, code, name
        self.persons: dict[int, _Person | None] = {}  # None: kept as already imported
        self.visits: dict[int, tuple[int, int]] = {}  # visit id -> person id, encounter id

    def problem(self, file: str, row: int | None, column: str | None, message: str) -> None:
        self.importer.problems.add(file, row, column, message, unit="row")

    def run(self) -> None:
        if "person" not in self.tables:
            first = next(iter(self.tables.values()))
            self.problem(first.name, None, None, "OMOP tables need the person table (person.csv)")
            return
        if "concept" in self.tables:
            self.concepts = {}
            self._read("concept", ("concept_id", "vocabulary_id", "concept_code"), self._concept)
        self._read("person", ("person_id",), self._person)
        if self.importer.problems.problems:
            return  # every later table is keyed on person: its problems would only repeat these
        if "visit_occurrence" in self.tables:
            self._read(
                "visit_occurrence",
                ("visit_occurrence_id", "person_id", "visit_start_date"),
                self._visit,
            )
        for name, spec in EVENT_TABLES.items():
            if name in self.tables:
                self._read_events(name, spec)
        persons = [p for p in self.persons.values() if p is not None]
        for person in persons:
            self._number_visits(person)
        for person in persons:
            self.cohort.close_patient(person.writer, person.encounters)
        self.cohort.finish()

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
                columns = {n: batch.column(n).to_pylist() for n in batch.schema.names}
                for i in range(batch.num_rows):
                    row += 1
                    values = {n: column[i] for n, column in columns.items()}
                    try:
                        handle(path.name, row, values)
                    except _BadValue as exc:
                        self.problem(path.name, row, exc.column, exc.message)
                # The reader does not say how many bytes a batch came from; its Arrow size is
                # close for text columns, and the bar is squared up at the end of the table.
                step = min(batch.nbytes, size - reported)
                self.importer.progress(step)
                reported += step
        except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
            self.problem(path.name, row + 1, None, f"unreadable table ({exc})")
        self.importer.progress(size - reported)

    def _value(self, values: dict[str, Any], column: str, parse: Any) -> Any:
        try:
            return parse(values.get(column))
        except (ValueError, TypeError, BadTimestamp) as exc:
            raise _BadValue(column, str(exc) or f"{values.get(column)!r} is not valid") from None

    def _concept(self, file: str, row: int, values: dict[str, Any]) -> None:
        concept_id = self._value(values, "concept_id", _int)
        if concept_id is None:
            raise _BadValue("concept_id", "required value is empty")
        assert self.concepts is not None
        self.concepts[concept_id] = (
            _str(values.get("vocabulary_id")),
            _str(values.get("concept_code")),
            _str(values.get("concept_name")),
        )

    def _name(
        self, file: str, row: int, values: dict[str, Any], column: str
    ) -> tuple[str, str] | None:
        """(code, name) of the concept in ``column``; None when empty or 0."""
        concept_id = self._value(values, column, _int)
        if not concept_id:
            return None
        if self.concepts is None:
            return f"CONCEPT/{concept_id}", ""
        concept = self.concepts.get(concept_id)
        if concept is None:
            raise _BadValue(column, f"concept {concept_id} is not in the concept table")
        vocab, code, name = concept
        return f"{vocab}/{code}", name

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
        writer = self.cohort.open_patient(str(person_id), file)
        if writer is None:
            self.persons[person_id] = None
            return
        patient = writer.patient  # type: ignore[attr-defined]
        patient.birth_date = birth_date
        patient.gender = demographics["gender"][:32]
        patient.race = demographics["race"][:100]
        patient.ethnicity = demographics["ethnicity"][:100]
        self.persons[person_id] = _Person(writer, birth_date)

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
        if visit_id in self.visits:
            raise _BadValue("visit_occurrence_id", f"visit {visit_id} appears twice")
        person_id, person = self._known_person(values, "visit_occurrence")
        start = self._start(values, "visit_start_datetime", "visit_start_date")
        end = self._value(values, "visit_end_datetime", _when)
        if end is None:
            end_date = self._value(values, "visit_end_date", _when)
            # A date alone ends at the end of that day, so the day's events fall inside the visit.
            end = end_date.replace(hour=23, minute=59, second=59) if end_date else None
        named = self._name(file, row, values, "visit_concept_id")
        kind = (named[1] or named[0]) if named else _str(values.get("visit_source_value"))
        self.visits[visit_id] = (person_id, 0)
        if person is None:
            return
        self._check_birth(person, start, person_id, "visit_start_date")
        encounter = self.cohort.new_encounter(person.writer, 0, kind or "visit", start, end)
        person.encounters[encounter.id] = encounter
        self.visits[visit_id] = (person_id, encounter.id)

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

    def _read_events(self, name: str, spec: EventTable) -> None:
        key = f"{name}_id"
        ids, rows = array("q"), array("q")

        def handle(file: str, row: int, values: dict[str, Any]) -> None:
            event_id = self._value(values, key, _int)
            if event_id is not None:
                ids.append(event_id)
                rows.append(row)
            self._event(file, row, values, spec)

        self._read(name, ("person_id", spec.date), handle)
        self._report_duplicates(self.tables[name].name, key, ids, rows)

    def _event(self, file: str, row: int, values: dict[str, Any], spec: EventTable) -> None:
        person_id, person = self._known_person(values, file)
        when = self._start(values, spec.datetime, spec.date)
        named = self._name(file, row, values, spec.concept)
        visit_id = self._value(values, "visit_occurrence_id", _int)
        encounter_id = None
        if visit_id is not None and "visit_occurrence" in self.tables:
            visit = self.visits.get(visit_id)
            if visit is None:
                raise _BadValue("visit_occurrence_id", f"visit {visit_id} is not in the table")
            if visit[0] != person_id:
                raise _BadValue(
                    "visit_occurrence_id", f"visit {visit_id} belongs to another person"
                )
            encounter_id = visit[1]
        if person is None:
            return
        self._check_birth(person, when, person_id, spec.date)
        source = _str(values.get(spec.source_value))
        code, name = named if named else ("", "")  # concept 0: "no matching concept"
        event = self._build(file, row, values, spec, code, name or source or code, source)
        writer = person.writer
        writer.encounter_id = encounter_id or None
        writer.encounter_ordinal = encounter_id or 0
        event.timestamp = when
        self.cohort.add(writer, event)

    def _build(
        self,
        file: str,
        row: int,
        values: dict[str, Any],
        spec: EventTable,
        code: str,
        name: str,
        source: str,
    ) -> EventData:
        name = name or "unmapped"
        attributes = {"source_value": source} if source and source != name else {}
        if spec.event_type == "note":
            title = _str(values.get("note_title"))
            kind = self._name(file, row, values, "note_type_concept_id")
            note_type = title or (kind[1] if kind else "") or name
            return EventData(
                timestamp=None,
                event_type="note",
                code=code,
                name=note_type,
                text=_str(values.get("note_text")),
                note_type=note_type,
                attributes=attributes,
            )
        numeric = self._value(values, "value_as_number", _float)
        value = f"{numeric:g}" if numeric is not None else _str(values.get("value_as_string"))
        if not value:
            as_concept = self._name(file, row, values, "value_as_concept_id")
            value = as_concept[1] if as_concept else ""
        unit = _str(values.get("unit_source_value"))
        if not unit:
            unit_concept = self._name(file, row, values, "unit_concept_id")
            # UCUM's concept code is the unit itself ("mg/dL"); a bare concept id is no unit.
            if unit_concept and not unit_concept[0].startswith("CONCEPT/"):
                unit = unit_concept[0].split("/", 1)[1]
        return EventData(
            timestamp=None,
            event_type=spec.event_type,
            code=code,
            name=name,
            value=value,
            value_numeric=numeric,
            unit=unit,
            attributes=attributes,
        )

    def _report_duplicates(self, file: str, key: str, ids: array, rows: array) -> None:
        if len(ids) < 2:
            return
        id_array = np.frombuffer(ids, dtype=np.int64)
        order = np.argsort(id_array, kind="stable")
        sorted_ids = id_array[order]
        repeats = np.nonzero(sorted_ids[1:] == sorted_ids[:-1])[0]
        row_array = np.frombuffer(rows, dtype=np.int64)
        for index in repeats[: self.importer.problems.MAX_KEPT]:
            first, again = row_array[order[index]], row_array[order[index + 1]]
            self.problem(
                file,
                int(again),
                key,
                f"{key} {int(sorted_ids[index])} appears again (first at row {int(first)})",
            )

    @staticmethod
    def _number_visits(person: _Person) -> None:
        # OMOP visits come in any order: number them by start time, as the record page lists them.
        # All are numbered before any is written (close_patient writes encounters in batches).
        ordered = sorted(person.encounters.values(), key=lambda e: (e.start, e.id))
        for ordinal, encounter in enumerate(ordered, start=1):
            encounter.ordinal = ordinal


class _BadValue(Exception):
    def __init__(self, column: str, message: str) -> None:
        self.column = column
        self.message = message
        super().__init__(message)


def load_omop(importer: _Importer, tables: dict[str, Path]) -> None:
    """Load OMOP CDM ``tables`` (by table name) through ``importer`` (inside its transaction)."""
    OmopLoader(importer, tables).run()
