"""MEDS (Medical Event Data Standard) importer: ``data/**/*.parquet`` + ``metadata/codes.parquet``.

Shards are read with pyarrow in record batches of ``BATCH_ROWS``, never a whole shard at once, and
their schema is checked against the ``meds`` package's ``DataSchema``. Lossless variants that
MEDS writers produce in practice (``string`` for ``large_string``, ``double`` for ``float``,
other timestamp units) are accepted and cast; anything else is a problem naming the column.

MEDS keeps each subject's rows together, sorted by time; the importer relies on it (one
patient open at a time, memory flat in shard size). Shards are read in name order, so a subject
whose rows run from the end of one shard into the start of the next is one patient; a subject
who comes back after others, or rows out of time order, are problems named by row.

Mapping onto the review app's record:
- null-time rows are static: ``GENDER/…`` (or ``SEX/…``), ``RACE/…``, ``ETHNICITY/…`` fill the
  demographics (the code's description from ``codes.parquet`` first, then the code's rest; sex
  in one display form), anything else goes to ``Patient.demographics`` under its code; so do
  ``meds_etl``'s person-table rows, which it dates at birth. A field given again with another
  value keeps the first, the other beside it, and a warning in the summary;
- ``MEDS_BIRTH`` sets the birth date (an event dated before it is a problem); the record's span
  (``first_event_at``) starts at the first event after it;
- a row with free text (a note or report code, text over ``VALUE_MAX`` characters, or several
  lines) becomes a note, radiology report sections included; short text is a value
  (a categorical lab result such as "positive");
- other rows are coded events with the numeric value and the ``unit`` column when the shard has
  one, typed by ``meds_etl``'s ``table`` column where there is one (a SNOMED code from the
  procedure table is a procedure), else by their vocabulary (``LOINC/`` → measurement, …), else
  "observation" (counted as fallen back in the summary); a code that names its own type
  (``TYPE_FAMILIES``, visit codes) keeps it whatever the column says, with a warning;
- a code without a description is named by itself; the summary warns with the counts and each
  patient keeps how many such events it has (review.importers.descriptions);
- encounters: with ``meds_etl``'s ``visit_id`` column, one encounter per visit id, whatever the
  order of its rows (its visit rows sort after the same day's events), named by its visit row
  and ending at that row's ``end`` or the visit's last event; visit-detail rows are events of
  it. Otherwise a visit code (``VISIT/…``, ``HOSPITAL_ADMISSION…``, ``ED_REGISTRATION…``,
  ``ENCOUNTER…``, ``ADMISSION//…``) opens one, which ends at the row's ``end`` column, at an end
  code of its own kind (``ED_OUT`` ends the ED stay, ``HOSPITAL_DISCHARGE`` the admission; a
  ``VISIT/…`` is ended by any end code) or at the next visit of its kind. Visits of another kind
  stay open beneath a new one: an ED stay inside an admission is its own encounter, and the
  admission runs on to its discharge. Rows outside any visit are grouped by day;
- exact duplicate rows (same subject, time, code and values) are skipped and counted;
- a column that looks like a value under a name MEDS does not read (``numerical_value``,
  ``value``…) is kept as an event attribute and warned about in the summary.

The summary counts rows per code family (what comes before the code's first "/" outside
brackets, as written: ``LAB``, ``LOINC``, ``BMI (kg/m2)``): read, fell back (type not known),
ignored (duplicates).
"""

import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, date, datetime, tzinfo
from functools import lru_cache
from pathlib import Path
from typing import Any

import meds
import pyarrow as pa
import pyarrow.parquet as pq
from flexible_schema.exceptions import SchemaValidationError

from review.models import Patient

from .columnar import (
    BATCH_ROWS,
    NUL_PROBLEM,
    CohortWriter,
    NumberTexts,
    batch_rows,
    local_zone,
    nul_cells,
    pylist,
    utc_wall_times,
)
from .demographics import normalise_sex
from .descriptions import patients_count_undescribed
from .run import ImportRun
from .timestamps import aware
from .writers import EVENT_FLUSH_ROWS, NO_ATTRIBUTES, PendingEncounter

VALUE_MAX = 100  # Event.value's length: longer text is a note, not a value
# Visit codes by the vocabulary they start with, and the kind of visit each opens or ends: an
# end code ends an open visit of its own kind (``ED_OUT`` the emergency-department stay, not
# the hospital admission it led to). ``ADMISSION``/``DISCHARGE`` are the meds-testing-helpers
# fixtures' codes, matched whole.
VISIT_START = {
    "VISIT": "VISIT",
    "HOSPITAL_ADMISSION": "HOSPITAL",
    "ED_REGISTRATION": "ED",
    "ENCOUNTER": "ENCOUNTER",
}
VISIT_END = {
    "HOSPITAL_DISCHARGE": "HOSPITAL",
    "ED_OUT": "ED",
    "VISIT_END": "VISIT",
    "ENCOUNTER_END": "ENCOUNTER",
}
WHOLE_VISIT_START = {"ADMISSION": "HOSPITAL"}
WHOLE_VISIT_END = {"DISCHARGE": "HOSPITAL"}
# Kinds of visit any end code may end when none of the code's own kind is open (a
# ``VISIT/IP`` ended by ``HOSPITAL_DISCHARGE``).
GENERIC_VISITS = ("VISIT", "ENCOUNTER")
NOTE_WORDS = ("NOTE", "REPORT", "RADIOLOGY", "IMPRESSION", "FINDINGS")
EVENT_TYPES = {
    "LOINC": "measurement",
    "LAB": "measurement",
    "VITALS": "measurement",
    "ICD9CM": "condition",
    "ICD10CM": "condition",
    "SNOMED": "condition",
    "DIAGNOSIS": "condition",
    "RXNORM": "drug",
    "RXNORM EXTENSION": "drug",
    "ATC": "drug",
    "NDC": "drug",
    "MEDICATION": "drug",
    "CPT4": "procedure",
    "HCPCS": "procedure",
    "ICD10PCS": "procedure",
    "ICD9PROC": "procedure",
    "PROCEDURE": "procedure",
    "INFUSION_START": "drug",
    "INFUSION_END": "drug",
    meds.death_code: "death",
    meds.birth_code: "birth",
}
# meds_etl writes the OMOP table each row came from (``table``): the type it names wins over
# the vocabulary's guess (SNOMED codes name procedures as well as conditions).
TABLE_EVENT_TYPES = {
    "condition": "condition",
    "condition_occurrence": "condition",
    "procedure": "procedure",
    "procedure_occurrence": "procedure",
    "drug_exposure": "drug",
    "measurement": "measurement",
    "observation": "observation",
    "visit": "visit",
    "visit_occurrence": "visit",
    "visit_detail": "visit",
    "device_exposure": "device",
    "death": "death",
    "note": "note",
    "specimen": "specimen",
}
# Code families that name the type of their events: MEDS_transforms writes the source table into
# the code (``LAB//…`` from labevents and chartevents, ``DIAGNOSIS//…`` from diagnoses_icd), as
# MEDS itself does for birth and death. Such a code's type outranks a ``table`` column that says
# otherwise (a converted MIMIC-IV demo says "condition" on every row, labs and death included);
# the summary warns with the counts. A vocabulary (LOINC, SNOMED, ICD10CM…) names no type of its
# own (a SNOMED code may be a condition or a procedure): there the column wins. Visit codes
# (they open or close an encounter) are visits whatever the column says.
TYPE_FAMILIES = frozenset(
    {
        "LAB",
        "VITALS",
        "MEDICATION",
        "INFUSION_START",
        "INFUSION_END",
        "PROCEDURE",
        "DIAGNOSIS",
        meds.death_code,
        meds.birth_code,
    }
)
# Value columns of the standard, and names a writer may have used instead (MEDS before 0.3
# wrote ``numerical_value``): those are kept as attributes, with a warning in the summary.
VALUE_LIKE = ("value", "numerical_value", "numeric", "text", "result", "value_as_number")
LIFE_EVENT_NAMES = {meds.birth_code: "Birth", meds.death_code: "Death"}
DEMOGRAPHIC_FIELDS = {"GENDER": "gender", "SEX": "gender", "RACE": "race", "ETHNICITY": "ethnicity"}
# What the importer accepts for each MEDS column: the standard's type or a lossless variant.
ACCEPTED_TYPES = {
    "subject_id": pa.types.is_integer,
    "time": lambda t: pa.types.is_timestamp(t) or pa.types.is_date(t),
    "code": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "numeric_value": lambda t: pa.types.is_floating(t) or pa.types.is_integer(t),
    "text_value": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
}
CORE = ("subject_id", "time", "code", "numeric_value", "text_value")
_UNSET = object()


def find_meds_root(path: Path) -> Path | None:
    """``path`` (or a folder directly inside it) when it holds ``data/`` with Parquet shards."""
    if not path.is_dir():
        return None
    for candidate in [path, *sorted(d for d in path.iterdir() if d.is_dir())]:
        data = candidate / meds.data_subdirectory
        if data.is_dir() and any(data.rglob("*.parquet")):
            return candidate
    return None


def family_of(code: str) -> str:
    """The code's family as written: what comes before its first "/" outside brackets (``LAB``
    of ``LAB//50912//mg/dL``, ``LOINC`` of ``LOINC/8867-4``), else the whole code (``BMI
    (kg/m2)``, MIMIC-IV's ``omr`` names, whose unit holds a slash). One pass over the code."""
    depth = 0
    for i, ch in enumerate(code):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch == "/" and depth == 0:
            return code[:i].strip()
    return code.strip()


def vocabulary(code: str) -> str:
    """The code's family in capitals, as the type and visit tables are keyed."""
    return family_of(code).upper()


def _visit_family(vocab: str, prefixes: dict[str, str], whole: dict[str, str]) -> str:
    for prefix, family in prefixes.items():
        if vocab.startswith(prefix):
            return family
    return whole.get(vocab, "")


@lru_cache(maxsize=65536)
def code_kind(code: str) -> tuple[str, bool, bool, str]:
    """(event type, opens a visit, closes a visit, the kind of visit): cached, a cohort has
    few distinct codes. The type is "" when neither the vocabulary nor a visit code tells it."""
    vocab = vocabulary(code)
    ends = _visit_family(vocab, VISIT_END, WHOLE_VISIT_END)
    starts = "" if ends else _visit_family(vocab, VISIT_START, WHOLE_VISIT_START)
    event_type = EVENT_TYPES.get(vocab) or ("visit" if starts or ends else "")
    return event_type, bool(starts), bool(ends), starts or ends


def check_schema(schema: pa.Schema, file: str, importer: ImportRun) -> bool:
    """Validate against ``meds.DataSchema``; accept lossless variants; name each bad column."""
    try:
        meds.DataSchema.validate(schema)
        return True
    except SchemaValidationError:
        pass
    ok = True
    for name in CORE:
        if name not in schema.names:
            if name in meds.DataSchema.required_columns():
                importer.problems.add(file, None, name, "required MEDS column is missing")
                ok = False
            continue
        actual = schema.field(name).type
        if not ACCEPTED_TYPES[name](actual):
            wanted = meds.DataSchema.schema().field(name).type
            importer.problems.add(
                file, None, name, f"has type {actual}; MEDS wants {wanted} (meds.DataSchema)"
            )
            ok = False
    return ok


def read_code_descriptions(root: Path, importer: ImportRun) -> dict[str, str]:
    path = root / meds.code_metadata_filepath
    if not path.exists():
        return {}
    file = meds.code_metadata_filepath
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        importer.problems.add(file, None, None, f"not a readable Parquet file ({exc})")
        return {}
    names = parquet.schema_arrow.names
    if "code" not in names:
        importer.problems.add(file, None, "code", "required column is missing")
        return {}
    if "description" not in names:
        return {}
    descriptions: dict[str, str] = {}
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=["code", "description"]):
        for code, description in batch_rows(batch, ["code", "description"]):
            if code and description:
                descriptions[code] = str(description)
    importer.summary.files[file] = "meds:codes"
    importer.progress(path.stat().st_size)
    return descriptions


@dataclass(frozen=True, slots=True)
class _Code:
    """What a code means for the record, worked out once per distinct code."""

    code: str  # cut to Event.code's length
    event_type: str  # "observation" when nothing tells the type (see ``typed``)
    typed: bool  # the vocabulary or a visit code tells the type
    own_type: str  # the type the code itself names (``TYPE_FAMILIES``, visit codes), else ""
    described: bool  # named by a description (or a life event's name), not by the code
    family: str  # the code's family as written: the summary counts rows by it
    demographic: str  # the Patient field a GENDER/RACE/ETHNICITY code sets, else ""
    visit_family: str  # the kind of visit the code opens or closes
    read_key: str  # the summary's keys for this code's rows: see ``_read_rows``
    fell_back_key: str
    ignored_key: str
    name: str  # of a coded event
    note_type: str  # of a note with this code
    note_code: bool  # a note or report code: its text is a note whatever its length
    opens: bool
    closes: bool
    life_event: bool  # birth or death: no visit
    plain: bool  # neither opens nor closes a visit, nor a life event: placed like its neighbours
    birth: bool
    visit_kind: str


class _Subject:
    """One subject being read: their patient, encounters, tallies and what the checks need."""

    __slots__ = (
        "subject_id",
        "patient",
        "patient_id",
        "encounters",
        "current",
        "current_day",
        "open_visits",
        "linked_visits",
        "named_visits",
        "last_time",
        "key_time",
        "same_time_keys",
        "first_timed",
        "unsorted_reported",
        "events",
        "notes",
        "first",
        "placed_time",
        "placed",
    )

    def __init__(self, subject_id: int, patient: Patient | None) -> None:
        self.subject_id = subject_id
        self.patient = patient
        self.patient_id = patient.pk if patient is not None else None
        self.encounters: list[PendingEncounter] = []
        self.current: PendingEncounter | None = None  # the day encounter rows outside visits join
        self.current_day: date | None = None
        # Visits open now, innermost last: (kind of visit, encounter, its end is known).
        self.open_visits: list[tuple[str, PendingEncounter, bool]] = []
        # meds_etl's ``visit_id``: its encounters, and those a visit row has named.
        self.linked_visits: dict[Any, PendingEncounter] = {}
        self.named_visits: set[Any] = set()
        self.last_time: datetime | None = None
        self.key_time: object = _UNSET
        self.same_time_keys: set[Any] = set()
        self.first_timed: tuple[datetime, int] | None = None  # (time, row)
        self.unsorted_reported = False
        self.events = 0
        self.notes = 0
        self.first: datetime | None = None
        # The last plain row's time and encounter: a plain row at the same time goes there too
        # (a lab panel's rows share a time), without working the visits out again.
        self.placed_time: object = _UNSET
        self.placed: PendingEncounter | None = None


@dataclass(frozen=True, slots=True)
class _BatchColumns:
    """A record batch's columns as Python lists, out of Arrow a column at a time: the five of
    MEDS, then those of the shard's other columns the importer reads (``end``, ``unit``,
    meds_etl's ``table`` and ``visit_id``: None when absent) and every other column's values
    (``extra_columns``, in ``extras`` order), of which ``attribute_columns`` go on the event."""

    sids: list[Any]
    times: list[datetime | None]
    codes: list[Any]
    numerics: list[Any]
    texts: list[Any]
    ends: list[datetime | None] | None
    units: list[Any] | None
    tables: list[Any] | None
    visit_ids: list[Any] | None
    extra_columns: list[list[Any]]
    attribute_columns: list[tuple[str, list[Any]]]

    @classmethod
    def read(cls, batch: pa.RecordBatch, extras: list[str]) -> "_BatchColumns":
        n = batch.num_rows
        names = batch.schema.names

        def column(name: str) -> list[Any]:
            return pylist(batch.column(name)) if name in names else [None] * n

        sids = column("subject_id")
        times = utc_wall_times(batch.column("time"))
        codes = column("code")
        numerics = column("numeric_value")
        texts = column("text_value")
        ends = utc_wall_times(batch.column("end")) if "end" in extras else None
        units = column("unit") if "unit" in extras else None
        # meds_etl's columns: the OMOP table a row came from, and the visit it belongs to.
        tables = column("table") if "table" in extras else None
        visit_ids = column("visit_id") if "visit_id" in extras else None
        extra_columns = [column(name) for name in extras]
        attribute_columns = [
            (name, values)
            for name, values in zip(extras, extra_columns, strict=True)
            if name not in ("unit", "end", "table")  # visit_id stays: it traces the row
        ]
        return cls(
            sids, times, codes, numerics, texts, ends, units, tables, visit_ids, extra_columns,
            attribute_columns,
        )  # fmt: skip


def _row_key(
    code: str, numeric: float | None, text: str | None, extra_columns: list[list[Any]], i: int
) -> Any:
    """What makes row ``i`` a repeat of another at the same time: its code, values and every
    other column's value (a list or struct column's by its ``repr``, which is hashable)."""
    extra = [values[i] for values in extra_columns]
    key: Any = (code, numeric, text, *extra)
    if not all(isinstance(v, Hashable) for v in extra):
        key = repr(key)
    return key


class MedsLoader:
    def __init__(self, importer: ImportRun, root: Path) -> None:
        self.importer = importer
        self.root = root
        # Times stay naive UTC wall-clock values from Arrow to the COPY (``utc_wall_times``):
        # making each aware was a large share of the import's Python time. Dates a clinician
        # reads (a visit-less day, the birth date) are taken in ``TIME_ZONE``.
        self.cohort = CohortWriter(importer, "meds", naive_utc=True)
        zone = local_zone()
        self.local_date = _utc_date if zone is UTC else _zoned_date(zone)
        self.descriptions: dict[str, str] = {}
        self.codes: dict[str, _Code] = {}
        self.number_texts = NumberTexts()
        self.seen_subjects: set[int] = set()
        self.subject: _Subject | None = None
        # (family, what the ``table`` column said, the type the code names) -> rows
        self.contradicted: dict[tuple[str, str, str], int] = {}
        self.notes = 0

    def run(self) -> None:
        self.descriptions = read_code_descriptions(self.root, self.importer)
        shards = sorted((self.root / meds.data_subdirectory).rglob("*.parquet"))
        try:
            for shard in shards:
                self.load_shard(shard)
            self._close_subject()
            self.cohort.finish()
        except BaseException:
            self.cohort.close(failing=True)
            raise
        self.cohort.close()
        self._warn_contradicted()
        self._warn_undescribed()

    def _warn_contradicted(self) -> None:
        """Rows typed by their code against what the ``table`` column said, by family."""
        warnings = self.importer.summary.warnings
        sources = self.importer.summary.sources
        for (family, table, event_type), rows in sorted(self.contradicted.items()):
            total = sum(sources.get(family, {}).values())
            warnings[
                f"{family}: the table column says {table!r} on {rows:,} of {total:,} rows; "
                f"typed {event_type}, as the code says"
            ] += rows

    def _warn_undescribed(self) -> None:
        """How much of the cohort a clinician can find by a clinical word: codes without a
        description are shown, searched and ranked as the raw code (``LAB//50912//mg/dL``)."""
        dataset_id = self.importer.dataset.pk
        undescribed_events = patients_count_undescribed(dataset_id=dataset_id)
        codes = [c for c in self.codes.values() if not c.demographic and not c.life_event]
        undescribed = sum(1 for c in codes if not c.described)
        if not undescribed:
            return
        where = (
            f"{meds.code_metadata_filepath} does not describe them"
            if self.descriptions
            else f"there is no {meds.code_metadata_filepath} with descriptions"
        )
        notes = f"{self.notes:,} note{'' if self.notes == 1 else 's'}"
        self.importer.summary.warnings[
            f"{undescribed:,} of {len(codes):,} codes have no description; {notes} "
            f"({where}): their events are named by the raw code, which record search and the "
            "excerpt cannot match to a clinical word; attach descriptions with "
            "`manage.py import_code_descriptions` (rows: events named by their code)"
        ] += undescribed_events

    def problem(self, file: str, row: int | None, field: str | None, message: str) -> None:
        self.importer.problems.add(file, row, field, message, unit="row")

    def load_shard(self, path: Path) -> None:
        file = str(path.relative_to(self.root))
        size = path.stat().st_size
        try:
            parquet = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as exc:
            self.problem(file, None, None, f"not a readable Parquet file ({exc})")
            self.importer.progress(size)
            return
        schema = parquet.schema_arrow
        if not check_schema(schema, file, self.importer):
            self.importer.progress(size)
            return
        self.importer.summary.files[file] = "meds"
        extras = [n for n in schema.names if n not in CORE]
        self._warn_value_like(file, parquet, extras)
        total_rows = max(parquet.metadata.num_rows, 1)
        row = 0
        reported = 0
        try:
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
                nuls = list(nul_cells(batch))
                for at, name in nuls:
                    self.problem(file, row + at + 1, name, NUL_PROBLEM)
                if not nuls:  # the import fails anyway: nothing of it reaches the database
                    self.load_batch(file, row, batch, extras)
                row += batch.num_rows
                done = size * row // total_rows
                self.importer.progress(done - reported)
                reported = done
        except (pa.ArrowException, OSError) as exc:
            self.problem(file, row + 1, None, f"unreadable Parquet data ({exc})")
        self.importer.progress(size - reported)

    def load_batch(self, file: str, offset: int, batch: pa.RecordBatch, extras: list[str]) -> None:
        """One record batch (row ``offset + 1`` is its first): its columns out of Arrow, one
        lean pass over its rows, then its rows counted in the summary."""
        columns = _BatchColumns.read(batch, extras)
        tally = self._read_rows(file, offset, columns)
        self._count_rows(tally)

    def _read_rows(self, file: str, offset: int, columns: "_BatchColumns") -> dict[str, int]:
        """Each row, in order: whose it is, whether it comes in time order and is new, then a
        demographic, or an event placed in its encounter, typed and appended to the COPY buffer.
        Returns the rows per "family\\0outcome" (see ``_Code.read_key``)."""
        ends, units, tables = columns.ends, columns.units, columns.tables
        visit_ids, extra_columns = columns.visit_ids, columns.extra_columns
        attribute_columns = columns.attribute_columns
        rows = self.cohort.rows
        append = rows.append
        codes_known = self.codes
        skipped = self.importer.summary.skipped
        # "family\0outcome" -> rows (a str caches its hash), added to the summary per batch. A
        # plain dict: a Counter's ``+= 1`` costs several times ``get`` and a store.
        tally: dict[str, int] = {}
        count = tally.get
        number_texts = self.number_texts
        no_attributes, flush_at = NO_ATTRIBUTES, EVENT_FLUSH_ROWS
        subject = self.subject
        encounter: PendingEncounter | None
        values = zip(
            columns.sids, columns.codes, columns.times, columns.numerics, columns.texts, strict=True
        )
        for i, (sid, code, time, numeric, text) in enumerate(values):
            # Whose row: a subject is open until the next one's first row.
            if sid is None:
                self._refuse_subjectless(file, offset + i + 1, code)
                continue
            if subject is None or sid != subject.subject_id:
                subject = self._open_subject(file, offset + i + 1, sid)
            if code is None or not code.strip():
                self.problem(file, offset + i + 1, "code", "required value is empty")
                continue
            patient_id = subject.patient_id
            if patient_id is None:
                continue  # kept as imported, or already refused
            if numeric is not None and numeric != numeric:
                numeric = None  # NaN
            # In time order, and not a repeat of a row at the same time: repeats share a time,
            # and rows come in time order, so only this time's keys are kept.
            if time != subject.key_time:
                last_time = subject.last_time
                if time is not None and last_time is not None and time < last_time:
                    self._refuse_unsorted(file, offset + i + 1, subject)
                    continue
                if time is not None:
                    subject.last_time = time
                subject.key_time = time
                subject.same_time_keys = set()
            if extra_columns:
                key = _row_key(code, numeric, text, extra_columns, i)
            else:
                key = (code, numeric, text)
            info = codes_known.get(code) or self._code(code)
            same_time_keys = subject.same_time_keys
            if key in same_time_keys:
                skipped["duplicate MEDS rows"] += 1
                tally[info.ignored_key] = count(info.ignored_key, 0) + 1
                continue
            same_time_keys.add(key)
            # A demographic, or the birth that starts the record.
            table = tables[i] if tables is not None else None
            if time is None or (table == "person" and info.demographic):
                # meds_etl dates the person table's sex, race and ethnicity at birth.
                self._static(subject, code, numeric, text)
                tally[info.read_key] = count(info.read_key, 0) + 1
                continue
            if info.birth:
                self._birth(file, offset + i + 1, subject, time)
            elif subject.first_timed is None:
                subject.first_timed = (time, offset + i + 1)
            # Its encounter.
            visit_id = visit_ids[i] if visit_ids is not None else None
            if visit_id is not None and not info.life_event:
                end = ends[i] if ends is not None else None
                encounter = self._linked(subject, visit_id, info, time, end)
            elif info.plain and time == subject.placed_time:
                encounter = subject.placed
            else:
                end = ends[i] if ends is not None else None
                encounter = self._place(subject, info, time, end)
                if info.plain:
                    subject.placed_time, subject.placed = time, encounter
                else:
                    subject.placed_time = _UNSET
            # Its type: the code's, else the ``table`` column's.
            if table is None:
                event_type, typed = info.event_type, info.typed
            else:
                event_type, typed = self._typed_by_table(info, table)
            outcome = info.read_key if typed else info.fell_back_key
            tally[outcome] = count(outcome, 0) + 1
            # Its row: a note, or a coded event with its value and unit.
            encounter_id = None
            if encounter is not None:
                encounter.event_count += 1
                encounter_id = encounter.id
            attributes = (
                {name: _text(v[i]) for name, v in attribute_columns if v[i] is not None}
                if attribute_columns
                else no_attributes
            )
            subject.events += 1
            if subject.first is None and not info.birth:
                # The record's span is its clinical events: a birth row decades before them
                # made a MIMIC record "run" sixty years.
                subject.first = time
            if (
                text is not None
                and (info.note_code or len(text) > VALUE_MAX or "\n" in text)
                and (stripped := text.strip())
            ):
                subject.notes += 1
                note_type = info.note_type
                # fmt: off
                append((patient_id, encounter_id, subject.events, time, "note", info.code,
                        note_type[:500], "", None, "", stripped, note_type[:120], attributes))
                # fmt: on
            else:
                if numeric is not None:
                    value = number_texts[numeric]
                else:
                    value = text.strip()[:VALUE_MAX] if text is not None else ""
                unit = str(units[i] or "")[:60] if units is not None else ""
                # fmt: off
                append((patient_id, encounter_id, subject.events, time, event_type,
                        info.code, info.name, value, numeric, unit, "", "", attributes))
                # fmt: on
            if len(rows) >= flush_at:
                self.cohort.flush_later()
        return tally

    def _refuse_subjectless(self, file: str, row: int, code: str | None) -> None:
        """A row without a subject, named with its code when that is empty too (every bad
        field of the row is named)."""
        self.problem(file, row, "subject_id", "required value is empty")
        if code is None or not code.strip():
            self.problem(file, row, "code", "required value is empty")

    def _refuse_unsorted(self, file: str, row: int, subject: "_Subject") -> None:
        """A row before the subject's last: named once per subject (MEDS keeps each subject's
        rows sorted by time), and left out."""
        if not subject.unsorted_reported:
            self.problem(
                file,
                row,
                "time",
                f"subject {subject.subject_id}'s rows are not sorted by time "
                "(MEDS requires each subject's rows in time order)",
            )
            subject.unsorted_reported = True

    def _typed_by_table(self, info: "_Code", table: str) -> tuple[str, bool]:
        """(event type, typed) of a row with meds_etl's ``table`` column: the type the column
        names, unless the code names its own (``TYPE_FAMILIES``): then the column is counted
        against it, not obeyed."""
        table_type = TABLE_EVENT_TYPES.get(table)
        if table_type is None:
            return info.event_type, info.typed
        if not info.own_type:
            return table_type, True
        if table_type != info.event_type:
            said = (info.family, table, info.event_type)
            self.contradicted[said] = self.contradicted.get(said, 0) + 1
        return info.event_type, info.typed

    def _count_rows(self, tally: dict[str, int]) -> None:
        """A batch's rows per code family and outcome, into the summary."""
        for key, rows in tally.items():
            family, outcome = key.split("\0")
            self.importer.summary.tally(family, outcome, rows)

    def _warn_value_like(self, file: str, parquet: pq.ParquetFile, extras: list[str]) -> None:
        """A value under a name MEDS does not read is kept as an attribute, not lost silently:
        the summary says how many rows carry one."""
        metadata = parquet.metadata
        names = parquet.schema_arrow.names
        for name in extras:
            if name.lower() not in VALUE_LIKE:
                continue
            index = names.index(name)
            rows = metadata.num_rows
            nulls = 0
            for group in range(metadata.num_row_groups):
                stats = metadata.row_group(group).column(index).statistics
                if stats is not None and stats.has_null_count:
                    nulls += stats.null_count
            self.importer.summary.warnings[
                f"{file}: column {name!r} is not a MEDS value column (numeric_value, "
                "text_value): its values are kept as event attributes, not as values"
            ] += rows - nulls

    def _code(self, code: str) -> _Code:
        event_type, opens, closes, visit_family = code_kind(code)
        description = self.descriptions.get(code, "")
        upper = code.upper()
        vocab = vocabulary(code)
        family = family_of(code)[:120] or code[:120]
        life_event = code in (meds.birth_code, meds.death_code)
        info = _Code(
            code=code[:120],
            event_type=(event_type or "observation")[:40],
            typed=bool(event_type),
            own_type=event_type if vocab in TYPE_FAMILIES or opens or closes else "",
            described=bool(description) or life_event,
            family=family,
            demographic=DEMOGRAPHIC_FIELDS.get(vocab, ""),
            visit_family=visit_family,
            read_key=f"{family}\0read",
            fell_back_key=f"{family}\0fell back",
            ignored_key=f"{family}\0ignored",
            name=(description or LIFE_EVENT_NAMES.get(code, code))[:500],
            note_type=description or code.split("/", 1)[-1].strip("/").replace("//", " "),
            note_code=any(w in upper for w in NOTE_WORDS),
            opens=opens,
            closes=closes,
            life_event=life_event,
            plain=not (opens or closes or life_event),
            birth=code == meds.birth_code,
            visit_kind=description or code.split("/", 1)[-1].strip("/") or code,
        )
        self.codes[code] = info
        return info

    def _open_subject(self, file: str, row: int, sid: int) -> _Subject:
        self._close_subject()
        if sid in self.seen_subjects:
            self.problem(
                file,
                row,
                "subject_id",
                f"subject {sid} appears again after other subjects "
                "(MEDS keeps each subject's rows together, in one shard)",
            )
            self.subject = _Subject(sid, None)
            return self.subject
        self.seen_subjects.add(sid)
        self.subject = _Subject(sid, self.cohort.open_patient(str(sid), file))
        return self.subject

    def _close_subject(self) -> None:
        subject = self.subject
        if subject is not None and subject.patient is not None:
            self.notes += subject.notes
            self.cohort.close_patient(
                subject.patient,
                events=subject.events,
                notes=subject.notes,
                # Rows come in time order (out-of-order rows are refused), so the last is latest.
                first=subject.first,
                last=subject.last_time if subject.first is not None else None,
                encounters=len(subject.encounters),
            )
            # A closed subject's encounters are final; a few hundred go in at a time.
            if len(self.cohort.pending_encounters) >= 500:
                self.cohort.write_encounters()
        self.subject = None

    def _static(
        self, subject: _Subject, code: str, numeric: float | None, text: str | None
    ) -> None:
        """A demographic row. The first value of a field is kept; a different one given again
        is kept beside it and counted in the summary's warnings, never dropped silently."""
        patient = subject.patient
        assert patient is not None
        vocab, _, rest = code.partition("/")
        # meds_etl writes OMOP's concept codes ("Race/5"): the description names them.
        value = self.descriptions.get(code, "") or rest.strip("/")
        target = DEMOGRAPHIC_FIELDS.get(vocab.strip().upper())
        if target and value:
            value = normalise_sex(value)[:32] if target == "gender" else value[:100]
            current = getattr(patient, target)
            if not current:
                setattr(patient, target, value)
            elif current != value:
                self._also(subject, f"{target} (also given)", value)
            return
        shown = text if text is not None else (f"{numeric:g}" if numeric is not None else "")
        shown = shown or self.descriptions.get(code, "yes")
        key = code[:120]
        current = patient.demographics.get(key)
        if current is None:
            patient.demographics[key] = shown
        elif current != shown:
            self._also(subject, key, shown)

    def _also(self, subject: _Subject, key: str, value: str) -> None:
        patient = subject.patient
        assert patient is not None
        values = patient.demographics.get(key, "")
        if value not in values.split("; "):
            patient.demographics[key] = f"{values}; {value}" if values else value
        self.importer.summary.warnings[
            "a subject's demographic row given again with another value (both kept)"
        ] += 1

    def _birth(self, file: str, row: int, subject: _Subject, time: datetime) -> None:
        patient = subject.patient
        assert patient is not None
        local_date = self.local_date
        born = local_date(time)
        patient.birth_date = born
        if subject.first_timed is not None and local_date(subject.first_timed[0]) < born:
            first_time, first_row = subject.first_timed
            self.problem(
                file,
                first_row,
                "time",
                f"subject {subject.subject_id} has an event on {local_date(first_time)}, "
                f"before their birth on {born} ({meds.birth_code}, row {row})",
            )

    def _place(
        self, subject: _Subject, info: _Code, time: datetime, end: datetime | None
    ) -> PendingEncounter | None:
        """The encounter this row belongs to (opened if need be); see the module docstring."""
        if info.life_event:
            # Life events belong to no visit; the next row outside a visit opens its own day.
            subject.current = None
            return None
        visits = subject.open_visits
        for _, encounter, end_known in visits:
            # A visit whose end is known is over once a row comes after it (the list is
            # rebuilt only then: most rows are inside a visit).
            if end_known and time > encounter.end:  # type: ignore[operator]
                visits[:] = [v for v in visits if not (v[2] and time > v[1].end)]  # type: ignore[operator]
                break
        if info.opens:
            # A visit of the same kind with no end code yet is over; other kinds stay open
            # beneath it (an ED stay that led to this admission ends at its own ED_OUT).
            visits[:] = [v for v in visits if v[0] != info.visit_family]
            encounter = self._new_encounter(subject, info.visit_kind, time, end)
            visits.append((info.visit_family, encounter, end is not None))
            subject.current = None
            return encounter
        if info.closes:
            closed = self._close_visit(visits, info.visit_family, time)
            if closed is not None:
                return closed
            # An end code with no visit to end: a row like any other.
        if visits:
            return visits[-1][1]
        current = subject.current
        day = self.local_date(time)
        if current is not None and subject.current_day == day:
            current.end = time
            return current
        encounter = self._new_encounter(subject, "day (no visit code)", time, time)
        subject.current = encounter
        subject.current_day = day
        return encounter

    @staticmethod
    def _close_visit(
        visits: list[tuple[str, PendingEncounter, bool]], family: str, time: datetime
    ) -> PendingEncounter | None:
        """End the innermost open visit of ``family``; else, when the innermost open visit is
        a generic one (``VISIT/…``), that one. Returns the visit ended, if any."""
        for index in range(len(visits) - 1, -1, -1):
            if visits[index][0] == family:
                break
        else:
            if not visits or visits[-1][0] not in GENERIC_VISITS:
                return None
            index = len(visits) - 1
        _, encounter, end_known = visits.pop(index)
        if not end_known:
            encounter.end = time
        return encounter

    def _linked(
        self, subject: _Subject, visit_id: Any, info: _Code, time: datetime, end: datetime | None
    ) -> PendingEncounter:
        """The encounter of meds_etl's ``visit_id``: one per visit, whichever rows come first
        (its visit rows sort after the same day's events), named by its visit row, ending at
        that row's ``end`` or its last event, whichever is later. Visit-detail rows name the
        same visit: they are events of its encounter, not encounters of their own."""
        encounter = subject.linked_visits.get(visit_id)
        if encounter is None:
            encounter = self._new_encounter(subject, "visit", time, time)
            subject.linked_visits[visit_id] = encounter
        if info.opens and visit_id not in subject.named_visits:
            subject.named_visits.add(visit_id)
            encounter.encounter_type = info.visit_kind[:100]
            if end is not None and (encounter.end is None or end > encounter.end):
                encounter.end = end
        if encounter.end is None or time > encounter.end:
            encounter.end = time
        return encounter

    def _new_encounter(
        self, subject: _Subject, kind: str, start: datetime, end: datetime | None
    ) -> PendingEncounter:
        assert subject.patient_id is not None
        ordinal = len(subject.encounters) + 1
        encounter = self.cohort.new_encounter(subject.patient_id, ordinal, kind, start, end)
        subject.encounters.append(encounter)
        return encounter


def _utc_date(time: datetime) -> date:
    return time.date()


def _zoned_date(zone: tzinfo) -> Callable[[datetime], date]:
    def local_date(time: datetime) -> date:
        return aware(time, zone).date()

    return local_date


def _is_note(code: str, text: str) -> bool:
    upper = code.upper()
    return any(w in upper for w in NOTE_WORDS) or len(text) > VALUE_MAX or "\n" in text


def _text(value: Any) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return str(value)


def load_meds(importer: ImportRun, root: Path) -> None:
    """Load the MEDS dataset at ``root`` through ``importer`` (inside its transaction)."""
    MedsLoader(importer, root).run()
