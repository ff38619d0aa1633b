"""Who the people of an OMOP export are, and what the importer keeps of each.

A ``person`` row becomes a patient: birth from ``birth_datetime``, else year, month and day of
birth; sex, race and ethnicity by their concepts' names, else their source values. New patients
are created a batch at a time. What the importer keeps per person is a few numbers (ids,
birth, tallies, observation periods), never anything per event or visit, so its memory stays
flat however many events the tables hold; the tallies reach the patients in one statement at
the end. ``observation_period`` is the span the record covers, kept on the patient's
demographics, not as an event.
"""

import json
from datetime import date, datetime, time
from typing import Any

from django.db import connection
from django.utils import timezone

from review.models import Patient

from ..columnar import CohortWriter, local_zone
from ..demographics import normalise_sex
from ..run import ImportRun
from ..scratch import ScratchTable
from .concepts import Concepts
from .values import RowValues, parse_int, parse_text, parse_when

# The person table's concept columns, looked up a batch at a time.
PERSON_CONCEPTS = ("gender_concept_id", "race_concept_id", "ethnicity_concept_id")


class Person:
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


class Persons:
    """The export's people by ``person_id``: read from ``person``, then asked by every table."""

    def __init__(
        self, importer: ImportRun, cohort: CohortWriter, concepts: Concepts, tallies: ScratchTable
    ) -> None:
        self.importer = importer
        self.cohort = cohort
        self.concepts = concepts
        self.tallies = tallies  # the patients' final counts, written in one statement
        self.by_id: dict[int, Person | None] = {}  # None: kept as already imported
        self.queued: list[tuple[int, Patient]] = []

    def read_row(self, file: str, row: int, values: dict[str, Any]) -> None:
        """One ``person`` row: its patient queued (or, already imported, kept or replaced)."""
        read = RowValues(values)
        person_id = read.get("person_id", parse_int)
        if person_id is None:
            read.fail("person_id", "required value is empty")
        elif person_id in self.by_id:
            read.fail("person_id", f"person {person_id} appears twice")
        birth = read.get("birth_datetime", parse_when)
        birth_date = birth.date() if birth else None
        if birth_date is None:
            year = read.get("year_of_birth", parse_int)
            if year:
                month = read.get("month_of_birth", parse_int) or 1
                day = read.get("day_of_birth", parse_int) or 1
                try:
                    birth_date = date(year, month, day)
                except ValueError as exc:
                    read.fail("year_of_birth", f"no such birth date ({exc})")
        demographics = {}
        fell_back = False
        for target in ("gender", "race", "ethnicity"):
            column = f"{target}_concept_id"
            named = self.concepts.named(read.get(column, parse_int), column)
            source = parse_text(values.get(f"{target}_source_value"))
            demographics[target] = (named.name if named and named.name else "") or source
            fell_back = fell_back or bool(named and named.fell_back)
        read.check()
        assert person_id is not None  # else ``check`` refused the row
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
            self.by_id[person_id] = None
            return
        # A queued patient's id comes when its batch's patients are created (``create_queued``).
        self.by_id[person_id] = Person(patient.pk, birth_date)
        if patient.pk is None:
            self.queued.append((person_id, patient))

    def create_queued(self) -> None:
        """Create the patients the batch queued, and note their ids."""
        self.cohort.create_patients()
        for person_id, patient in self.queued:
            self.by_id[person_id].patient_id = patient.pk  # type: ignore[union-attr]
        self.queued = []

    def known(self, read: RowValues) -> tuple[int | None, Person | None]:
        """The row's person id and what is kept of them (None: kept as already imported, or
        a problem noted on ``read``)."""
        person_id = read.get("person_id", parse_int)
        if person_id is None:
            read.fail("person_id", "required value is empty")
            return None, None
        if person_id not in self.by_id:
            read.fail("person_id", f"person {person_id} is not in the person table")
            return person_id, None
        return person_id, self.by_id[person_id]

    def read_observation_period(self, file: str, row: int, values: dict[str, Any]) -> None:
        """The span the record covers: kept on the patient, not as an event."""
        read = RowValues(values)
        _, person = self.known(read)
        start = read.start("observation_period_start_date", "observation_period_start_date")
        end = read.get("observation_period_end_date", parse_when)
        read.check()
        self.importer.summary.tally("observation_period", "read")
        if person is not None and start is not None:
            shown = f"{start.date()} to {end.date()}" if end else f"from {start.date()}"
            person.periods.append(shown)

    def finish(self) -> None:
        """Every patient's tallies (events, notes, first and last event, observation periods),
        set in one statement from a scratch table, not Django's ``bulk_update``, whose CASE
        expressions grow with the number of people."""
        people = [p for p in self.by_id.values() if p is not None]
        adapt = connection.ops.adapt_datetimefield_value
        self.tallies.insert(
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
        tallies = self.tallies.name
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
