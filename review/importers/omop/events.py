"""What a row of an OMOP event table becomes: an event of its person's record.

An event is named by its concept (``concepts``), dated by its datetime (else its date), placed
in its visit's encounter, and keeps its source value when that says more than the name. A value
is read as OMOP's conventions and ``meds_etl`` read it: ``value_as_number``, else
``value_as_string``, else ``value_as_concept_id``'s name, else ``value_source_value`` (a number
there is a number too); the unit is ``unit_source_value``, else the unit concept's UCUM code. A
``note`` row is a note, titled by ``note_title`` or its note type; ``death`` is a ``MEDS_DEATH``
event whose value is the cause; ``visit_detail`` and ``device_exposure`` keep their end.

Refused, every problem of a row named: a person or visit that is not in its table, a visit of
another person, an empty date, an event dated before the person's birth (compared by date:
birth times are often just midnight).

A batch goes through in stages: its columns parsed (``columns``), its concepts named and its
visits looked up once each, its rows checked and placed in their records, then each row's
event appended to the cohort's COPY buffer: no object and no call per event.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import meds

from ..columnar import CohortWriter, NumberTexts
from ..run import ImportRun
from ..writers import EVENT_FLUSH_ROWS, NO_ATTRIBUTES
from .cdm import EventTable
from .columns import Columns
from .concepts import Concepts, Named
from .keys import KeyCheck
from .persons import Person, Persons
from .values import BadValue
from .visits import Visits

_MISSING = object()

BatchHandler = Callable[[str, Columns], None]


@dataclass(slots=True)
class _EventColumns:
    """An event batch's columns as Python lists: those every event table has, then a note
    table's or a value table's own (the other kind's stay empty)."""

    person_ids: list[int | None]
    whens: list[datetime | None]
    ends: list[datetime | None] | None  # the end kept on the event, where the table has one
    concept_ids: list[int | None]
    visit_ids: list[int | None]
    sources: list[str]
    titles: list[str] = field(default_factory=list)
    note_texts: list[str] = field(default_factory=list)
    note_kinds: list[int | None] = field(default_factory=list)
    numerics: list[float | None] = field(default_factory=list)
    value_texts: list[str] = field(default_factory=list)
    value_concepts: list[int | None] = field(default_factory=list)
    value_sources: list[str] = field(default_factory=list)
    unit_sources: list[str] = field(default_factory=list)
    unit_concepts: list[int | None] = field(default_factory=list)


@dataclass(slots=True)
class _EventNames:
    """Each distinct concept of an event batch, named once: a code and name, or None."""

    events: dict[int | None, Named | None]
    note_kinds: dict[int | None, Named | None] = field(default_factory=dict)
    values: dict[int | None, Named | None] = field(default_factory=dict)
    units: dict[int | None, Named | None] = field(default_factory=dict)
    unit_codes: dict[int | None, str] = field(default_factory=dict)  # UCUM's, e.g. "mg/dL"


# A row to write: (index in the batch, person, encounter id, seq in the record, time). The time
# is never None there: a row without one is refused (typed so, without a check per row).
_Placed = tuple[int, Person, int | None, int, datetime]


class EventReader:
    """Reads the event tables' batches into the cohort's events."""

    def __init__(
        self,
        importer: ImportRun,
        cohort: CohortWriter,
        concepts: Concepts,
        persons: Persons,
        visits: Visits,
        keys: KeyCheck,
        *,
        has_visits: bool,
    ) -> None:
        self.importer = importer
        self.cohort = cohort
        self.concepts = concepts
        self.persons = persons
        self.visits = visits
        self.keys = keys
        self.has_visits = has_visits  # the export has visit_occurrence: events name visits
        self.number_texts = NumberTexts()

    def handler(self, table: str, spec: EventTable) -> BatchHandler:
        """The batch handler for event table ``table``."""

        def handle_batch(file: str, columns: Columns) -> None:
            self.read_batch(file, columns, table, spec)

        return handle_batch

    def read_batch(self, file: str, columns: Columns, table: str, spec: EventTable) -> None:
        """One batch of an event table, stage by stage."""
        if spec.has_key:
            self.keys.remember(columns, columns.ints(f"{table}_id"))
        batch = self._parse_columns(columns, spec)
        names = self._name_concepts(batch, spec)
        visits = self.visits.lookup(batch.visit_ids) if self.has_visits else {}
        placed, per_encounter = self._place_rows(columns, batch, visits, spec)
        if spec.event_type == "note":
            read, fell_back = self._append_notes(placed, batch, names)
        else:
            read, fell_back = self._append_values(placed, batch, names, spec.event_type)
        self._count_batch(table, per_encounter, read, fell_back)

    def _parse_columns(self, columns: Columns, spec: EventTable) -> _EventColumns:
        """The columns the table's events are made of, parsed a column at a time."""
        batch = _EventColumns(
            person_ids=columns.ints("person_id"),
            whens=columns.times(spec.datetime, spec.date),
            ends=columns.times(*spec.end) if spec.end else None,
            concept_ids=columns.ints(spec.concept),
            visit_ids=columns.ints("visit_occurrence_id"),
            sources=columns.texts(spec.source_value),
        )
        if spec.event_type == "note":
            batch.titles = columns.texts("note_title")
            batch.note_texts = columns.texts("note_text")
            batch.note_kinds = columns.ints("note_type_concept_id")
        else:
            batch.numerics = columns.floats("value_as_number")
            batch.value_texts = columns.texts("value_as_string")
            batch.value_concepts = columns.ints("value_as_concept_id")
            batch.value_sources = columns.texts("value_source_value")
            batch.unit_sources = columns.texts("unit_source_value")
            batch.unit_concepts = columns.ints("unit_concept_id")
        return batch

    def _name_concepts(self, batch: _EventColumns, spec: EventTable) -> _EventNames:
        """The batch's concepts, looked up in one query, each distinct one named once."""
        note = spec.event_type == "note"
        own = [batch.note_kinds] if note else [batch.value_concepts, batch.unit_concepts]
        self.concepts.prefetch([batch.concept_ids, *own])
        names = _EventNames(self.concepts.resolve(batch.concept_ids, spec.concept))
        if note:
            names.note_kinds = self.concepts.resolve(batch.note_kinds, "note_type_concept_id")
        else:
            names.values = self.concepts.resolve(batch.value_concepts, "value_as_concept_id")
            names.units = self.concepts.resolve(batch.unit_concepts, "unit_concept_id")
            names.unit_codes = {
                # UCUM's concept code is the unit ("mg/dL"); a bare concept id is none.
                cid: named.code.split("/", 1)[1]
                if named and not named.code.startswith("CONCEPT/")
                else ""
                for cid, named in names.units.items()
            }
        return names

    def _place_rows(
        self,
        columns: Columns,
        batch: _EventColumns,
        visits: dict[Any, tuple[Any, ...]],
        spec: EventTable,
    ) -> tuple[list[_Placed], dict[int, int]]:
        """The rows to write, each placed in its person's record (its seq, the person's span
        and the events per encounter counted); every problem of the other rows is named, and a
        row of a person kept as already imported is passed over."""
        person_ids, whens, visit_ids = batch.person_ids, batch.whens, batch.visit_ids
        persons = self.persons.by_id
        has_visits = self.has_visits
        bad = columns.bad
        placed: list[_Placed] = []
        keep = placed.append
        # A plain dict: a Counter's ``+= 1`` costs several times ``get`` and a store.
        per_encounter: dict[int, int] = {}
        count = per_encounter.get
        for i in range(columns.n):
            # Every check runs, so a row with several bad fields names each of them.
            problems: list[BadValue] | None = None
            person_id = person_ids[i]
            person: Any = _MISSING
            if person_id is None:
                problems = [BadValue("person_id", "required value is empty")]
            else:
                person = persons.get(person_id, _MISSING)
                if person is _MISSING:
                    problems = [
                        BadValue("person_id", f"person {person_id} is not in the person table")
                    ]
            when = whens[i]
            if when is None:
                problems = problems or []
                problems.append(BadValue(spec.date, "required value is empty"))
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
                    problems.append(BadValue("visit_occurrence_id", message))
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
                    BadValue(
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
            person.events += 1
            if person.first is None or when < person.first:
                person.first = when
            if person.last is None or when > person.last:
                person.last = when
            if encounter_id is not None:
                per_encounter[encounter_id] = count(encounter_id, 0) + 1
            keep((i, person, encounter_id, person.events, when))  # type: ignore[arg-type]
        return placed, per_encounter

    def _append_notes(
        self, placed: list[_Placed], batch: _EventColumns, names: _EventNames
    ) -> tuple[int, int]:
        """A note table's rows, appended to the COPY buffer as notes; (read, fell back)."""
        concept_ids, sources, ends = batch.concept_ids, batch.sources, batch.ends
        titles, texts, note_kinds = batch.titles, batch.note_texts, batch.note_kinds
        event_names, kind_names = names.events, names.note_kinds
        rows = self.cohort.rows
        append = rows.append
        no_attributes, flush_at = NO_ATTRIBUTES, EVENT_FLUSH_ROWS
        read = fell_back = 0
        for i, person, encounter_id, seq, when in placed:
            named = event_names[concept_ids[i]]
            source = sources[i]
            code, name, missing = named if named else ("", "", False)  # 0: no matching concept
            name = name or source or code or "unmapped"
            attributes = {"source_value": source} if source and source != name else {}
            if ends is not None and (end := ends[i]) is not None:
                attributes["end"] = end.isoformat()
            kind = kind_names[note_kinds[i]]
            missing = missing or bool(kind and kind.fell_back)
            note_type = titles[i] or (kind.name if kind else "") or name
            person.notes += 1
            # fmt: off
            append((person.patient_id, encounter_id, seq, when, "note", code[:120], note_type[:500],
                    "", None, "", texts[i], note_type[:120], attributes or no_attributes))
            # fmt: on
            if missing:
                fell_back += 1
            else:
                read += 1
            if len(rows) >= flush_at:
                self.cohort.flush_later()
        return read, fell_back

    def _append_values(
        self, placed: list[_Placed], batch: _EventColumns, names: _EventNames, event_type: str
    ) -> tuple[int, int]:
        """A coded table's rows (``death``'s too), appended to the COPY buffer with their
        values and units; (read, fell back)."""
        concept_ids, sources, ends = batch.concept_ids, batch.sources, batch.ends
        numerics, value_texts, value_sources = (
            batch.numerics,
            batch.value_texts,
            batch.value_sources,
        )
        value_concepts, unit_sources, unit_concepts = (
            batch.value_concepts,
            batch.unit_sources,
            batch.unit_concepts,
        )
        event_names, value_names = names.events, names.values
        unit_names, unit_codes = names.units, names.unit_codes
        death = event_type == "death"
        number_texts = self.number_texts
        rows = self.cohort.rows
        append = rows.append
        no_attributes, flush_at = NO_ATTRIBUTES, EVENT_FLUSH_ROWS
        read = fell_back = 0
        for i, person, encounter_id, seq, when in placed:
            named = event_names[concept_ids[i]]
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
            if ends is not None and (end := ends[i]) is not None:
                attributes["end"] = end.isoformat()
            # As OMOP's conventions and meds_etl read a result: the number, else the string,
            # else the answer concept's name, else the source value (where Synthea keeps
            # urinalysis results and T-scores).
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
                    numeric = number_or_none(value) if value else None
            unit = unit_sources[i]
            if not unit:
                unit_named = unit_names[unit_concepts[i]]
                missing = missing or bool(unit_named and unit_named.fell_back)
                unit = unit_codes[unit_concepts[i]]
            # fmt: off
            append((person.patient_id, encounter_id, seq, when, event_type, code[:120], name[:500],
                    value[:100], numeric, unit[:60], "", "", attributes or no_attributes))
            # fmt: on
            if missing:
                fell_back += 1
            else:
                read += 1
            if len(rows) >= flush_at:
                self.cohort.flush_later()
        return read, fell_back

    def _count_batch(
        self, table: str, per_encounter: dict[int, int], read: int, fell_back: int
    ) -> None:
        """The batch's events per encounter (summed at the end) and its rows in the summary."""
        if per_encounter:
            self.visits.count_events(per_encounter)
        summary = self.importer.summary
        summary.tally(table, "read", read)
        if fell_back:
            summary.tally(table, "fell back", fell_back)


def number_or_none(text: str) -> float | None:
    """A result kept as text ("-2.7") as a number too; None for words ("Negative")."""
    try:
        number = float(text)
    except ValueError:
        return None
    return number if number == number and abs(number) != float("inf") else None
