"""A patient's record as a model reads it: serialized once per worker process.

A record is read in one query of plain columns ordered by the (patient, timestamp, seq) index
and serialized (``record_text``) once per process: MedAlign's 303 instructions sit on 276
records, and a run asks for each record once per context length. The cache is keyed by what
changes when a record is reloaded (event count, last event, serialization version) and holds a
few records only.
"""

from __future__ import annotations

from collections import OrderedDict
from threading import Lock

from review.models import Encounter, Event, Patient

from .record_text import SERIALIZATION_VERSION, EncounterRow, EventRow, RecordText, serialize_record

_CACHE: OrderedDict[tuple[object, ...], RecordText] = OrderedDict()
_CACHE_SIZE = 8
_LOCK = Lock()


def _key(patient: Patient) -> tuple[object, ...]:
    return (patient.pk, patient.event_count, patient.last_event_at, SERIALIZATION_VERSION)


def record_text(patient: Patient) -> RecordText:
    """``patient``'s record serialized (``record_text`` module docstring), cached per process."""
    key = _key(patient)
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            _CACHE.move_to_end(key)
            return cached
    encounters = [
        EncounterRow(key=pk, ordinal=ordinal, start=start, encounter_type=kind or "")
        for pk, ordinal, start, kind in Encounter.objects.filter(patient=patient)
        .order_by("ordinal")
        .values_list("pk", "ordinal", "start", "encounter_type")
    ]
    events = (
        EventRow(*row)
        for row in Event.objects.filter(patient=patient)
        .order_by("timestamp", "seq")
        .values_list(
            "encounter_id",
            "timestamp",
            "seq",
            "event_type",
            "code",
            "name",
            "value",
            "unit",
            "text",
            "note_type",
        )
        .iterator(chunk_size=5000)
    )
    text = serialize_record(
        demographics={
            "birth_date": patient.birth_date,
            "gender": patient.gender,
            "race": patient.race,
            "ethnicity": patient.ethnicity,
        },
        encounters=encounters,
        events=events,
    )
    with _LOCK:
        _CACHE[key] = text
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return text


def record_text_cache_clear() -> None:
    with _LOCK:
        _CACHE.clear()
