"""What other names the vocabulary of an OMOP export gives the concepts its events use.

An export may carry ``concept_synonym`` beside ``concept``: the other names of each code
("HbA1c MFr Bld", "Glycated hemoglobin" for LOINC 4548-4). The import reads the English ones
(a blank language counts as English) of the concepts whose name the dataset's events carry, and
stores them (``EventNameSynonym``), keyed by that name, so that record search and the
excerpt find an event under any name its vocabulary gives it. A file by that name without the
table's columns is not the OMOP table, and teaches nothing.
"""

from collections.abc import Iterable
from pathlib import Path

from django.db import transaction

from review.models import Dataset, Event, EventNameSynonym

from ..scratch import ScratchTable
from .cdm import SUFFIXES
from .files import iter_batches

ENGLISH = "4180186"  # OMOP's language concept for English; a blank language counts as English
TABLE = "concept_synonym"


def concept_synonyms_import(
    *, dataset: Dataset, tables: dict[str, Path], concepts: ScratchTable
) -> int:
    """Store the synonyms of ``concept_synonym`` (found beside the ``concept`` table) for the
    concepts whose name the dataset's events carry; ``concepts`` is the import's concept table
    (id, vocabulary, code, name). Returns how many were stored; 0 without the table. Called by
    the OMOP importer once its events are written, inside its transaction."""
    concept = tables.get("concept")
    if concept is None:
        return 0
    found = [
        p
        for p in sorted(concept.parent.iterdir())
        if p.is_file() and p.stem.lower() == TABLE and p.suffix.lower() in SUFFIXES
    ]
    if not found:
        return 0
    used = set(
        Event.objects.filter(patient__dataset=dataset)
        .exclude(name="")
        .values_list("name", flat=True)
        .distinct()
    )
    pairs: list[tuple[str, str]] = []
    for batch in iter_batches(found[0]):
        columns = batch.schema.names
        if "concept_id" not in columns or "concept_synonym_name" not in columns:
            return 0  # not the OMOP table: nothing to learn from it
        ids = batch.column("concept_id").to_pylist()
        synonyms = batch.column("concept_synonym_name").to_pylist()
        languages = (
            batch.column("language_concept_id").to_pylist()
            if "language_concept_id" in columns
            else [None] * len(ids)
        )
        wanted = []
        for raw, language in zip(ids, languages, strict=True):
            if str(language or "").strip() in ("", ENGLISH) and str(raw or "").strip().isdigit():
                wanted.append(int(str(raw).strip()))
        names = {k: v[0] for k, v in concepts.lookup("id", wanted, ("name",)).items()}
        for raw, synonym, language in zip(ids, synonyms, languages, strict=True):
            if str(language or "").strip() not in ("", ENGLISH):
                continue
            key = str(raw or "").strip()
            name = names.get(int(key)) if key.isdigit() else None
            if name and name in used and synonym:
                pairs.append((name, str(synonym)))
    return event_name_synonyms_store(dataset=dataset, pairs=pairs)


MAX_PER_NAME = 20  # a few concepts carry hundreds of synonyms (trade names): the first 20 do


@transaction.atomic
def event_name_synonyms_store(*, dataset: Dataset, pairs: Iterable[tuple[str, str]]) -> int:
    """Store (name, synonym) pairs for ``dataset``, replacing what its names had; returns how
    many. A synonym equal to its name (ignoring case) is no synonym and is skipped."""
    by_name: dict[str, dict[str, None]] = {}
    for name, synonym in pairs:
        name, synonym = name.strip(), synonym.strip()
        if name and synonym and synonym.lower() != name.lower():
            kept = by_name.setdefault(name, {})
            if len(kept) < MAX_PER_NAME:
                kept[synonym] = None
    if not by_name:
        return 0
    names = list(by_name)
    for start in range(0, len(names), 500):
        EventNameSynonym.objects.filter(
            dataset=dataset, name__in=names[start : start + 500]
        ).delete()
    rows = [
        EventNameSynonym(dataset=dataset, name=name, synonym=synonym)
        for name, synonyms in by_name.items()
        for synonym in synonyms
    ]
    EventNameSynonym.objects.bulk_create(rows, batch_size=2000)
    return len(rows)
