"""Reads of one patient's record: the excerpt, timeline pages, record search, one event.

Records reach 100,000+ events, so nothing here loads a record whole. Every query is bounded
either by a LIMIT on an index walk (keyset pagination on ``(timestamp, seq)``, newest first) or by
the number of *distinct* event names or types, which a loose index scan reads without touching
the rows themselves. Undated events (no timestamp) come after all dated ones, ordered by ``seq``.
"""

import functools
import hashlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.functions import Length, Substr
from django.template.loader import get_template, render_to_string
from django.utils.safestring import SafeString, mark_safe

from medalign_site.prepared import PreparedQuery
from review.models import Event, EventNameSynonym, Instruction, Patient, RecordExcerpt
from review.search import highlight, rank_concepts, snippet
from review.vocabulary import (
    Concept,
    clinical,
    concepts,
    counts,
    phrases,
    sql_fragments,
    stemmed,
)

PAGE_SIZE = 100
SEARCH_PAGE_SIZE = 50
NOTE_PREVIEW_CHARS = 280
# The excerpt ranks the most recent notes only: real records hold thousands of long notes and the
# excerpt has to open in well under a second. The whole record stays one click away.
EXCERPT_NOTE_CANDIDATES = 150
# Beyond those, the most recent notes that mention a concept of the instruction at all (found
# by the database): the answer can be in a note years old.
EXCERPT_OLD_NOTE_CANDIDATES = 100
EXCERPT_NOTE_CHARS = 20_000
EXCERPT_LATEST_NOTES = 2
EXCERPT_NOTES_SHOWN = 3
EXCERPT_NAMES_SHOWN = 5
EXCERPT_FINDINGS_MAX = 10
EXCERPT_TYPE_SCAN = 200  # recent events of an asked-for type scanned for distinct names
EXCERPT_OCCURRENCES = 3
EXCERPT_RECENT_EVENTS = 12
SEARCH_MAX_NAMES = 25
SEARCH_MAX_TERMS = 6
QUERY_MAX_CHARS = 200
NOTE = "note"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ROW_FIELDS = (
    "id",
    "seq",
    "timestamp",
    "event_type",
    "code",
    "name",
    "value",
    "unit",
    "note_type",
    "encounter_id",
    "encounter__ordinal",
    "encounter__encounter_type",
)


# --- cursors ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cursor:
    """Position after which the next page starts: a dated event or, past those, an undated one."""

    timestamp: datetime | None
    seq: int

    def encode(self) -> str:
        if self.timestamp is None:
            return f"u{self.seq}"
        micros = (self.timestamp - _EPOCH) // timedelta(microseconds=1)
        return f"t{micros}.{self.seq}"

    @classmethod
    def decode(cls, raw: str) -> "Cursor | None":
        """Parse a cursor from a query string; ValueError if it is malformed."""
        if not raw:
            return None
        if len(raw) > 40:
            raise ValueError("cursor too long")
        if raw[0] == "u":
            return cls(None, _non_negative(raw[1:]))
        if raw[0] == "t":
            micros, _, seq = raw[1:].partition(".")
            try:
                timestamp = _EPOCH + timedelta(microseconds=int(micros))
            except OverflowError:
                raise ValueError("cursor out of range") from None
            return cls(timestamp, _non_negative(seq))
        raise ValueError("unknown cursor")

    @classmethod
    def end_of_day(cls, day: date) -> "Cursor":
        """Start a newest-first walk at the end of ``day`` (jump to a date)."""
        try:
            midnight = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
        except OverflowError:
            raise ValueError("date out of range") from None
        return cls(midnight, 0)


def _non_negative(raw: str) -> int:
    value = int(raw)
    if not 0 <= value < 2**63:  # a database integer
        raise ValueError("out of range")
    return value


# --- rows ------------------------------------------------------------------------------------
@dataclass
class Row:
    """One event as the record views show it (note text cut to a preview)."""

    id: int
    seq: int
    timestamp: datetime | None
    event_type: str
    code: str
    name: str
    value: str
    unit: str
    note_type: str
    encounter_id: int | None
    encounter_ordinal: int | None
    encounter_type: str
    preview: str = ""
    text_length: int = 0
    html: SafeString | None = None  # highlighted preview, for search results

    @property
    def is_note(self) -> bool:
        return self.event_type == NOTE

    @property
    def day(self) -> date | None:
        return self.timestamp.date() if self.timestamp else None

    @property
    def is_truncated(self) -> bool:
        return self.text_length > len(self.preview)

    @property
    def group_key(self) -> str:
        # The timeline groups by encounter and date; pages repeat a header only when it changes.
        return f"{self.day or 'undated'}|{self.encounter_id or ''}"

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.timestamp, self.seq)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["timestamp"] = self.timestamp.isoformat() if self.timestamp else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Row":
        data = dict(data)
        if data["timestamp"] is not None:
            data["timestamp"] = datetime.fromisoformat(data["timestamp"])
        if data["html"] is not None:
            data["html"] = mark_safe(data["html"])  # noqa: S308 - HTML this module escaped
        return cls(**data)


def _rows(qs: QuerySet[Event], limit: int) -> list[Row]:
    values = qs.annotate(
        preview=Substr("text", 1, NOTE_PREVIEW_CHARS), text_length=Length("text")
    ).values(*_ROW_FIELDS, "preview", "text_length")[:limit]
    return [
        Row(
            id=v["id"],
            seq=v["seq"],
            timestamp=v["timestamp"],
            event_type=v["event_type"],
            code=v["code"],
            name=v["name"],
            value=v["value"],
            unit=v["unit"],
            note_type=v["note_type"],
            encounter_id=v["encounter_id"],
            encounter_ordinal=v["encounter__ordinal"],
            encounter_type=v["encounter__encounter_type"] or "",
            preview=v["preview"] or "",
            text_length=v["text_length"] or 0,
        )
        for v in values
    ]


def _after(qs: QuerySet[Event], cursor: Cursor | None) -> QuerySet[Event]:
    """Dated events strictly after ``cursor`` in newest-first order."""
    qs = qs.filter(timestamp__isnull=False)
    if cursor is None:
        return qs
    # The redundant `timestamp <= t` gives the planner a plain range on the index; the OR only
    # filters the few rows sharing the cursor's timestamp.
    return qs.filter(timestamp__lte=cursor.timestamp).filter(
        Q(timestamp__lt=cursor.timestamp) | Q(seq__lt=cursor.seq)
    )


def _keyset_page(qs: QuerySet[Event], cursor: Cursor | None, limit: int) -> list[Row]:
    """Up to ``limit + 1`` rows after ``cursor``: dated newest first, then undated by seq."""
    rows: list[Row] = []
    if cursor is None or cursor.timestamp is not None:
        rows = _rows(_after(qs, cursor).order_by("-timestamp", "-seq"), limit + 1)
        if len(rows) > limit:
            return rows
        cursor = None
    undated = qs.filter(timestamp__isnull=True)
    if cursor is not None:
        undated = undated.filter(seq__lt=cursor.seq)
    return rows + _rows(undated.order_by("-seq"), limit + 1 - len(rows))


@dataclass
class Page:
    rows: list[Row]
    next_cursor: str  # "" at the end of the record

    @property
    def count(self) -> int:
        return len(self.rows)


def _page(rows: list[Row], limit: int) -> Page:
    if len(rows) > limit:
        rows = rows[:limit]
        return Page(rows, rows[-1].cursor.encode())
    return Page(rows, "")


# --- the timeline ------------------------------------------------------------------------------
def record_event_types(patient: Patient) -> list[str]:
    """Distinct event types in the record, by a loose index scan (one seek per type)."""
    return _distinct_values(patient, "event_type")


def _distinct_values(patient: Patient, column: str) -> list[str]:
    # A recursive CTE that jumps from one value to the next through an index on
    # (patient, column, …): cost grows with the number of distinct values, not of events.
    # Both SQLite and PostgreSQL plan each step as a single index seek.
    assert column in {"event_type", "name"}
    table = Event._meta.db_table
    sql = f"""
        WITH RECURSIVE v(x) AS (
            SELECT MIN({column}) FROM {table} WHERE patient_id = %s
            UNION ALL
            SELECT (SELECT MIN({column}) FROM {table} WHERE patient_id = %s AND {column} > v.x)
            FROM v WHERE v.x IS NOT NULL
        )
        SELECT x FROM v WHERE x IS NOT NULL
    """  # noqa: S608 - column is one of two fixed names, the table name is ours
    with connection.cursor() as cursor:
        cursor.execute(sql, [patient.pk, patient.pk])
        return [row[0] for row in cursor.fetchall()]


def record_timeline_page(
    patient: Patient,
    *,
    cursor: Cursor | None = None,
    event_type: str = "",
    limit: int = PAGE_SIZE,
) -> Page:
    qs = Event.objects.filter(patient=patient)
    if event_type:
        qs = qs.filter(event_type=event_type)
    return _page(_keyset_page(qs, cursor, limit), limit)


def record_event_get(patient: Patient, *, event_id: int) -> Event | None:
    """One event of this patient (a whole note), or None."""
    return (
        Event.objects.filter(patient=patient, pk=event_id)
        .select_related("encounter")
        .only(
            "id",
            "timestamp",
            "event_type",
            "name",
            "code",
            "value",
            "unit",
            "note_type",
            "text",
            "encounter__ordinal",
            "encounter__encounter_type",
        )
        .first()
    )


# --- search within the record -------------------------------------------------------------------
def _concept_filter(concept: Concept, *, with_note_type: bool = True) -> Q:
    """Notes that may hold ``concept``: any variant whose every stem the text contains (a
    case-insensitive LIKE; the highlighter then marks only true matches)."""
    any_variant = Q()
    for fragments in sql_fragments(concept):
        in_text = Q()
        in_type = Q()
        for fragment in fragments:
            in_text &= Q(text__icontains=fragment)
            in_type &= Q(note_type__icontains=fragment)
        any_variant |= in_text | in_type if with_note_type else in_text
    return any_variant


def record_search_page(
    patient: Patient, *, query: str, cursor: Cursor | None = None, limit: int = SEARCH_PAGE_SIZE
) -> tuple[list[Concept], Page]:
    """Events matching every concept of ``query``, newest first; and the concepts searched for.

    Each concept matches its abbreviations and synonyms too (review.vocabulary): "chest pain"
    finds "chest discomfort", "HbA1c" the events named "Hemoglobin A1c". Matches notes (type and
    text) and event names. Notes are few next to coded events, so they are filtered row by row
    through the (patient, event_type) index; coded events are found by name: the distinct names
    are read with a loose index scan, matched here, and each matching name's events walked
    through the (patient, name, timestamp, seq) index with a LIMIT. The per-source pages are
    merged, so a page costs a bounded number of index walks, whatever the record's size.
    """
    found = concepts(query[:QUERY_MAX_CHARS], limit=SEARCH_MAX_TERMS)
    if not found:
        return [], Page([], "")
    base = Event.objects.filter(patient=patient)
    note_filter = Q()
    for concept in found:
        note_filter &= _concept_filter(concept)
    sources = [base.filter(event_type=NOTE).filter(note_filter)]
    names = _matching_names(patient, found)[:SEARCH_MAX_NAMES]
    sources += [base.filter(name=name).exclude(event_type=NOTE) for name in names]
    merged = _merge([_keyset_page(qs, cursor, limit) for qs in sources], limit)
    page = _page(merged, limit)
    for row in page.rows:
        if not row.is_note:  # notes: below, around the match in their text
            row.html = highlight(row.name, found)
    if any(row.is_note for row in page.rows):
        _attach_note_snippets(page.rows, found)
    return found, page


def _matching_names(patient: Patient, found: list[Concept]) -> list[str]:
    """The record's event names in which every concept occurs, in the name itself or in a
    synonym the dataset's vocabulary gives it."""
    names = [name for name in _distinct_values(patient, "name") if name]
    synonyms = record_name_synonyms(patient, names)
    return [name for name in names if all(counts(found, _name_tokens(name, synonyms)))]


def _name_tokens(name: str, synonyms: dict[str, list[str]]) -> list[str]:
    # The name and its synonyms as one document; "|" (never a stem) keeps a phrase from
    # spanning two of them.
    tokens = stemmed(name)
    for synonym in synonyms.get(name, ()):
        tokens += ["|", *stemmed(synonym)]
    return tokens


def record_name_synonyms(patient: Patient, names: list[str]) -> dict[str, list[str]]:
    """The vocabulary synonyms (``EventNameSynonym``) of these event names of the record's
    dataset; empty, after one indexed probe, for a dataset that brought none."""
    dataset_rows = EventNameSynonym.objects.filter(dataset_id=patient.dataset_id)
    if not names or not dataset_rows.exists():
        return {}
    found: dict[str, list[str]] = {}
    for start in range(0, len(names), 500):
        for name, synonym in dataset_rows.filter(name__in=names[start : start + 500]).values_list(
            "name", "synonym"
        ):
            found.setdefault(name, []).append(synonym)
    return found


def _merge(pages: Iterable[list[Row]], limit: int) -> list[Row]:
    rows = {row.id: row for page in pages for row in page}.values()

    def key(row: Row) -> tuple[int, float, int]:
        # Newest first; undated after every dated row, by seq descending.
        if row.timestamp is None:
            return (1, 0.0, -row.seq)
        return (0, -row.timestamp.timestamp(), -row.seq)

    return sorted(rows, key=key)[: limit + 1]


def _attach_note_snippets(rows: list[Row], found: list[Concept]) -> None:
    # The preview column holds only the start of a note; show the window around the match.
    ids = [row.id for row in rows if row.is_note]
    texts = dict(
        Event.objects.filter(pk__in=ids)
        .annotate(head=Substr("text", 1, EXCERPT_NOTE_CHARS))
        .values_list("id", "head")
    )
    for row in rows:
        if row.is_note:
            text, _ = snippet(texts.get(row.id, ""), found)
            row.html = highlight(text, found)


# --- the excerpt ------------------------------------------------------------------------------
@dataclass
class ExcerptNote:
    row: Row
    html: SafeString
    score: float  # BM25 against the instruction; 0 when it does not match


@dataclass
class ExcerptFinding:
    """An event the instruction asks about (by name or by type), with its latest values."""

    name: str
    html: SafeString
    score: float
    occurrences: list[Row] = field(default_factory=list)

    @property
    def latest(self) -> datetime | None:
        return self.occurrences[0].timestamp if self.occurrences else None


@dataclass
class Excerpt:
    """What a clinician needs for one instruction, in blocks, each newest first.

    ``latest_notes``: the record's most recent notes, always. ``findings``: the latest values
    of the events the instruction names (a measurement, a medication, or every recent
    medication when it asks about medications). ``older_notes``: the notes that match the
    instruction best among the rest, chosen by relevance. ``recent``: the latest coded events.
    ``concepts`` are the instruction's words as written, with what each also matched.
    """

    concepts: list[dict[str, Any]]
    latest_notes: list[ExcerptNote]
    findings: list[ExcerptFinding]
    older_notes: list[ExcerptNote]
    recent: list[Row]
    event_count: int
    note_count: int
    first_event_at: datetime | None = None
    last_event_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        def notes(items: list[ExcerptNote]) -> list[dict[str, Any]]:
            return [{"row": n.row.to_json(), "html": str(n.html), "score": n.score} for n in items]

        return {
            "concepts": self.concepts,
            "latest_notes": notes(self.latest_notes),
            "older_notes": notes(self.older_notes),
            "findings": [
                {
                    "name": f.name,
                    "html": str(f.html),
                    "score": f.score,
                    "occurrences": [o.to_json() for o in f.occurrences],
                }
                for f in self.findings
            ],
            "recent": [r.to_json() for r in self.recent],
            "event_count": self.event_count,
            "note_count": self.note_count,
            "first_event_at": _iso(self.first_event_at),
            "last_event_at": _iso(self.last_event_at),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Excerpt":
        # The stored HTML was escaped and highlighted by record_excerpt() before it was stored.
        def notes(items: list[dict[str, Any]]) -> list[ExcerptNote]:
            return [
                ExcerptNote(
                    row=Row.from_json(n["row"]),
                    html=mark_safe(n["html"]),  # noqa: S308
                    score=n["score"],
                )
                for n in items
            ]

        return cls(
            concepts=list(data["concepts"]),
            latest_notes=notes(data["latest_notes"]),
            older_notes=notes(data["older_notes"]),
            findings=[
                ExcerptFinding(
                    name=f["name"],
                    html=mark_safe(f["html"]),  # noqa: S308
                    score=f["score"],
                    occurrences=[Row.from_json(o) for o in f["occurrences"]],
                )
                for f in data["findings"]
            ],
            recent=[Row.from_json(r) for r in data["recent"]],
            event_count=data["event_count"],
            note_count=data["note_count"],
            first_event_at=_from_iso(data.get("first_event_at")),
            last_event_at=_from_iso(data.get("last_event_at")),
        )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _from_iso(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


# Stems of words that ask for the recent events of a type ("List the current medications"),
# with the type's names in the three import formats (XML and OMOP tables, MEDS).
TYPE_WORDS = {
    "medic": ("drug_exposure", "drug"),
    "medicin": ("drug_exposure", "drug"),
    "drug": ("drug_exposure", "drug"),
    "prescript": ("drug_exposure", "drug"),
    "diagnos": ("condition_occurrence", "condition"),
    "problem": ("condition_occurrence", "condition"),
    "condit": ("condition_occurrence", "condition"),
    "procedur": ("procedure_occurrence", "procedure"),
    "surgeri": ("procedure_occurrence", "procedure"),
}


def record_excerpt(instruction: Instruction, patient: Patient) -> Excerpt:
    """The parts of the record a clinician needs for the instruction, in blocks.

    Always: the most recent notes, and the latest values of the events the instruction names
    (matched by name, abbreviation or synonym: review.vocabulary) or asks for by type. Below:
    the older notes that match best (BM25 over the recent notes and the notes the database
    finds mentioning a concept, so an old note that holds the answer is still found), and the
    latest coded events. Every block is newest first; matches are highlighted with <mark>.
    """
    # The instruction's clinical terms: its framing words ("high", "risk") mark nothing.
    found = clinical(concepts(instruction.question))
    base = Event.objects.filter(patient=patient)
    recent = _rows(
        base.exclude(event_type=NOTE).order_by("-timestamp", "-seq"), EXCERPT_RECENT_EVENTS
    )
    notes_qs = (
        base.filter(event_type=NOTE)
        .annotate(head=Substr("text", 1, EXCERPT_NOTE_CHARS))
        .order_by("-timestamp", "-seq")
    )
    fields = ("id", "note_type", "name", "head")
    latest_values = list(notes_qs.values(*fields)[: EXCERPT_NOTE_CANDIDATES + EXCERPT_LATEST_NOTES])
    candidates = latest_values[EXCERPT_LATEST_NOTES:]
    if found and patient.note_count > len(latest_values):
        # Older than the recent window: the latest notes that mention each concept at all (per
        # concept, so a common word of the question cannot crowd out a rare one).
        seen = {v["id"] for v in latest_values}
        each = max(20, EXCERPT_OLD_NOTE_CANDIDATES // len(found))
        for concept in found:
            mentions = notes_qs.filter(_concept_filter(concept, with_note_type=False))
            for value in mentions.exclude(pk__in=seen).values(*fields)[:each]:
                seen.add(value["id"])
                candidates.append(value)
    ranked = rank_concepts(found, [stemmed(f"{v['note_type']} {v['head']}") for v in candidates])
    chosen = [(candidates[s.index], s.score) for s in ranked[:EXCERPT_NOTES_SHOWN]]
    latest = [(v, 0.0) for v in latest_values[:EXCERPT_LATEST_NOTES]]
    rows_by_id = {
        row.id: row for row in _rows(base.filter(pk__in=[v["id"] for v, _ in latest + chosen]), 20)
    }

    def note(value: dict[str, Any], score: float) -> ExcerptNote:
        text, _ = snippet(value["head"], found, width=600)
        return ExcerptNote(row=rows_by_id[value["id"]], html=highlight(text, found), score=score)

    older_notes = sorted((note(v, s) for v, s in chosen), key=_newest_first)
    return Excerpt(
        concepts=[c.to_json() for c in found],
        latest_notes=[note(v, s) for v, s in latest],
        findings=_findings(patient, found),
        older_notes=older_notes,
        recent=recent,
        event_count=patient.event_count,
        note_count=patient.note_count,
        first_event_at=patient.first_event_at,
        last_event_at=patient.last_event_at,
    )


def _newest_first(item: ExcerptNote) -> tuple[int, float, int]:
    row = item.row
    if row.timestamp is None:
        return (1, 0.0, -row.seq)
    return (0, -row.timestamp.timestamp(), -row.seq)


def _findings(patient: Patient, found: list[Concept]) -> list[ExcerptFinding]:
    """The latest values of the events the instruction names, newest first; and, when it asks
    for a type ("medications"), of the most recent events of that type."""
    if not found:
        return []
    base = Event.objects.filter(patient=patient)
    names = [n for n in _distinct_values(patient, "name") if n]
    synonyms = record_name_synonyms(patient, names)
    documents = [_name_tokens(name, synonyms) for name in names]
    # Words of the instruction that the record's names hold as one phrase ("blood pressure")
    # count as that phrase: a name with one of them alone ("Chloride in Blood") is no answer.
    found = phrases(found, documents)
    scored: dict[str, float] = {}
    for s in rank_concepts(found, documents)[:EXCERPT_NAMES_SHOWN]:
        scored[names[s.index]] = s.score
    types = {TYPE_WORDS[s] for c in found for v in c.variants for s in v if s in TYPE_WORDS}
    for event_types in sorted(types):
        latest = base.filter(event_type__in=event_types).order_by("-timestamp", "-seq")
        for name in latest.values_list("name", flat=True)[:EXCERPT_TYPE_SCAN]:
            if name and name not in scored and len(scored) < EXCERPT_FINDINGS_MAX:
                scored[name] = 0.0
    findings = []
    for name, score in scored.items():
        occurrences = _rows(
            base.filter(name=name).exclude(event_type=NOTE).order_by("-timestamp", "-seq"),
            EXCERPT_OCCURRENCES,
        )
        if occurrences:
            findings.append(
                ExcerptFinding(
                    name=name, html=highlight(name, found), score=score, occurrences=occurrences
                )
            )
    return sorted(findings, key=lambda f: _newest_first(ExcerptNote(f.occurrences[0], f.html, 0)))


# Bump when record_excerpt() or the Excerpt it returns changes: every stored excerpt then no
# longer matches its fingerprint and is recomputed on its next view.
EXCERPT_VERSION = 3


def record_excerpt_fingerprint(instruction: Instruction, patient: Patient) -> str:
    """What an excerpt was computed from: the code's version, the question and the record."""
    last = patient.last_event_at.isoformat() if patient.last_event_at else ""
    source = "\x1f".join(
        [
            str(EXCERPT_VERSION),
            str(patient.pk),
            str(patient.event_count),
            str(patient.note_count),
            last,
            instruction.question,
        ]
    )
    return hashlib.sha256(source.encode()).hexdigest()


EXCERPT_TEMPLATE = "review/clinician/_excerpt.html"
EXCERPT_NOTE_TEMPLATE = "review/clinician/_excerpt_note.html"


@functools.cache
def excerpt_html_version() -> str:
    """What the stored HTML was rendered with: the excerpt templates' sources and the time zone
    its dates are shown in. A deployment changing either renders every excerpt again on its
    next view (the ranking itself is kept)."""
    sources = [
        get_template(name).template.source  # type: ignore[attr-defined]
        for name in (EXCERPT_TEMPLATE, EXCERPT_NOTE_TEMPLATE)
    ]
    return hashlib.sha256("\x1f".join([settings.TIME_ZONE, *sources]).encode()).hexdigest()


def record_excerpt_render(instruction: Instruction, excerpt: Excerpt) -> str:
    """The excerpt as the review page shows it (HTML; the same for every clinician)."""
    return render_to_string(EXCERPT_TEMPLATE, {"excerpt": excerpt, "instruction": instruction})


_STORED_EXCERPT: PreparedQuery[tuple[str, str, str]] = PreparedQuery(
    lambda p: RecordExcerpt.objects.filter(
        instruction_id=p.instruction_id, patient_id=p.patient_id
    ).values_list("fingerprint", "html_version", "html"),
    params=("instruction_id", "patient_id"),
)


@dataclass(frozen=True)
class StoredExcerpt:
    """What is stored of an instruction's excerpt, beside what is current now."""

    fingerprint: str  # of the record and question as they are now
    html: str | None  # the stored HTML, when it is current and rendered by today's templates
    ranking: "Excerpt | None"  # the stored ranking, when current but rendered otherwise


def record_excerpt_stored(instruction: Instruction, patient: Patient) -> StoredExcerpt:
    """The stored excerpt of ``instruction`` as far as it is still current: one row read.

    A row whose fingerprint no longer matches (question or record changed) counts as none; a
    current ranking rendered by other templates (or another time zone) gives its ranking for
    the caller to render again (``review.services.excerpts.record_excerpt_html``)."""
    fingerprint = record_excerpt_fingerprint(instruction, patient)
    row = _STORED_EXCERPT.first(instruction_id=instruction.pk, patient_id=patient.pk)
    if row is None or row[0] != fingerprint:
        return StoredExcerpt(fingerprint=fingerprint, html=None, ranking=None)
    if row[1] == excerpt_html_version():
        return StoredExcerpt(fingerprint=fingerprint, html=row[2], ranking=None)
    content = RecordExcerpt.objects.values_list("content", flat=True).get(pk=instruction.pk)
    return StoredExcerpt(fingerprint=fingerprint, html=None, ranking=Excerpt.from_json(content))


def record_excerpt_stored_ranking(instruction: Instruction, patient: Patient) -> "Excerpt | None":
    """The stored ranking of ``instruction``'s excerpt when it is still current, else None."""
    fingerprint = record_excerpt_fingerprint(instruction, patient)
    stored = (
        RecordExcerpt.objects.filter(
            instruction=instruction, patient=patient, fingerprint=fingerprint
        )
        .values_list("content", flat=True)
        .first()
    )
    return None if stored is None else Excerpt.from_json(stored)
