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

A batch is parsed a column at a time (``columns``), its concepts named and its visits looked
up once each, then one lean pass over its rows appends each event to the cohort's COPY buffer:
no object and no call per event.
"""

from collections.abc import Callable
from typing import Any

import meds

from ..columnar import CohortWriter, NumberTexts
from ..run import ImportRun
from ..writers import EVENT_FLUSH_ROWS, NO_ATTRIBUTES
from .cdm import EventTable
from .columns import Columns
from .concepts import Concepts
from .keys import KeyCheck
from .persons import Persons
from .values import BadValue
from .visits import Visits

_MISSING = object()

BatchHandler = Callable[[str, Columns], None]


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
        """One batch of an event table: parsed a column at a time, then one lean pass."""
        n = columns.n
        if spec.has_key:
            self.keys.remember(columns, columns.ints(f"{table}_id"))
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
        self.concepts.prefetch([concept_ids, *extra_concepts])
        # Each distinct concept of the batch is resolved once: a code and name, or None.
        names = self.concepts.resolve(concept_ids, spec.concept)
        if note:
            kinds = self.concepts.resolve(note_kinds, "note_type_concept_id")
        else:
            value_names = self.concepts.resolve(value_concepts, "value_as_concept_id")
            unit_names = self.concepts.resolve(unit_concepts, "unit_concept_id")
            units = {
                # UCUM's concept code is the unit ("mg/dL"); a bare concept id is none.
                cid: named.code.split("/", 1)[1]
                if named and not named.code.startswith("CONCEPT/")
                else ""
                for cid, named in unit_names.items()
            }
        has_visits = self.has_visits
        visits: dict[Any, tuple[Any, ...]] = {}
        if has_visits:
            visits = self.visits.lookup(visit_ids)
        persons = self.persons.by_id
        bad = columns.bad
        rows = self.cohort.rows
        append = rows.append
        # A plain dict: a Counter's ``+= 1`` costs several times ``get`` and a store.
        per_encounter: dict[int, int] = {}
        count = per_encounter.get
        number_texts = self.number_texts
        event_type = spec.event_type
        read = fell_back = 0
        for i in range(n):
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
                        numeric = number_or_none(value) if value else None
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
