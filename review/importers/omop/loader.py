"""In what order an OMOP export is read, and how each table goes through, batch by batch.

``concept`` first (what the others' concept ids name), then ``person`` (every other table is
keyed on it: its problems stop the import there), ``visit_occurrence`` (the encounters events
name), the event tables, ``observation_period``; then the records are finished in SQL (visits
numbered, tallies set) and the vocabulary's synonyms stored. A table is read in record batches
(``files.iter_batches``); a batch's problems are named in row order, whichever column they were
found in; the progress bar follows the bytes read.

Unlike MEDS, OMOP tables are not grouped by patient, and an event may name any visit. What
must be remembered across the input lives in temporary tables (``scratch``), not in Python:
concepts, the visit map, the primary keys of a large table, each batch's events per encounter
and, at the end, the patients' tallies. A batch asks them, in one query each, for what it
needs, so the importer's memory holds a few numbers per person and one batch: flat in the
number of events and visits.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..columnar import NUL_PROBLEM, CohortWriter, nul_cells, pylist
from ..descriptions import patients_count_undescribed
from ..run import ImportRun
from ..scratch import ScratchTable, drop_scratch_tables, scratch_tables
from .cdm import EVENT_TABLES
from .columns import Columns
from .concepts import Concepts
from .events import BatchHandler, EventReader
from .files import iter_batches, row_count
from .keys import KeyCheck
from .persons import PERSON_CONCEPTS, Persons
from .synonyms import concept_synonyms_import
from .values import BadRow, BadValue
from .visits import Visits

RowHandler = Callable[[str, int, dict[str, Any]], None]


def _scratch_tables() -> list[ScratchTable]:
    """What must be remembered across tables, as temporary tables rather than Python memory:
    concepts, visits (id -> person, encounter), primary keys for the duplicate check, each
    batch's events per encounter (summed into the encounters at the end) and the patients'
    tallies."""
    return [
        ScratchTable(
            "omop_import_concept",
            [("id", "bigint"), ("vocabulary", "text"), ("code", "text"), ("name", "text")],
        ),
        ScratchTable(
            "omop_import_visit",
            [
                ("id", "bigint"),
                ("person_id", "bigint"),
                ("encounter_id", "bigint"),
                ("row", "integer"),
            ],
        ),
        ScratchTable("omop_import_key", [("id", "bigint"), ("row", "integer")]),
        ScratchTable("omop_import_count", [("encounter_id", "bigint"), ("n", "integer")]),
        ScratchTable(
            "omop_import_tally",
            [
                ("patient_id", "bigint"),
                ("events", "integer"),
                ("notes", "integer"),
                ("first_at", "timestamptz"),
                ("last_at", "timestamptz"),
                ("demographics", "text"),
            ],
        ),
    ]


class OmopLoader:
    def __init__(
        self, importer: ImportRun, tables: dict[str, Path], unread: dict[str, Path] | None = None
    ) -> None:
        self.importer = importer
        self.tables = tables
        self.unread = unread or {}
        self.cohort = CohortWriter(importer, "omop")
        # Made in the database only when the import gets as far as using them (``_run``).
        self.scratch = _scratch_tables()
        concept_table, visit_table, key_table, count_table, tally_table = self.scratch
        self.concepts = Concepts(concept_table, present="concept" in tables)
        self.persons = Persons(importer, self.cohort, self.concepts, tally_table)
        self.visits = Visits(
            importer,
            self.cohort,
            self.concepts,
            self.persons,
            table=visit_table,
            event_counts=count_table,
        )
        self.events = EventReader(
            importer,
            self.cohort,
            self.concepts,
            self.persons,
            self.visits,
            KeyCheck(key_table),
            has_visits="visit_occurrence" in tables,
        )

    def problem(self, file: str, row: int | None, column: str | None, message: str) -> None:
        self.importer.problems.add(file, row, column, message, unit="row")

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
        scratch_tables(*self.scratch)
        if self.concepts.present:
            self._read(
                "concept", ("concept_id", "vocabulary_id", "concept_code"), self.concepts.store
            )
            self.concepts.table.index("id")
        self._read(
            "person",
            ("person_id",),
            self._rows(self.persons.read_row, PERSON_CONCEPTS, after=self.persons.create_queued),
        )
        if self.importer.problems.problems:
            return  # every later table is keyed on person: its problems would only repeat these
        if "visit_occurrence" in self.tables:
            self._read(
                "visit_occurrence",
                ("visit_occurrence_id", "person_id", "visit_start_date"),
                self._rows(
                    self.visits.read_row, ("visit_concept_id",), after=self.visits.write_pending
                ),
            )
            self._report_repeats(
                self.visits.repeats(self.importer.problems.MAX_KEPT),
                self.tables["visit_occurrence"].name,
                "visit_occurrence_id",
                "visit {id} appears twice",
            )
            self.visits.table.index("id")
            self.cohort.write_encounters()
        for name, spec in EVENT_TABLES.items():
            if name in self.tables:
                self._read(name, ("person_id", spec.date), self.events.handler(name, spec))
                if spec.has_key:
                    self._report_repeats(
                        self.events.keys.take_repeats(self.importer.problems.MAX_KEPT),
                        self.tables[name].name,
                        f"{name}_id",
                        f"{name}_id {{id}} appears again (first at row {{first}})",
                    )
        if "observation_period" in self.tables:
            self._read(
                "observation_period",
                ("person_id", "observation_period_start_date"),
                self._rows(self.persons.read_observation_period, ()),
            )
        self.cohort.flush()
        self._summarise()
        if self.importer.problems.problems:
            return  # the import is refused: no need to finish the records
        self.visits.finish()
        self.persons.finish()
        # Rows whose concept the vocabulary lacks keep CONCEPT/<id>: the review page says so
        # when they are most of a record.
        patients_count_undescribed(dataset_id=self.importer.dataset.pk)
        concept_synonyms_import(
            dataset=self.importer.dataset, tables=self.tables, concepts=self.concepts.table
        )
        drop_scratch_tables(self.scratch)

    def _read(self, name: str, required: tuple[str, ...], handle: BatchHandler) -> None:
        """Table ``name``, batch by batch, through ``handle``; its problems named by row."""
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
                columns = Columns(batch, row)
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

    def _rows(
        self,
        handle: RowHandler,
        concept_columns: tuple[str, ...],
        after: Callable[[], None] | None = None,
    ) -> BatchHandler:
        """A batch handler that calls ``handle`` per row with a dict of values (small tables)."""

        def handle_batch(file: str, columns: Columns) -> None:
            batch = columns.batch
            values_by_column = {n: pylist(batch.column(n)) for n in batch.schema.names}
            self.concepts.prefetch([columns.ints(c) for c in concept_columns if c in columns.names])
            for i in range(columns.n):
                # A row with a value that did not parse is still checked, so each of its
                # problems is named; what it writes goes nowhere (the import is refused).
                values = {n: column[i] for n, column in values_by_column.items()}
                try:
                    handle(file, columns.offset + i + 1, values)
                except BadValue as exc:
                    columns.fail_row(i, [exc])
                except BadRow as exc:
                    columns.fail_row(i, exc.problems)
            if after is not None:
                after()

        return handle_batch

    def _report_repeats(
        self, repeats: list[tuple[Any, int, int]], file: str, column: str, message: str
    ) -> None:
        """Name each repeated primary key at the row that repeats it."""
        for key, first, again in repeats:
            self.problem(file, again, column, message.format(id=key, first=first))

    def _summarise(self) -> None:
        """What the summary adds to the counts: the concepts that fell back, and the CDM's
        tables that were there but not read."""
        summary = self.importer.summary
        self.concepts.warn_missing(summary)
        for name, path in sorted(self.unread.items()):
            if name == "concept_synonym" and self.concepts.present:
                continue  # read beside concept for its synonyms (``synonyms``)
            summary.tally(name, "ignored", row_count(path))
            summary.files[path.name] = "omop:ignored"


def load_omop(
    importer: ImportRun, tables: dict[str, Path], unread: dict[str, Path] | None = None
) -> None:
    """Load OMOP CDM ``tables`` (by table name) through ``importer`` (inside its transaction);
    ``unread``: the CDM's other tables found beside them, named in the summary as ignored."""
    # Arrow's default allocator (mimalloc) keeps the CSV blocks' and casts' freed pages, so the
    # peak grew with the import while the importer's own data stayed flat. The system allocator
    # (glibc) gives most of them back but still fragments; jemalloc, where pyarrow has it,
    # stays flat (docs/benchmarks.md). Restored afterwards.
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
