"""Streaming readers for both EHR XML formats.

Memory stays flat whatever the file size: lxml's iterparse is fed a byte-counting reader, each
element is cleared as soon as it has been turned into rows, and processed siblings are dropped.
DTDs are refused before parsing starts (no entity declarations, so no XML bombs), and entity
resolution and network access are off in the parser as a second line of defence.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import BinaryIO

from lxml import etree

from review.linear import DIGIT, SPACE, BytesPattern, Pattern

from .demographics import normalise_sex
from .errors import Problem
from .timestamps import BadTimestamp, parse_date, parse_timestamp

RECORD_EVENT_TAGS = {
    "condition_occurrence",
    "visit_detail",
    "measurement",
    "procedure_occurrence",
    "observation",
    "drug_exposure",
    "device_exposure",
    "specimen",
    "death",
    "note",
    "visit_occurrence",
}
VALUE_TYPES = {"measurement", "observation"}
# Record text is hostile input: these run in RE2 (review.linear), linear in the line (with
# ``re`` a line of spaces took seconds, quadratic in its length). ``SPACE``/``DIGIT`` are
# Python's Unicode ``\s``/``\d``; ``\n?$`` is ``re``'s ``$``, which also matches before a final
# line break.
_NOT_SPACE = SPACE.replace("[", "[^", 1)
_NOT_SPACE_DIGIT = _NOT_SPACE[:-1] + r"\p{Nd}]"
_CODE_LINE = Pattern(rf"(?s)^{SPACE}*\[([^\]]*)\]{SPACE}*(.*?){SPACE}*$")
_VALUE_TAIL = Pattern(
    rf"^(.*?){SPACE}+(-?{DIGIT}+(?:\.{DIGIT}+)?)"
    rf"(?:{SPACE}+({_NOT_SPACE_DIGIT}{_NOT_SPACE}*(?:{SPACE}{_NOT_SPACE_DIGIT}{_NOT_SPACE}*)?))?\n?$"
)
# A person's fields ("Birth: 1970-01-02 Gender: F"), read from the text collapsed to single
# spaces: a field runs from its label and colon to the next label and colon that follows a
# space, or to the end. RE2 finds every label once; the rest is a walk over those matches (the
# old ``re`` pattern needed a lookahead for the end of a value).
_PERSON_LABEL = BytesPattern(rb"(?:Birth|Race|Gender|Ethnicity|Age in Days|Age in Years) ?:")
PROLOG_SCAN_BYTES = 256 * 1024


class XMLImportError(Exception):
    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(str(problem))


@dataclass
class EncounterData:
    ordinal: int
    encounter_type: str
    start: datetime | None
    end: datetime | None
    care_sites: list[dict[str, str]] = field(default_factory=list)
    providers: list[dict[str, str]] = field(default_factory=list)
    line: int | None = None


@dataclass
class EventData:
    timestamp: datetime | None
    event_type: str
    code: str
    name: str
    value: str = ""
    value_numeric: float | None = None
    unit: str = ""
    text: str = ""
    note_type: str = ""
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass
class Demographics:
    birth_date: date | None = None
    gender: str = ""
    race: str = ""
    ethnicity: str = ""
    extra: dict[str, str] = field(default_factory=dict)


class CountingReader:
    """A file wrapper that counts bytes read, so a progress bar can follow the parser."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.count += len(data)
        return data


def sniff_format(path: Path) -> str:
    """'record' or 'eventstream', from the root element; refuses DTDs (XML bomb protection)."""
    with path.open("rb") as fh:
        head = fh.read(PROLOG_SCAN_BYTES)
    # RE2 (review.linear), as every matcher over imported text.
    match = _ROOT_TAG.search(_strip_prolog_noise(head))
    upper_prolog = head[: match[0]] if match else head
    if b"<!DOCTYPE" in upper_prolog.upper() or b"<!ENTITY" in head.upper():
        raise XMLImportError(
            Problem(
                path.name,
                _line_of(head, head.upper().find(b"<!")),
                None,
                "DTD or entity declarations are not allowed (refused as a possible XML bomb)",
            )
        )
    if match is None and len(head) == PROLOG_SCAN_BYTES:
        # Whatever follows a prolog this long (a DTD, say) is out of this check's sight.
        raise XMLImportError(
            Problem(
                path.name,
                1,
                None,
                f"no root element in the first {PROLOG_SCAN_BYTES // 1024} KiB: a leading "
                "comment or prolog that long is not accepted",
            )
        )
    if match is None:
        raise XMLImportError(Problem(path.name, 1, None, "no XML root element found"))
    root = head[match[0] + 1 : match[1]].decode("ascii", "replace")
    if root not in ("record", "eventstream"):
        raise XMLImportError(
            Problem(
                path.name,
                _line_of(head, match[0]),
                None,
                f"unknown root element <{root}>: expected <record> or <eventstream>",
            )
        )
    return root


def _strip_prolog_noise(head: bytes) -> bytes:
    # Blank out the XML declaration, comments and processing instructions so the root search
    # does not mistake them for elements; offsets are preserved.
    # RE2 (``re`` took seconds on a window of unclosed "<!--", quadratic in the window).
    head = _blank(_DECLARATION, head)
    head = _blank(_COMMENT, head)
    # A comment still open at the end of the window hides whatever follows it (a DOCTYPE, the
    # real root): nothing inside it may be taken for the root element.
    return _blank(_OPEN_COMMENT, head)


_ROOT_TAG = BytesPattern(rb"<[A-Za-z_][A-Za-z0-9_.\-]*")
_DECLARATION = BytesPattern(rb"(?s)<\?.*?\?>")
_COMMENT = BytesPattern(rb"(?s)<!--.*?-->")
_OPEN_COMMENT = BytesPattern(rb"(?s)<!--.*\z")


def _blank(pattern: BytesPattern, data: bytes) -> bytes:
    out = bytearray(data)
    for start, end in pattern.spans(data):
        out[start:end] = b" " * (end - start)
    return bytes(out)


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, max(offset, 0)) + 1


def person_id_from_filename(path: Path) -> str:
    stem = path.stem
    for prefix in ("EHR_", "ehr_"):
        if stem.startswith(prefix):
            return stem[len(prefix) :]
    return stem


def _clean(value: str | None) -> str:
    if value is None:
        return ""
    value = value.strip()
    return "" if value.upper() == "NULL" else value


def _ts(raw: str | None, file: str, line: int | None, attr: str) -> datetime | None:
    if raw is None or not raw.strip() or raw.strip().upper() == "NULL":
        return None
    try:
        return parse_timestamp(raw)
    except BadTimestamp as exc:
        raise XMLImportError(Problem(file, line, attr, str(exc))) from None


def split_code_line(text: str, event_type: str) -> tuple[str, str, str, float | None, str]:
    """``[LOINC/8867-4] Heart rate 104 bpm`` -> code, name, value, numeric value, unit."""
    match = _CODE_LINE.match(text or "")
    if not match:
        return "", (text or "").strip(), "", None, ""
    code, description = match.group(1).strip(), match.group(2)
    if event_type in VALUE_TYPES:
        tail = _VALUE_TAIL.match(description)
        if tail:
            return code, tail.group(1), tail.group(2), float(tail.group(2)), tail.group(3) or ""
    return code, description, "", None, ""


def person_fields(text: str) -> dict[str, str]:
    """The labelled fields of a person's text, by label (the last of a label wins)."""
    # On the UTF-8 bytes (lone surrogates kept): the labels, the colon and the space are ASCII,
    # which no byte of a longer character is, and RE2's own calls are cheap per match.
    data = " ".join((text or "").split()).encode("utf-8", "surrogatepass")
    labels = list(_PERSON_LABEL.spans(data))
    fields: dict[str, str] = {}
    i = 0
    while i < len(labels):
        start, colon_end = labels[i]
        label = data[start : colon_end - 1].rstrip(b" ").decode("ascii")
        # As ``\s*`` before a lazy value did: the value starts after one space, if any.
        value_start = colon_end + (data[colon_end : colon_end + 1] == b" ")
        # It ends before the next label that follows a space within or after it; that label
        # starts the next field. Labels glued to a word are part of the value.
        i += 1
        while i < len(labels) and not (
            labels[i][0] - 1 >= value_start and data[labels[i][0] - 1] == 0x20
        ):
            i += 1
        value_end = labels[i][0] - 1 if i < len(labels) else len(data)
        fields[label] = data[value_start:value_end].decode("utf-8", "surrogatepass").strip()
    return fields


def parse_person_text(text: str) -> Demographics:
    fields = person_fields(text)
    return Demographics(
        birth_date=parse_date(fields.pop("Birth", "")),
        gender=normalise_sex(fields.pop("Gender", "")),
        race=fields.pop("Race", ""),
        ethnicity=fields.pop("Ethnicity", ""),
        extra=fields,
    )


Item = tuple[str, object]


def _iterparse(reader: CountingReader) -> "etree.iterparse":
    return etree.iterparse(
        reader,
        events=("start", "end"),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        remove_comments=True,
        remove_pis=True,
        huge_tree=False,
    )


def _checked(events: "etree.iterparse", file: str) -> Iterator[tuple[str, "etree._Element"]]:
    """The parser's events, refusing what the byte pre-check might miss.

    A DTD is refused when the root element starts, whatever came before it (a comment longer
    than the pre-check's window cannot hide one), and an entity reference in text is an import
    error: the parser does not expand entities, so the text after one would otherwise be lost.
    """
    first = True
    for action, elem in events:
        if first:
            first = False
            if elem.getroottree().docinfo.doctype:
                raise XMLImportError(
                    Problem(
                        file,
                        elem.sourceline,
                        None,
                        "DTD or entity declarations are not allowed "
                        "(refused as a possible XML bomb)",
                    )
                )
        if action == "end":
            entity = next(elem.iterchildren(etree.Entity), None)
            if entity is not None:
                raise XMLImportError(
                    Problem(
                        file,
                        entity.sourceline or elem.sourceline,
                        None,
                        f"entity reference {entity.text} in <{elem.tag}> is not allowed: "
                        "write the character itself",
                    )
                )
        yield action, elem


def _drop(elem: "etree._Element") -> None:
    elem.clear(keep_tail=False)
    parent = elem.getparent()
    if parent is not None:
        while elem.getprevious() is not None:
            del parent[0]


def iter_record(reader: CountingReader, file: str) -> Iterator[Item]:
    """Paper-era ``<record>``: visits → days → OMOP-named elements holding ``<code>`` lines."""
    ordinal = 0
    encounter: EncounterData | None = None
    try:
        for action, elem in _checked(_iterparse(reader), file):
            tag = elem.tag if isinstance(elem.tag, str) else ""
            if action == "start":
                if tag == "visit":
                    ordinal += 1
                    line = elem.sourceline
                    encounter = EncounterData(
                        ordinal=ordinal,
                        encounter_type=_clean(elem.get("type")),
                        start=_ts(elem.get("start"), file, line, "start"),
                        end=_ts(elem.get("end"), file, line, "end"),
                        line=line,
                    )
                    yield "encounter", encounter
                continue
            if tag == "person":
                yield "demographics", parse_person_text(elem.text or "")
                _drop(elem)
            elif tag in RECORD_EVENT_TAGS:
                yield from _record_events(elem, tag, file)
                _drop(elem)
            elif tag == "visit":
                yield "encounter_end", encounter
                _drop(elem)
            elif tag == "day":
                _drop(elem)
    except etree.XMLSyntaxError as exc:
        raise XMLImportError(Problem(file, exc.lineno, None, f"broken XML: {exc.msg}")) from None


def _record_events(elem: "etree._Element", tag: str, file: str) -> Iterator[Item]:
    line = elem.sourceline
    timestamp = _ts(elem.get("start"), file, line, "start")
    if tag == "note":
        yield (
            "event",
            EventData(
                timestamp=timestamp,
                event_type="note",
                code="",
                name=_clean(elem.get("type")) or "note",
                text=(elem.text or "").strip(),
                note_type=_clean(elem.get("type")),
            ),
        )
        return
    codes = elem.findall("code")
    if not codes:
        text = (elem.text or "").strip()
        if text:
            code, name, value, numeric, unit = split_code_line(text, tag)
            yield "event", EventData(timestamp, tag, code, name, value, numeric, unit)
        return
    for code_elem in codes:
        code, name, value, numeric, unit = split_code_line(code_elem.text or "", tag)
        yield "event", EventData(timestamp, tag, code, name, value, numeric, unit)


_EVENT_KNOWN_ATTRS = {"type", "code", "name", "value", "unit", "timestamp"}


def iter_eventstream(reader: CountingReader, file: str) -> Iterator[Item]:
    """Release ``<eventstream>``: encounters → person, caresites, providers, events/entry/event."""
    ordinal = 0
    encounter: EncounterData | None = None
    entry_ts: datetime | None = None
    try:
        for action, elem in _checked(_iterparse(reader), file):
            tag = elem.tag if isinstance(elem.tag, str) else ""
            if action == "start":
                if tag == "encounter":
                    ordinal += 1
                    line = elem.sourceline
                    encounter = EncounterData(
                        ordinal=ordinal,
                        encounter_type=_clean(elem.get("type")),
                        start=_ts(elem.get("start_timestamp"), file, line, "start_timestamp"),
                        end=_ts(elem.get("end_timestamp"), file, line, "end_timestamp"),
                        line=line,
                    )
                    yield "encounter", encounter
                elif tag == "entry":
                    entry_ts = _ts(elem.get("timestamp"), file, elem.sourceline, "timestamp")
                elif tag == "eventstream":
                    yield "person_id", _clean(elem.get("person_id"))
                continue
            if tag == "event":
                attributes: dict[str, str] = {}
                for key, raw_value in elem.attrib.items():
                    if key not in _EVENT_KNOWN_ATTRS:
                        value = _clean(raw_value)
                        if value:
                            attributes[key] = value
                event_type = _clean(elem.get("type")) or "event"
                value = _clean(elem.get("value"))
                try:
                    numeric = float(value) if value else None
                except ValueError:
                    numeric = None
                own_ts = elem.get("timestamp")
                timestamp = _ts(own_ts, file, elem.sourceline, "timestamp") if own_ts else entry_ts
                name = _clean(elem.get("name"))
                yield (
                    "event",
                    EventData(
                        timestamp=timestamp,
                        event_type=event_type,
                        code=_clean(elem.get("code")),
                        name=name,
                        value=value,
                        value_numeric=numeric,
                        unit=_clean(elem.get("unit")),
                        text=(elem.text or "").strip(),
                        note_type=name if event_type == "note" else "",
                        attributes=attributes,
                    ),
                )
                _drop(elem)
            elif tag == "entry":
                _drop(elem)
            elif tag == "person":
                yield "demographics", _eventstream_person(elem)
                _drop(elem)
            elif tag == "caresite" and encounter is not None:
                encounter.care_sites.append({k: _clean(v) for k, v in elem.attrib.items()})
            elif tag == "provider" and encounter is not None:
                encounter.providers.append({k: _clean(v) for k, v in elem.attrib.items()})
            elif tag == "encounter":
                yield "encounter_end", encounter
                _drop(elem)
    except etree.XMLSyntaxError as exc:
        raise XMLImportError(Problem(file, exc.lineno, None, f"broken XML: {exc.msg}")) from None


def _eventstream_person(elem: "etree._Element") -> Demographics:
    def text(path: str) -> str:
        found = elem.find(path)
        return _clean(found.text) if found is not None else ""

    extra = {}
    for key, path in (("age_days", "age/days"), ("age_years", "age/years"), ("payer", "payerplan")):
        if text(path):
            extra[key] = text(path)
    return Demographics(
        birth_date=parse_date(text("birthdate")),
        gender=normalise_sex(text("demographics/gender")),
        race=text("demographics/race"),
        ethnicity=text("demographics/ethnicity"),
        extra=extra,
    )
