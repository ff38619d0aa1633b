"""The MedAlign release: its TSV/CSV tables and its EHR XML records.

Tables load in ``KIND_ORDER``: taxonomy, instructions, reference answers, model responses (a
response needs its instruction, which any of the earlier files may bring); then the EHR XML
records; then instructions are linked to their patients by ``person_id``.

Re-importing is idempotent: rows are keyed (instruction_id; instruction + annotator; instruction +
model; person_id). Without ``replace`` an existing row keeps its values (blank fields are filled
in, since the release spreads one instruction's fields over several files); with ``replace``
differing values are overwritten and records are reloaded; the reader notes which responses and
instructions changed, so that their scores can be dropped. A response already shown to
clinicians in a study never changes its text.
"""

from pathlib import Path
from typing import Any

from django.db import transaction

from review.blinding import names_a_model, near_misses
from review.models import (
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

from .columnar import NUL_PROBLEM
from .ehr_xml import (
    CountingReader,
    Demographics,
    EncounterData,
    XMLImportError,
    iter_eventstream,
    iter_record,
    person_id_from_filename,
    sniff_format,
)
from .run import ImportRun
from .tables import (
    Row,
    TableError,
    iter_rows,
    parse_bool,
    parse_optional_float,
    parse_optional_int,
    read_header,
)
from .writers import (
    EVENT_FLUSH_ROWS,
    EventWriter,
    IdReserver,
    record_excerpts_invalidate,
    write_encounters,
)

RESPONSE_TEXT_COLUMNS = ("model_response", "response", "model_output", "output", "generation")

REQUIRED = {
    "taxonomy": ("category", "subcategory"),
    "instructions": ("instruction_id", "question"),
    "references": ("instruction_id", "clinician_response"),
    "responses": ("instruction_id", "model_name"),
}
KIND_ORDER = ("taxonomy", "instructions", "references", "responses")


class ReleaseReader:
    """Reads a release's tables and XML records into ``run``'s dataset, keeping what it must
    compare at the end: the instructions (to link to patients), the questions as they were and
    the responses and instructions whose scores a change made stale."""

    def __init__(self, run: ImportRun) -> None:
        dataset = run.dataset
        # The run's dataset, options and report, used on every row.
        self.dataset = dataset
        self.replace = run.replace
        self.progress = run.progress
        self.summary = run.summary
        self.problems = run.problems
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
                    flag = parse_bool(row.values[target])
                except ValueError as exc:
                    self.problems.add(file, row.line, target, str(exc))
                    continue
                if flag is not None:
                    fields[target] = flag
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
        # Clinicians' pages mask every response against every model name of the dataset (and
        # the built-in families): the flag and the counts say what that masking finds.
        names = tuple(
            sorted({m for _, m in existing} | {n for r in rows if (n := r.get("model_name"))})
        )
        masked = near = 0
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
            values["names_own_model"] = names_a_model(values["text"], names)
            counted = (values["names_own_model"], bool(near_misses(values["text"], names)))
            current = existing.get((instruction.pk, model_name))
            if current is not None:
                differs = any(
                    getattr(current, k) != v for k, v in values.items() if k != "names_own_model"
                )
                if current.names_own_model != values["names_own_model"] and not differs:
                    # Another model of the set named in an unchanged text: the flag follows.
                    current.names_own_model = values["names_own_model"]
                    current.save(update_fields=["names_own_model"])
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
                    masked += counted[0]
                    near += counted[1]
                elif differs:
                    self.summary.skipped["response differs from stored (use --replace)"] += 1
                else:
                    self.summary.skipped["response already imported"] += 1
                continue
            new.append(ModelResponse(instruction=instruction, model_name=model_name, **values))
            masked += counted[0]
            near += counted[1]
        ModelResponse.objects.bulk_create(new, batch_size=500)
        self.summary.counts["responses"] += len(new)
        if masked:
            self.summary.counts["responses with model names masked"] += masked
        if near:
            self.summary.counts["responses with near misses to check"] += near

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
        if "\x00" in values["text"]:
            # PostgreSQL refuses it at the database; SQLite would store it and the page show it.
            column = next(c for c in RESPONSE_TEXT_COLUMNS if row.values.get(c) is not None)
            self.problems.add(file, row.line, column, NUL_PROBLEM)
            ok = False
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
        writer = EventWriter(patient)
        ids = IdReserver(Encounter)
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
