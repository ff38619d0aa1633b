"""Code descriptions: which events are named by their raw code, and files that describe codes.

A MEDS cohort without ``metadata/codes.parquet`` (the MIMIC-IV demo in MEDS ships none) names
every event by its code (``LAB//50912//mg/dL``), and OMOP rows whose concept the vocabulary
lacks keep ``CONCEPT/<id>``. Record search, the excerpt and the findings match event names, so a
clinician's "creatinine" finds nothing there. This module counts those events per patient (the
review page says when a record is mostly such codes) and reads the files an admin attaches
descriptions from afterwards (``manage.py import_code_descriptions``):

- a codes file in MEDS's metadata shape (``metadata/codes.parquet``: ``code``, ``description``,
  ``parent_codes``, the last not read), or
- a CSV or TSV with the columns ``code`` and ``description`` (a MIMIC dictionary converted:
  ``LAB//50912,Creatinine``).

A code is described by its own row, else by its longest prefix that ends at a ``//`` and is
more than a family (``LAB//50912`` describes ``LAB//50912//mg/dL`` as "Creatinine (mg/dL)": a
dictionary keyed by item, the rest of the code kept beside it). Everything here is plain string
work, linear in the input: no regular expression runs over the files' text.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings
from django.db import connection

from review.models import Event, Patient

from .errors import ImportFailed, Problem, ProblemCollector
from .tables import TABLE_SUFFIXES, TableError, iter_rows, read_header

CODE_MAX = 120  # Event.code's length: the importers store codes cut to it
NAME_MAX = 500  # what the importers keep of a name (it is in a b-tree index)
COLUMNS = ("code", "description")
BATCH_ROWS = 65_536


def _undescribed_where(alias: str) -> str:
    """SQL: the event ``alias`` is a coded event named by its raw code, or an OMOP row whose
    concept the vocabulary lacks (``CONCEPT/<id>``, named by its source value at best)."""
    return (
        f"{alias}.event_type <> 'note' AND {alias}.code <> '' "
        f"AND ({alias}.name = {alias}.code OR {alias}.code LIKE 'CONCEPT/%%')"
    )


def patients_count_undescribed(*, dataset_id: int) -> int:
    """Store on each patient of the dataset how many of its events are named by their raw code
    (``Patient.undescribed_event_count``); returns the dataset's total. One aggregate over the
    dataset's events, then one UPDATE per patient that has any."""
    events = Event._meta.db_table
    patients = Patient._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT e.patient_id, COUNT(*) FROM {events} e "  # noqa: S608 - model tables
            f"WHERE e.patient_id IN (SELECT id FROM {patients} WHERE dataset_id = %s) "
            f"AND {_undescribed_where('e')} GROUP BY e.patient_id",
            [dataset_id],
        )
        counts: list[tuple[int, int]] = cursor.fetchall()
    Patient.objects.filter(dataset_id=dataset_id).exclude(undescribed_event_count=0).update(
        undescribed_event_count=0
    )
    for start in range(0, len(counts), 500):
        chunk = counts[start : start + 500]
        # One statement a chunk: UPDATE ... FROM (VALUES ...), on PostgreSQL and SQLite alike.
        values = ", ".join("(%s, %s)" for _ in chunk)
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {patients} SET undescribed_event_count = v.n "  # noqa: S608
                f"FROM (SELECT column1 AS patient_id, column2 AS n FROM (VALUES {values}) AS raw)"
                f" AS v WHERE {patients}.id = v.patient_id",
                [value for patient_id, n in chunk for value in (patient_id, n)],
            )
    return sum(n for _, n in counts)


def undescribed_pairs(*, dataset_id: int, every: bool = False) -> list[tuple[str, str]]:
    """The distinct (code, name) of the dataset's coded events named by their raw code; with
    ``every``, of all its coded events (to replace descriptions given before)."""
    events = Event._meta.db_table
    patients = Patient._meta.db_table
    where = "e.event_type <> 'note' AND e.code <> ''" if every else _undescribed_where("e")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT e.code, e.name FROM {events} e "  # noqa: S608 - model tables
            f"WHERE e.patient_id IN (SELECT id FROM {patients} WHERE dataset_id = %s) "
            f"AND {where}",
            [dataset_id],
        )
        return [(str(code), str(name)) for code, name in cursor.fetchall()]


def describe(code: str, descriptions: dict[str, str]) -> str | None:
    """The name ``code`` gets from ``descriptions``: its own, else its longest ``//`` prefix's
    that is more than a family, with the rest of the code in brackets; None without either."""
    own = descriptions.get(code)
    if own:
        return own
    head, separator, tail = code.rpartition("//")
    rest = [tail]
    while separator and "//" in head:
        found = descriptions.get(head)
        if found:
            return f"{found} ({' '.join(reversed(rest))})"[:NAME_MAX]
        head, separator, tail = head.rpartition("//")
        rest.append(tail)
    return None


@dataclass
class DescriptionsFile:
    """What a descriptions file holds, read and checked."""

    file: str
    descriptions: dict[str, str]  # code (as events store it) -> description
    rows: int
    without_description: int  # rows with a code and no description: skipped
    cut: int  # descriptions longer than NAME_MAX, cut to it


def read_descriptions(path: Path) -> DescriptionsFile:
    """Read a codes file (MEDS metadata Parquet, or CSV/TSV ``code,description``); every
    problem is named by file, row and column and raised together (``ImportFailed``)."""
    name = path.name
    if not path.is_file():
        raise ImportFailed([Problem(str(path), None, None, "no such file")])
    if path.stat().st_size > settings.IMPORT_MAX_FILE_BYTES:
        raise ImportFailed(
            [
                Problem(
                    name,
                    None,
                    None,
                    "file is larger than IMPORT_MAX_FILE_BYTES "
                    f"({settings.IMPORT_MAX_FILE_BYTES} bytes)",
                )
            ]
        )
    problems = ProblemCollector()
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        unit, rows = "row", _parquet_rows(path, problems)
    elif suffix in TABLE_SUFFIXES:
        unit, rows = "line", _table_rows(path, problems)
    else:
        raise ImportFailed([Problem(name, None, None, "not a .parquet, .csv or .tsv file")])
    read = DescriptionsFile(file=name, descriptions={}, rows=0, without_description=0, cut=0)
    first_row: dict[str, int] = {}
    for row, code, description in rows:
        read.rows += 1
        bad = False
        if code is None or not code.strip():
            problems.add(name, row, "code", "required value is empty", unit)
            bad = True
        elif "\x00" in code:
            problems.add(name, row, "code", "holds a NUL character", unit)
            bad = True
        if description is not None and "\x00" in description:
            problems.add(name, row, "description", "holds a NUL character", unit)
            bad = True
        if bad or code is None:
            continue
        key = code.strip()[:CODE_MAX]
        text = " ".join((description or "").split())  # one line, as a name is shown
        if not text:
            read.without_description += 1
            continue
        if len(text) > NAME_MAX:
            read.cut += 1
            text = text[:NAME_MAX]
        known = read.descriptions.get(key)
        if known is None:
            read.descriptions[key] = text
            first_row[key] = row
        elif known != text:
            problems.add(
                name,
                row,
                "description",
                f"code {key!r} is described again, differently ({unit} {first_row[key]} "
                f"says {known[:80]!r})",
                unit,
            )
    problems.raise_if_any()
    return read


def _parquet_rows(
    path: Path, problems: ProblemCollector
) -> Iterator[tuple[int, str | None, str | None]]:
    name = path.name
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        problems.add(name, None, None, f"not a readable Parquet file ({exc})")
        return
    schema = parquet.schema_arrow
    ok = True
    for column in COLUMNS:
        if column not in schema.names:
            problems.add(name, None, column, "required column is missing", "row")
            ok = False
        elif not (
            pa.types.is_string(schema.field(column).type)
            or pa.types.is_large_string(schema.field(column).type)
        ):
            problems.add(
                name,
                None,
                column,
                f"has type {schema.field(column).type}; MEDS's codes file wants string",
                "row",
            )
            ok = False
    if not ok:
        return
    row = 0
    try:
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=list(COLUMNS)):
            codes = batch.column("code").to_pylist()
            texts = batch.column("description").to_pylist()
            for code, description in zip(codes, texts, strict=True):
                row += 1
                yield row, code, description
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        problems.add(name, row + 1, None, f"unreadable Parquet data ({exc})", "row")


def _table_rows(
    path: Path, problems: ProblemCollector
) -> Iterator[tuple[int, str | None, str | None]]:
    name = path.name
    header = read_header(path)  # raises ImportFailed, naming the file, when it is not UTF-8
    missing = [column for column in COLUMNS if column not in header]
    for column in missing:
        problems.add(name, 1, column, "required column is missing")
    if missing:
        return
    try:
        for row in iter_rows(path):
            yield row.line, row.values.get("code"), row.values.get("description")
    except TableError as exc:
        problems.problems.append(exc.problem)
