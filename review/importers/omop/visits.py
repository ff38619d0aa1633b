"""Which encounters an OMOP export has, and which encounter an event's visit id names.

A ``visit_occurrence`` row becomes an encounter, typed by its visit concept's name (else its
source value); a date alone ends at the end of that day, so the day's events fall inside the
visit. Visits come in any order and an event may name any of them, so the visit map (visit id
-> person, encounter) lives in a temporary table that each event batch asks once. Encounters
are written as their visits are read, with provisional ordinals above any real one (the
ordinal is unique per patient), and numbered by start time in SQL at the end, as the record
page lists them; their event counts are summed there too, from each batch's counts.
"""

from typing import Any

from django.db import connection

from review.models import Encounter

from ..columnar import CohortWriter
from ..run import ImportRun
from ..scratch import ScratchTable
from .concepts import Concepts
from .persons import Persons
from .values import RowValues, parse_int, parse_text, parse_when

# Visits get provisional ordinals above any real one while they are read (the ordinal is unique
# per patient); the final numbering, by start time, happens in SQL at the end.
PROVISIONAL_ORDINAL = 1_000_000_000


class Visits:
    """The export's visits: read from ``visit_occurrence``, then asked by the event tables."""

    def __init__(
        self,
        importer: ImportRun,
        cohort: CohortWriter,
        concepts: Concepts,
        persons: Persons,
        *,
        table: ScratchTable,
        event_counts: ScratchTable,
    ) -> None:
        self.importer = importer
        self.cohort = cohort
        self.concepts = concepts
        self.persons = persons
        self.table = table  # id, person_id, encounter_id, row
        self.event_counts = event_counts  # encounter_id, n: one row per encounter and batch
        self.pending: list[tuple[int | None, int | None, int | None, int]] = []

    def read_row(self, file: str, row: int, values: dict[str, Any]) -> None:
        """One ``visit_occurrence`` row: its encounter made, its id kept for the events."""
        read = RowValues(values)
        visit_id = read.get("visit_occurrence_id", parse_int)
        if visit_id is None:
            read.fail("visit_occurrence_id", "required value is empty")
        person_id, person = self.persons.known(read)
        start = read.start("visit_start_datetime", "visit_start_date")
        end = read.get("visit_end_datetime", parse_when)
        if end is None:
            end_date = read.get("visit_end_date", parse_when)
            # A date alone ends at the end of that day, so the day's events fall inside the visit.
            end = end_date.replace(hour=23, minute=59, second=59) if end_date else None
        named = self.concepts.named(read.get("visit_concept_id", parse_int), "visit_concept_id")
        kind = (named.name or named.code) if named else parse_text(values.get("visit_source_value"))
        if person is not None and start is not None:
            read.check_birth(person.birth, start, person_id, "visit_start_date")
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
        self.pending.append((visit_id, person_id, encounter_id, row))

    def write_pending(self) -> None:
        """The batch's visits, into the visit map."""
        self.table.insert(self.pending)
        self.pending = []

    def repeats(self, limit: int) -> list[tuple[Any, int, int]]:
        """(visit id, first row, repeated row) for each visit id read twice."""
        return self.table.repeats("id", "row", limit)

    def lookup(self, visit_ids: list[int | None]) -> dict[Any, tuple[Any, ...]]:
        """(person id, encounter id) of each visit of an event batch, in one query."""
        return self.table.lookup(
            "id", (v for v in visit_ids if v is not None), ("person_id", "encounter_id")
        )

    def count_events(self, per_encounter: dict[int, int]) -> None:
        """An event batch's events per encounter, summed into the encounters at the end."""
        self.event_counts.insert(per_encounter.items())

    def finish(self) -> None:
        """Encounter numbers and event counts: set-based, from what was written."""
        encounters = Encounter._meta.db_table
        visits = self.table.name
        counts = self.event_counts.name
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
