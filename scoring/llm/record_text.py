"""How a patient's record becomes the text a model reads (plain Python, no database).

Serialization ``medalign-text/1`` (``SERIALIZATION_VERSION``; change the version with the format,
since every generated response records the version its prompt was built with):

- a header line: ``PATIENT | born <date> | gender <g> | race <r> | ethnicity <e>`` (fields that
  are unknown are left out; the pseudonymous person id is never part of the text);
- then one *segment* per visit, oldest first: an encounter (ordered by its start, then its
  ordinal), or, for events that belong to no encounter, one segment per calendar day. A segment
  starts with ``== VISIT <start> <type> ==`` (``== DAY <date> ==`` for day segments) and holds
  its events oldest first (undated events last, by their order in the source file), one line each:
  ``<timestamp> | <type> | <code> | <name> | <value> <unit>`` with empty fields left out; a note
  adds its text on the lines that follow, indented by two spaces.

Timestamps are written ``YYYY-MM-DD HH:MM`` (undated: ``undated``). Segments are kept separate so
the BM25 policy can choose visits (``Segment``); ``RecordText.text`` is the segments joined by a
newline after the header, so the most recent tokens are the end of the text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import cached_property
from typing import Any

SERIALIZATION_VERSION = "medalign-text/1"


@dataclass(frozen=True)
class EventRow:
    """One event as read from the database (``Event`` columns, encounter fields joined)."""

    encounter_key: int | None
    timestamp: datetime | None
    seq: int
    event_type: str
    code: str
    name: str
    value: str
    unit: str
    text: str
    note_type: str


@dataclass(frozen=True)
class EncounterRow:
    key: int
    ordinal: int
    start: datetime | None
    encounter_type: str


@dataclass(frozen=True)
class Segment:
    """A visit (or a day of events outside visits) as text, with when it started."""

    start: datetime | None
    text: str


@dataclass(frozen=True)
class RecordText:
    header: str
    segments: tuple[Segment, ...]
    version: str = SERIALIZATION_VERSION

    @cached_property
    def text(self) -> str:  # joined once: a long record is megabytes
        return join_segments(self.header, [s.text for s in self.segments])


def join_segments(header: str, segments: Sequence[str]) -> str:
    return "\n".join([header, *segments]) if segments else header


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else "undated"


def _clean(value: str) -> str:
    # One event is one line: a code or a name never carries a line break into the text.
    return " ".join((value or "").split())


def event_line(row: EventRow) -> str:
    fields = [_when(row.timestamp), _clean(row.event_type)]
    for part in (row.code, row.name or row.note_type):
        if part and part.strip():
            fields.append(_clean(part))
    measured = " ".join(p for p in (_clean(row.value), _clean(row.unit)) if p)
    if measured:
        fields.append(measured)
    line = " | ".join(fields)
    if row.text and row.text.strip():
        body = "\n".join("  " + ln for ln in row.text.strip().splitlines() if ln.strip())
        line = f"{line}\n{body}"
    return line


def header_line(demographics: dict[str, Any]) -> str:
    parts = ["PATIENT"]
    for label, key in (
        ("born", "birth_date"),
        ("gender", "gender"),
        ("race", "race"),
        ("ethnicity", "ethnicity"),
    ):
        value = demographics.get(key)
        if isinstance(value, date):
            value = value.isoformat()
        if value:
            parts.append(f"{label} {_clean(str(value))}")
    return " | ".join(parts)


def _event_order(row: EventRow) -> tuple[int, datetime, int]:
    # Dated events first, oldest first; undated ones after them in source order.
    return (1, datetime.min, row.seq) if row.timestamp is None else (0, row.timestamp, row.seq)


def serialize_record(
    *,
    demographics: dict[str, Any],
    encounters: Iterable[EncounterRow],
    events: Iterable[EventRow],
) -> RecordText:
    """The record as ``medalign-text/1`` (see the module docstring). ``events`` in any order."""
    by_encounter: dict[int, list[EventRow]] = {}
    by_day: dict[date | None, list[EventRow]] = {}
    for row in events:
        if row.encounter_key is not None:
            by_encounter.setdefault(row.encounter_key, []).append(row)
        else:
            by_day.setdefault(row.timestamp.date() if row.timestamp else None, []).append(row)
    pieces: list[tuple[tuple[int, datetime, int], Segment]] = []
    for encounter in encounters:
        rows = by_encounter.pop(encounter.key, [])
        if not rows:
            continue
        rows.sort(key=_event_order)
        start = encounter.start or rows[0].timestamp
        title = f"== VISIT {_when(start)}"
        if encounter.encounter_type.strip():
            title += f" {_clean(encounter.encounter_type)}"
        text = "\n".join([title + " ==", *(event_line(r) for r in rows)])
        order = (0, start, encounter.ordinal) if start else (1, datetime.min, encounter.ordinal)
        pieces.append((order, Segment(start, text)))
    # Events whose encounter was not listed are kept, by day, rather than silently dropped.
    for rows in by_encounter.values():
        for row in rows:
            by_day.setdefault(row.timestamp.date() if row.timestamp else None, []).append(row)
    for day, rows in by_day.items():
        rows.sort(key=_event_order)
        start = datetime.combine(day, datetime.min.time()) if day else None
        title = f"== DAY {day.isoformat()} ==" if day else "== UNDATED =="
        if start is not None and rows[0].timestamp is not None and rows[0].timestamp.tzinfo:
            start = start.replace(tzinfo=rows[0].timestamp.tzinfo)
        text = "\n".join([title, *(event_line(r) for r in rows)])
        order = (0, start, -1) if start else (2, datetime.min, 0)
        pieces.append((order, Segment(start, text)))
    pieces.sort(key=lambda p: (p[0][0], _naive(p[0][1]), p[0][2]))
    return RecordText(header_line(demographics), tuple(seg for _, seg in pieces))


def _naive(value: datetime) -> datetime:
    return value.replace(tzinfo=None) if value.tzinfo else value
