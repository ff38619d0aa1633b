"""Loading a MedAlign release (any subset of its files) into one dataset, atomically.

Order: taxonomy → instructions → reference answers → model responses → EHR XML, then
instructions are linked to their patients. Everything happens in one transaction: a problem
anywhere rolls back everything, and the database is left exactly as it was.

Re-importing is idempotent: rows are keyed (instruction_id; instruction + annotator; instruction +
model; person_id). Without ``replace`` an existing row keeps its values (blank fields are filled
in, since the release spreads one instruction's fields over several files); with ``replace``
differing values are overwritten, records are reloaded, and scores of changed responses dropped.
"""

import gc
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, models, transaction
from psycopg.types.string import BytesBinaryDumper

from review.blinding import names_a_model
from review.models import (
    Dataset,
    Encounter,
    Event,
    Instruction,
    ModelResponse,
    Patient,
    ReferenceResponse,
    Review,
    StudyResponse,
    TaxonomyEntry,
)
from review.services.excerpts import record_excerpts_invalidate

from .bulk import bulk_load_begin, estimate_events
from .ehr_xml import (
    CountingReader,
    Demographics,
    EncounterData,
    EventData,
    XMLImportError,
    iter_eventstream,
    iter_record,
    person_id_from_filename,
    sniff_format,
)
from .errors import ImportFailed, Problem, ProblemCollector
from .tables import (
    TABLE_SUFFIXES,
    Row,
    TableError,
    iter_rows,
    parse_bool,
    parse_optional_float,
    parse_optional_int,
    read_header,
)
from .timestamps import aware

EVENT_FLUSH_ROWS = 5000
RESPONSE_TEXT_COLUMNS = ("model_response", "response", "model_output", "output", "generation")

REQUIRED = {
    "taxonomy": ("category", "subcategory"),
    "instructions": ("instruction_id", "question"),
    "references": ("instruction_id", "clinician_response"),
    "responses": ("instruction_id", "model_name"),
}
KIND_ORDER = ("taxonomy", "instructions", "references", "responses")

ProgressFn = Callable[[int], None]


@dataclass
class ImportSummary:
    dataset: str
    files: dict[str, str] = field(default_factory=dict)  # file -> kind
    counts: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)  # reason -> rows
    # MEDS and OMOP: per table or code family, rows "read", rows that "fell back" (a concept
    # missing from the vocabulary, shown by its source value) and rows "ignored", so a data
    # manager sees at once whether the cohort came through whole.
    sources: dict[str, Counter] = field(default_factory=dict)
    warnings: Counter = field(default_factory=Counter)  # what was read but looks wrong -> rows

    def tally(self, source: str, outcome: str, n: int = 1) -> None:
        """Count ``n`` rows of ``source`` (a table or code family) as ``outcome``."""
        self.sources.setdefault(source, Counter())[outcome] += n

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "files": self.files,
            "counts": dict(self.counts),
            "skipped": dict(self.skipped),
            "sources": {name: dict(counts) for name, counts in self.sources.items()},
            "warnings": dict(self.warnings),
        }


def classify_table(header: list[str]) -> str | None:
    columns = set(header)
    if {"category", "subcategory"} <= columns:
        return "taxonomy"
    if "model_name" in columns:
        return "responses"
    if "instruction_id" in columns and ({"annotator_num", "clinician_response"} & columns):
        return "references"
    if {"instruction_id", "question"} <= columns:
        return "instructions"
    return None


def discover(
    path: Path, skip: frozenset[Path] = frozenset()
) -> tuple[dict[str, list[Path]], list[Path], list[str]]:
    """Tables by kind, XML files, and files ignored (with why). ``skip``: MEDS/OMOP files."""
    if not path.exists():
        raise ImportFailed([Problem(str(path), None, None, "no such file or folder")])
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    files = [f for f in files if f not in skip]
    tables: dict[str, list[Path]] = {kind: [] for kind in KIND_ORDER}
    xml: list[Path] = []
    ignored: list[str] = []
    for file in files:
        if file.name.startswith("."):
            continue
        suffix = file.suffix.lower()
        if suffix == ".xml":
            xml.append(file)
        elif suffix in TABLE_SUFFIXES:
            kind = classify_table(read_header(file))
            if kind is None:
                if not path.is_dir():
                    raise ImportFailed(
                        [
                            Problem(
                                file.name,
                                1,
                                None,
                                "unrecognised table: its header matches "
                                "none of the release files (see the README)",
                            )
                        ]
                    )
                ignored.append(f"{file.name}: unrecognised table header")
            else:
                tables[kind].append(file)
        elif not path.is_dir():
            raise ImportFailed([Problem(file.name, None, None, "not a .tsv, .csv or .xml file")])
        else:
            ignored.append(f"{file.name}: not a release file")
    return tables, xml, ignored


class _Importer:
    def __init__(self, dataset: Dataset, replace: bool, progress: ProgressFn | None) -> None:
        self.dataset = dataset
        self.replace = replace
        self.progress = progress or (lambda n: None)
        self.summary = ImportSummary(dataset=dataset.name)
        self.problems = ProblemCollector()
        self.instructions: dict[str, Instruction] = {
            i.instruction_id: i for i in Instruction.objects.filter(dataset=dataset)
        }
        self.taxonomy: dict[str, str] = dict(
            TaxonomyEntry.objects.filter(dataset=dataset).values_list("subcategory", "category")
        )
        self.changed_responses: list[int] = []
        # Instructions whose question or reference answers changed: their scores are stale.
        self.changed_instructions: set[int] = set()
        # Compared at the end, not per file: the release repeats a question in several files.
        self.original_questions = {i.pk: i.question for i in self.instructions.values()}

    # --- tables -------------------------------------------------------------------------------
    def load_table(self, kind: str, path: Path) -> None:
        header = read_header(path)
        missing = [c for c in REQUIRED[kind] if c not in header]
        if kind == "responses" and not any(c in header for c in RESPONSE_TEXT_COLUMNS):
            missing.append(" or ".join(RESPONSE_TEXT_COLUMNS[:2]))
        if missing:
            for column in missing:
                self.problems.add(path.name, 1, column, "required column is missing")
            return
        self.summary.files[path.name] = kind
        try:
            rows = list(iter_rows(path))
        except TableError as exc:
            self.problems.problems.append(exc.problem)
            return
        getattr(self, f"_load_{kind}")(path.name, rows)
        self.progress(path.stat().st_size)

    def _require(self, file: str, row: Row, column: str) -> str | None:
        value = row.get(column).strip()
        if not value:
            self.problems.add(file, row.line, column, "required value is empty")
            return None
        return value

    def _load_taxonomy(self, file: str, rows: list[Row]) -> None:
        existing = {t.subcategory: t for t in TaxonomyEntry.objects.filter(dataset=self.dataset)}
        seen: set[str] = set()
        new = []
        for row in rows:
            category = self._require(file, row, "category")
            sub = self._require(file, row, "subcategory")
            if category is None or sub is None:
                continue
            key = sub.lower()
            if key in seen:
                self.summary.skipped[f"duplicate taxonomy row in {file}"] += 1
                continue
            seen.add(key)
            self.taxonomy[key] = category.lower()
            if key in existing:
                entry = existing[key]
                if self.replace and (entry.category, entry.description) != (
                    category.lower(),
                    row.get("description"),
                ):
                    entry.category, entry.description = category.lower(), row.get("description")
                    entry.save(update_fields=["category", "description"])
                else:
                    self.summary.skipped["taxonomy row already imported"] += 1
                continue
            existing[key] = TaxonomyEntry(
                dataset=self.dataset,
                category=category.lower(),
                subcategory=key,
                description=row.get("description"),
            )
            new.append(existing[key])
        TaxonomyEntry.objects.bulk_create(new)
        self.summary.counts["taxonomy entries"] += len(new)

    def _instruction_fields(self, file: str, row: Row) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for target, columns in (
            ("question", ("question", "instruction")),
            ("person_id", ("person_id",)),
            ("filename", ("filename",)),
            ("source", ("source",)),
            ("specialty", ("submitter_specialty", "specialty")),
            ("evidence", ("evidence",)),
        ):
            value = row.get(*columns).strip()
            if value and value.upper() != "NULL":
                fields[target] = value
        sub = row.get("human_assigned_subcategory_1", "subcategory").strip().lower()
        if sub:
            fields["subcategory"] = sub
        category = row.get("category").strip().lower()
        if category:
            fields["category"] = category
        for target in ("is_applicable", "is_sufficient", "is_used_eval"):
            if target in row.values:
                try:
                    value = parse_bool(row.values[target])
                except ValueError as exc:
                    self.problems.add(file, row.line, target, str(exc))
                    continue
                if value is not None:
                    fields[target] = value
        return fields

    def _upsert_instruction(self, file: str, row: Row, instruction_id: str) -> Instruction | None:
        fields = self._instruction_fields(file, row)
        instruction = self.instructions.get(instruction_id)
        if instruction is None:
            if not fields.get("question"):
                self.problems.add(file, row.line, "question", "required value is empty")
                return None
            instruction = Instruction(dataset=self.dataset, instruction_id=instruction_id)
            for key, value in fields.items():
                setattr(instruction, key, value)
            self._categorise(instruction)
            instruction.save()
            self.instructions[instruction_id] = instruction
            self.summary.counts["instructions"] += 1
            return instruction
        changed = []
        for key, value in fields.items():
            current = getattr(instruction, key)
            if current in ("", None) or (self.replace and current != value):
                setattr(instruction, key, value)
                changed.append(key)
        if self._categorise(instruction):
            changed.append("category")
        if changed:
            instruction.save(update_fields=sorted(set(changed)))
        return instruction

    def _categorise(self, instruction: Instruction) -> bool:
        if instruction.category or not instruction.subcategory:
            return False
        category = self.taxonomy.get(instruction.subcategory)
        if category:
            instruction.category = category
            return True
        return False

    def _load_instructions(self, file: str, rows: list[Row]) -> None:
        seen: dict[str, int] = {}
        for row in rows:
            instruction_id = self._require(file, row, "instruction_id")
            if instruction_id is None:
                continue
            if instruction_id in seen:
                self.summary.skipped[f"duplicate instruction row in {file}"] += 1
                continue
            seen[instruction_id] = row.line
            if instruction_id in self.instructions:
                self.summary.skipped["instruction already imported"] += 1
            self._upsert_instruction(file, row, instruction_id)

    def _load_references(self, file: str, rows: list[Row]) -> None:
        existing = {
            (r.instruction_id, r.annotator): r
            for r in ReferenceResponse.objects.filter(instruction__dataset=self.dataset)
        }
        new: list[ReferenceResponse] = []
        seen: set[tuple[str, str]] = set()
        for row in rows:
            instruction_id = self._require(file, row, "instruction_id")
            text = self._require(file, row, "clinician_response")
            if instruction_id is None or text is None:
                continue
            annotator = row.get("annotator_num").strip() or "Annotator_1"
            if (instruction_id, annotator) in seen:
                self.summary.skipped[f"duplicate reference row in {file}"] += 1
                continue
            seen.add((instruction_id, annotator))
            instruction = self._upsert_instruction(file, row, instruction_id)
            if instruction is None:
                continue
            current = existing.get((instruction.pk, annotator))
            if current is not None:
                if current.text != text and self.replace:
                    current.text = text
                    current.save(update_fields=["text"])
                    self.changed_instructions.add(instruction.pk)
                    self.summary.counts["references updated"] += 1
                elif current.text != text:
                    self.summary.skipped["reference differs from stored (use --replace)"] += 1
                else:
                    self.summary.skipped["reference already imported"] += 1
                continue
            self.changed_instructions.add(instruction.pk)  # a new reference changes scores
            digits = "".join(ch for ch in annotator if ch in "0123456789")
            new.append(
                ReferenceResponse(
                    instruction=instruction,
                    annotator=annotator,
                    annotator_order=int(digits) if digits else 1,
                    text=text,
                )
            )
        ReferenceResponse.objects.bulk_create(new, batch_size=500)
        self.summary.counts["references"] += len(new)

    def _load_responses(self, file: str, rows: list[Row]) -> None:
        existing = {
            (r.instruction_id, r.model_name): r
            for r in ModelResponse.objects.filter(instruction__dataset=self.dataset)
        }
        known_columns = {
            "instruction_id",
            "person_id",
            "question",
            "filename",
            "clinician_response",
            "evidence",
            "model_name",
            "binary_correct",
            "is_used_eval",
            "submitter_specialty",
            "model_rank",
            "is_applicable",
            "is_sufficient",
            "generation_length",
            "context_length",
            "truncation_policy",
            "annotator_num",
            *RESPONSE_TEXT_COLUMNS,
        }
        new: list[ModelResponse] = []
        seen: set[tuple[str, str]] = set()
        frozen = self._responses_shown_in_studies()
        for row in rows:
            instruction_id = self._require(file, row, "instruction_id")
            model_name = self._require(file, row, "model_name")
            if instruction_id is None or model_name is None:
                continue
            if (instruction_id, model_name) in seen:
                self.summary.skipped[f"duplicate response row in {file}"] += 1
                continue
            seen.add((instruction_id, model_name))
            if instruction_id not in self.instructions:
                self.problems.add(
                    file,
                    row.line,
                    "instruction_id",
                    f"response for unknown instruction {instruction_id!r}: import the "
                    "instructions file or the reference answers with it",
                )
                continue
            instruction = self._upsert_instruction(file, row, instruction_id)
            if instruction is None:
                continue
            values = self._response_values(file, row, known_columns)
            if values is None:
                continue
            values["names_own_model"] = names_a_model(values["text"], model_name)
            current = existing.get((instruction.pk, model_name))
            if current is not None:
                differs = any(getattr(current, k) != v for k, v in values.items())
                if (
                    differs
                    and self.replace
                    and current.pk in frozen
                    and (current.text != values["text"])
                ):
                    self.problems.add(
                        file,
                        row.line,
                        "model_response",
                        f"the response of {model_name} to {instruction_id} was already shown "
                        "to clinicians in a study: its text cannot change. Import the new text "
                        "as another dataset, or under another model name for a new round",
                    )
                    continue
                if differs and self.replace:
                    text_changed = current.text != values["text"]
                    for key, value in values.items():
                        setattr(current, key, value)
                    current.save()
                    if text_changed:
                        self.changed_responses.append(current.pk)
                    self.summary.counts["responses updated"] += 1
                elif differs:
                    self.summary.skipped["response differs from stored (use --replace)"] += 1
                else:
                    self.summary.skipped["response already imported"] += 1
                continue
            new.append(ModelResponse(instruction=instruction, model_name=model_name, **values))
        ModelResponse.objects.bulk_create(new, batch_size=500)
        self.summary.counts["responses"] += len(new)
        self.summary.counts["responses naming a model"] += sum(r.names_own_model for r in new)

    def _responses_shown_in_studies(self) -> set[int]:
        """Responses of a study whose instruction has a started review there: the text a
        clinician ranked, which a re-import must never change under them."""
        started = set(
            Review.objects.filter(assignment__instruction__dataset=self.dataset)
            .exclude(shown_order=[])
            .values_list("assignment__study_id", "assignment__instruction_id")
        )
        if not started:
            return set()
        return {
            response_id
            for response_id, study_id, instruction_id in StudyResponse.objects.filter(
                study__dataset=self.dataset
            ).values_list("response_id", "study_id", "instruction_id")
            if (study_id, instruction_id) in started
        }

    def _response_values(self, file: str, row: Row, known: set[str]) -> dict[str, Any] | None:
        ok = True
        values: dict[str, Any] = {"text": row.get(*RESPONSE_TEXT_COLUMNS)}
        for target, column, parser in (
            ("context_length", "context_length", parse_optional_int),
            ("generation_length", "generation_length", parse_optional_int),
            ("release_rank", "model_rank", parse_optional_float),
            ("release_binary_correct", "binary_correct", parse_bool),
        ):
            try:
                values[target] = parser(row.get(column))
            except ValueError as exc:
                self.problems.add(file, row.line, column, str(exc))
                ok = False
        values["truncation_policy"] = row.get("truncation_policy").strip()
        values["generation_metadata"] = {
            k: v for k, v in row.values.items() if k not in known and v.strip()
        }
        return values if ok else None

    # --- EHR XML ------------------------------------------------------------------------------
    def load_xml(self, path: Path) -> None:
        try:
            fmt = sniff_format(path)
        except XMLImportError as exc:
            self.problems.problems.append(exc.problem)
            return
        person_id = person_id_from_filename(path)
        existing = Patient.objects.filter(dataset=self.dataset, person_id=person_id).first()
        if existing is not None and not self.replace:
            self.summary.skipped["record already imported (use --replace)"] += 1
            self.progress(path.stat().st_size)
            return
        self.summary.files[path.name] = f"ehr:{fmt}"
        try:
            with transaction.atomic():  # a savepoint: a broken file rolls back only its rows
                self._load_record(path, fmt, person_id, existing)
        except XMLImportError as exc:
            self.problems.problems.append(exc.problem)

    def _load_record(self, path: Path, fmt: str, person_id: str, existing: Patient | None) -> None:
        if existing is not None:
            # A reloaded record may keep its size and dates: its stored excerpts go explicitly.
            record_excerpts_invalidate(patients=[existing.pk])
            Event.objects.filter(patient=existing).delete()
            Encounter.objects.filter(patient=existing).delete()
            patient = existing
        else:
            patient = Patient.objects.create(
                dataset=self.dataset, person_id=person_id, source_file=path.name
            )
        patient.source_format = fmt
        writer = _EventWriter(patient)
        ids = _IdReserver(Encounter)
        encounters: dict[int, Encounter] = {}
        reported = 0
        with path.open("rb") as raw:
            reader = CountingReader(raw)
            if fmt == "record":
                items = iter_record(reader, path.name)
            else:
                items = iter_eventstream(reader, path.name)
            for kind, item in items:
                if kind == "event":
                    writer.add(item)  # type: ignore[arg-type]
                    if writer.pending >= EVENT_FLUSH_ROWS:
                        writer.flush()
                        self.progress(reader.count - reported)
                        reported = reader.count
                elif kind == "encounter":
                    enc: EncounterData = item  # type: ignore[assignment]
                    encounters[enc.ordinal] = Encounter(
                        id=ids.next(),
                        patient=patient,
                        ordinal=enc.ordinal,
                        encounter_type=enc.encounter_type,
                        start=enc.start,
                        end=enc.end,
                    )
                    writer.encounter_id = encounters[enc.ordinal].id
                    writer.encounter_ordinal = enc.ordinal
                elif kind == "encounter_end":
                    enc = item  # type: ignore[assignment]
                    encounters[enc.ordinal].care_sites = enc.care_sites
                    encounters[enc.ordinal].providers = enc.providers
                elif kind == "demographics":
                    _apply_demographics(patient, item)  # type: ignore[arg-type]
                elif kind == "person_id" and item and item != person_id:
                    patient.demographics["source_person_id"] = item
            writer.flush()
        for ordinal, encounter in encounters.items():
            encounter.event_count = writer.encounter_events.get(ordinal, 0)
        # Encounters go in last, with ids reserved up front: events already point at them, and
        # the foreign key is checked at commit (Django creates it DEFERRABLE INITIALLY DEFERRED).
        write_encounters(list(encounters.values()))
        self.progress(reader.count - reported)
        patient.event_count = writer.total
        patient.note_count = writer.notes
        patient.first_event_at = writer.first
        patient.last_event_at = writer.last
        patient.save()
        self.summary.counts["patients"] += 1
        self.summary.counts["encounters"] += len(encounters)
        self.summary.counts["events"] += writer.total
        self.summary.counts["notes"] += writer.notes

    def link_patients(self) -> None:
        patients = dict(Patient.objects.filter(dataset=self.dataset).values_list("person_id", "id"))
        stale = []
        for instruction in self.instructions.values():
            # The link always follows person_id: a changed id whose record is not loaded yet
            # unlinks the instruction rather than leave it showing the old patient's record.
            patient_id = patients.get(instruction.person_id)
            if instruction.patient_id != patient_id:
                instruction.patient_id = patient_id
                stale.append(instruction)
        Instruction.objects.bulk_update(stale, ["patient"], batch_size=500)
        unlinked = sum(
            1 for i in self.instructions.values() if i.person_id and i.person_id not in patients
        )
        if unlinked:
            self.summary.counts["instructions whose record is not loaded yet"] = unlinked


def _apply_demographics(patient: Patient, demo: Demographics) -> None:
    patient.birth_date = patient.birth_date or demo.birth_date
    patient.gender = patient.gender or demo.gender
    patient.race = patient.race or demo.race
    patient.ethnicity = patient.ethnicity or demo.ethnicity
    patient.demographics.update(demo.extra)


class _IdReserver:
    """Reserves primary keys before the rows exist, so children can be written first.

    PostgreSQL: blocks from the table's sequence. SQLite: counting up from the current maximum,
    which is safe because the import holds SQLite's write lock for its whole transaction.
    """

    BLOCK = 256
    # Blocks double up to this: a cohort's 20,000 encounters took 78 round trips, each waiting
    # for the event COPY in flight (``copier``). Ids left unused are gaps, as after a rollback.
    MAX_BLOCK = 16_384

    def __init__(self, model: type) -> None:
        self.model = model
        self.pool: list[int] = []
        self.sqlite_next: int | None = None
        self.block = self.BLOCK

    def next(self) -> int:
        if connection.vendor == "postgresql":
            if not self.pool:
                table = self.model._meta.db_table
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT nextval(pg_get_serial_sequence(%s, 'id')) "
                        "FROM generate_series(1, %s)",
                        [table, self.block],
                    )
                    self.pool = [row[0] for row in cursor.fetchall()][::-1]
                self.block = min(self.block * 2, self.MAX_BLOCK)
            return self.pool.pop()
        if self.sqlite_next is None:
            current = self.model.objects.aggregate(m=models.Max("id"))["m"] or 0
            self.sqlite_next = current + 1
        self.sqlite_next += 1
        return self.sqlite_next - 1


class _EventWriter:
    """Buffers events and writes them in chunks: COPY on PostgreSQL, bulk INSERT elsewhere."""

    COLUMNS = (
        "patient_id",
        "encounter_id",
        "seq",
        "timestamp",
        "event_type",
        "code",
        "name",
        "value",
        "value_numeric",
        "unit",
        "text",
        "note_type",
        "attributes",
    )

    def __init__(self, patient: Patient, rows: list[tuple[Any, ...]] | None = None) -> None:
        self.patient_id = patient.pk
        self.encounter_id: int | None = None
        self.encounter_ordinal = 0
        # MEDS and OMOP share one buffer between many patients' writers, so a cohort of small
        # records still goes to the database in large COPY batches.
        self.rows: list[tuple[Any, ...]] = rows if rows is not None else []
        self.total = 0
        self.notes = 0
        self.first = None
        self.last = None
        self.encounter_events: Counter = Counter()

    @property
    def pending(self) -> int:
        return len(self.rows)

    def add(self, event: EventData) -> None:
        self.total += 1
        if event.event_type == "note":
            self.notes += 1
        ts = event.timestamp
        if ts is not None:
            if self.first is None or ts < self.first:
                self.first = ts
            if self.last is None or ts > self.last:
                self.last = ts
        if self.encounter_id is not None:
            self.encounter_events[self.encounter_ordinal] += 1
        self.rows.append(
            (
                self.patient_id,
                self.encounter_id,
                self.total,
                ts,
                event.event_type[:40],
                event.code[:120],
                event.name[:500],  # bounded: it is in a b-tree index
                event.value[:100],
                event.value_numeric,
                event.unit[:60],
                event.text,
                event.note_type[:120],
                event.attributes,
            )
        )

    def flush(self) -> None:
        write_event_rows(self.rows)
        self.rows.clear()


EVENT_COLUMNS = _EventWriter.COLUMNS
# Shared by every event row without attributes; nothing writes to it.
NO_ATTRIBUTES: dict[str, str] = {}


def write_event_rows(rows: list[tuple[Any, ...]], *, naive_utc: bool = False) -> None:
    """Write event rows (``EVENT_COLUMNS`` order, attributes last as a dict): the one path every
    importer's events take to the database. COPY on PostgreSQL, bulk INSERT elsewhere.

    ``naive_utc``: the rows' timestamps are naive datetimes holding UTC wall-clock time
    (``columnar.utc_wall_times``), which the MEDS and OMOP importers make 50-100x faster than
    aware ones. A binary COPY sends ``timestamp`` and ``timestamptz`` alike, as microseconds
    since 2000-01-01 (UTC for ``timestamptz``), so naive UTC values sent as ``timestamp`` land
    as the same instants (tested against aware ones in ``test_import_bulk_path``)."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        if naive_utc:
            rows = [(*r[:3], aware(r[3]) if r[3] is not None else None, *r[4:]) for r in rows]
        insert_event_rows(rows)
        return
    with connection.cursor() as cursor:
        copy_event_rows(cursor.cursor, rows, naive_utc=naive_utc)


def copy_event_rows(raw: Any, rows: list[tuple[Any, ...]], *, naive_utc: bool = False) -> None:
    """COPY event rows through ``raw``, a psycopg 3 cursor (Django's, or one a worker thread
    opened on the import's own connection: ``copier.BackgroundCopy``)."""
    table = Event._meta.db_table
    columns = ", ".join(EVENT_COLUMNS)
    sql = f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)"  # noqa: S608 - a model's table
    # bytes as bytea by psycopg's own (C) dumper: the one registered last for bytea is
    # its DB-API ``Binary`` wrapper's, in Python, a tenth of the COPY's formatting time.
    raw.adapters.register_dumper(bytes, BytesBinaryDumper)
    dumps = json.dumps
    with raw.copy(sql) as copy:
        # Binary: PostgreSQL parses no text (timestamps above all); psycopg formats less.
        copy.set_types(EVENT_COPY_TYPES_NAIVE_UTC if naive_utc else EVENT_COPY_TYPES)
        write = copy.write_row
        for row in rows:
            # jsonb's binary form is a version byte (1) and the JSON text. Most events have
            # no attributes: a constant, without a trip through json.
            attributes = row[-1]
            jsonb = (b"\x01" + dumps(attributes).encode()) if attributes else EMPTY_JSONB
            write(row[:-1] + (jsonb,))


def insert_event_rows(rows: list[tuple[Any, ...]]) -> None:
    """The same rows by multi-row INSERTs (SQLite; and the reference the COPY is tested against)."""
    Event.objects.bulk_create(
        (Event(**dict(zip(EVENT_COLUMNS, row, strict=True))) for row in rows),
        batch_size=2000,
    )


# The event columns' types for a binary COPY (``EVENT_COLUMNS`` order). Text for the character
# columns: PostgreSQL still checks their lengths. ``attributes`` goes as bytes already in
# jsonb's binary form (``EMPTY_JSONB``), so nothing is encoded twice.
EVENT_COPY_TYPES = (
    "int8",
    "int8",
    "int4",
    "timestamptz",
    "text",
    "text",
    "text",
    "text",
    "float8",
    "text",
    "text",
    "text",
    "bytea",
)
EMPTY_JSONB = b"\x01{}"
EVENT_COPY_TYPES_NAIVE_UTC = (*EVENT_COPY_TYPES[:3], "timestamp", *EVENT_COPY_TYPES[4:])


ENCOUNTER_COLUMNS = (
    "id",
    "patient_id",
    "ordinal",
    "encounter_type",
    "start",
    "end",
    "care_sites",
    "providers",
    "event_count",
)


class PendingEncounter:
    """An encounter row an importer is building, with its reserved id: the fields of
    ``Encounter`` without a model instance, whose making (signals, field defaults) cost a MEDS
    cohort with a visit every 50 events a tenth of its time."""

    __slots__ = ENCOUNTER_COLUMNS

    def __init__(
        self,
        id: int,  # noqa: A002 - the column's name
        patient_id: int,
        ordinal: int,
        encounter_type: str,
        start: datetime | None,
        end: datetime | None,
    ) -> None:
        self.id = id
        self.patient_id = patient_id
        self.ordinal = ordinal
        self.encounter_type = encounter_type
        self.start = start
        self.end = end
        self.care_sites: list[str] = []
        self.providers: list[str] = []
        self.event_count = 0

    def as_model(self) -> Encounter:
        return Encounter(**{name: getattr(self, name) for name in ENCOUNTER_COLUMNS})


def write_encounters(encounters: Sequence[Encounter | PendingEncounter]) -> None:
    """Write encounters whose ids were reserved (``_IdReserver``): COPY on PostgreSQL, as the
    events go (a model save per encounter cost a tenth of a MEDS import), bulk INSERT elsewhere."""
    if not encounters:
        return
    if connection.vendor != "postgresql":
        Encounter.objects.bulk_create(
            [e.as_model() if isinstance(e, PendingEncounter) else e for e in encounters],
            batch_size=500,
        )
        return
    table = Encounter._meta.db_table
    columns = ", ".join(f'"{c}"' for c in ENCOUNTER_COLUMNS)  # "end" is a keyword
    dumps = json.dumps
    sql = f"COPY {table} ({columns}) FROM STDIN"  # noqa: S608 - a model's table
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        write = copy.write_row
        for e in encounters:
            # fmt: off
            write((e.id, e.patient_id, e.ordinal, e.encounter_type, e.start, e.end,
                   dumps(e.care_sites), dumps(e.providers), e.event_count))
            # fmt: on


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block, and restored however it ends.

    An import allocates millions of short-lived row tuples and lists that form no cycles
    (reference counting frees them), yet the collector walked them, and every older object,
    hundreds of times: at a million MEDS events about a third of the importer's Python time
    (BENCHMARKS.md). Imports run in management commands (``import_medalign``, ``load_demo``),
    never in a web request, so pausing the process's collector for one is safe; a caller's
    own pause is kept."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def import_release(
    path: Path | str,
    *,
    dataset_name: str,
    replace: bool = False,
    progress: ProgressFn | None = None,
    description: str = "",
    is_synthetic: bool = False,
) -> ImportSummary:
    """Import every release file under ``path`` into dataset ``dataset_name``, all or nothing."""
    # Imported here: both modules build on this one's machinery (writer, id reserver, importer).
    from .meds import find_meds_root, load_meds
    from .omop import find_omop_tables, find_unread_omop_tables, load_omop

    path = Path(path)
    meds_root = find_meds_root(path)
    omop_tables = find_omop_tables(path, meds_root)
    # The CDM's other tables beside them are ignored by name, not reported as unrecognised.
    omop_unread = find_unread_omop_tables(path, meds_root) if "person" in omop_tables else {}
    skip = frozenset(omop_tables.values()) | frozenset(omop_unread.values())
    if meds_root is not None:
        skip |= frozenset(
            p
            for sub in ("data", "metadata")
            if (meds_root / sub).is_dir()
            for p in (meds_root / sub).rglob("*")
        )
    tables, xml_files, ignored = discover(path, skip)
    for name in [*xml_files, *(p for ps in tables.values() for p in ps)]:
        if name.stat().st_size > settings.IMPORT_MAX_FILE_BYTES:
            raise ImportFailed(
                [
                    Problem(
                        name.name,
                        None,
                        None,
                        f"file is larger than IMPORT_MAX_FILE_BYTES "
                        f"({settings.IMPORT_MAX_FILE_BYTES} bytes)",
                    )
                ]
            )
    if not xml_files and not any(tables.values()) and meds_root is None and not omop_tables:
        raise ImportFailed([Problem(str(path), None, None, "no release files found")])
    with collector_paused(), transaction.atomic():
        dataset, _ = Dataset.objects.get_or_create(
            name=dataset_name,
            defaults={"description": description, "is_synthetic": is_synthetic},
        )
        importer = _Importer(dataset, replace, progress)
        for reason in ignored:
            importer.summary.skipped[reason] += 1
        for kind in KIND_ORDER:
            for table in tables[kind]:
                importer.load_table(kind, table)
        importer.problems.raise_if_any()
        # Before any event is written (see bulk.py); rolled back with everything else.
        meds_shards = sorted((meds_root / "data").rglob("*.parquet")) if meds_root else []
        bulk = bulk_load_begin(
            estimate_events([*xml_files, *meds_shards], omop_tables),
            # Only records already in the dataset are replaced (their events deleted).
            replaces=replace and Patient.objects.filter(dataset=dataset).exists(),
        )
        for xml_file in xml_files:
            importer.load_xml(xml_file)
        importer.problems.raise_if_any()
        if meds_root is not None:
            load_meds(importer, meds_root)
            importer.problems.raise_if_any()
        if omop_tables:
            load_omop(importer, omop_tables, omop_unread)
            importer.problems.raise_if_any()
        if bulk is not None:
            bulk.finish()
        importer.link_patients()
        importer.changed_instructions.update(
            i.pk
            for i in importer.instructions.values()
            if i.pk in importer.original_questions
            and importer.original_questions[i.pk] != i.question
        )
        record_excerpts_invalidate(instructions=importer.changed_instructions)
        if importer.changed_responses or importer.changed_instructions:
            from scoring.models import MetricScore

            MetricScore.objects.filter(
                models.Q(response_id__in=importer.changed_responses)
                | models.Q(response__instruction_id__in=importer.changed_instructions)
            ).delete()
        dataset.save(update_fields=["updated_at"])
    if connection.vendor == "postgresql" and importer.summary.counts["events"] >= 10_000:
        # Fresh statistics after a large load: without them PostgreSQL plans the record pages
        # as if the events table were small (deep timeline pages went from ~20 ms to ~115 ms).
        # Only the columns the record pages' indexes hold (their filters and sort keys): the
        # values, texts and attributes are read, never planned on, and cost half the ANALYZE
        # (a column list leaves autovacuum's count of changed rows as it is, so autovacuum
        # still gathers the rest in the background).
        columns = ", ".join(f'"{column}"' for column in planned_event_columns())
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {Event._meta.db_table} ({columns})")  # noqa: S608 - model's
    return importer.summary


def planned_event_columns() -> list[str]:
    """The event table's columns in the model's indexes, in their order, once each."""
    fields = dict.fromkeys(
        name.lstrip("-") for index in Event._meta.indexes for name in index.fields
    )
    return [Event._meta.get_field(name).column for name in fields]  # type: ignore[union-attr]


def total_bytes(path: Path | str) -> int:
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
