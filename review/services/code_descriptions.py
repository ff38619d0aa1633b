"""Attach code descriptions to a dataset after its import (``manage.py import_code_descriptions``).

A MEDS cohort imported without ``metadata/codes.parquet`` names its events by their raw codes;
this renames them from a codes file (review.importers.descriptions), in one transaction, and
records it in the audit trail. Record search and the findings read names live; the stored
excerpts of the records it changed are deleted with it and prepared again once it commits.
"""

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.db import connection, transaction

from review.importers.descriptions import (
    DescriptionsFile,
    describe,
    patients_count_undescribed,
    read_descriptions,
    undescribed_pairs,
)
from review.importers.errors import ImportFailed, Problem
from review.importers.scratch import ScratchTable, drop_scratch_tables, scratch_tables
from review.importers.writers import record_excerpts_invalidate
from review.models import AuditEvent, Dataset, Event, EventNameSynonym, Patient, User

from .audit import audit_record
from .excerpts import record_excerpts_prepare


@dataclass
class CodeDescriptionsSummary:
    """What attaching a codes file did to a dataset (numbers and names, no patient text)."""

    dataset: str
    file: str
    codes_in_file: int
    rows_without_description: int
    descriptions_cut: int
    codes_described: int  # distinct (code, name) of the dataset's events given a new name
    events_renamed: int
    records_changed: int
    events_still_undescribed: int
    excerpts_prepared: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def code_descriptions_import(
    *, dataset_name: str, path: Path, replace: bool = False, actor: User | None = None
) -> CodeDescriptionsSummary:
    """Name the dataset's events by the descriptions in ``path``: those still named by their
    code, or with ``replace`` every event whose code the file describes. All or nothing
    (``ImportFailed`` names the file, row and column of every problem); then the changed
    records' excerpts are prepared again, one instruction at a time, as after an import."""
    read = read_descriptions(path)
    summary = code_descriptions_apply(
        dataset_name=dataset_name, read=read, replace=replace, actor=actor
    )
    dataset = Dataset.objects.get(name=dataset_name)
    summary.excerpts_prepared = record_excerpts_prepare(dataset_id=dataset.pk)
    return summary


@transaction.atomic
def code_descriptions_apply(
    *, dataset_name: str, read: DescriptionsFile, replace: bool = False, actor: User | None = None
) -> CodeDescriptionsSummary:
    """The renaming itself, audited, in one transaction (see ``code_descriptions_import``)."""
    dataset = Dataset.objects.select_for_update().filter(name=dataset_name).first()
    if dataset is None:
        raise ImportFailed([Problem(dataset_name, None, None, "no such dataset")])
    changes = [
        (code, name, new)
        for code, name in undescribed_pairs(dataset_id=dataset.pk, every=replace)
        if (new := describe(code, read.descriptions)) is not None and new != name
    ]
    renamed = records = 0
    if changes:
        renamed, patient_ids = _rename(dataset, changes)
        records = len(patient_ids)
        _carry_synonyms(dataset, changes)
        record_excerpts_invalidate(patients=patient_ids)
    summary = CodeDescriptionsSummary(
        dataset=dataset.name,
        file=read.file,
        codes_in_file=len(read.descriptions),
        rows_without_description=read.without_description,
        descriptions_cut=read.cut,
        codes_described=len(changes),
        events_renamed=renamed,
        records_changed=records,
        events_still_undescribed=patients_count_undescribed(dataset_id=dataset.pk),
    )
    dataset.save(update_fields=["updated_at"])
    audit_record(
        action=AuditEvent.Action.DATA_IMPORTED,
        actor=actor,
        obj=dataset,
        details={"kind": "code descriptions", "replace": replace, **summary.as_dict()},
    )
    return summary


def _rename(dataset: Dataset, changes: list[tuple[str, str, str]]) -> tuple[int, list[int]]:
    """One UPDATE joined to a scratch table of (code, old name, new name): the events renamed,
    and the patients they belong to."""
    (table,) = scratch_tables(
        ScratchTable(
            "code_descriptions_scratch",
            [("code", "TEXT NOT NULL"), ("old_name", "TEXT NOT NULL"), ("new_name", "TEXT")],
        )
    )
    table.insert(changes)
    events = Event._meta.db_table
    patients = Patient._meta.db_table
    in_dataset = f"SELECT id FROM {patients} WHERE dataset_id = %s"  # noqa: S608 - our table
    matched = (
        "e.code = t.code AND e.name = t.old_name AND e.event_type <> 'note' "
        f"AND e.patient_id IN ({in_dataset})"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT e.patient_id FROM {events} e "  # noqa: S608 - our tables
            f"JOIN {table.name} t ON {matched}",
            [dataset.pk],
        )
        patient_ids = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            f"UPDATE {events} AS e SET name = t.new_name FROM {table.name} t "  # noqa: S608
            f"WHERE {matched}",
            [dataset.pk],
        )
        renamed = cursor.rowcount
    drop_scratch_tables([table])
    return renamed, patient_ids


def _carry_synonyms(dataset: Dataset, changes: list[tuple[str, str, str]]) -> None:
    """A replaced name's vocabulary synonyms (OMOP ``concept_synonym``) follow it to the new
    name, so search finds the renamed events by them as before."""
    renamed = {old: new for _, old, new in changes}
    olds = list(renamed)
    pairs: dict[tuple[str, str], None] = {}
    for start in range(0, len(olds), 500):
        rows = EventNameSynonym.objects.filter(dataset=dataset, name__in=olds[start : start + 500])
        for name, synonym in rows.values_list("name", "synonym"):
            if synonym.lower() != renamed[name].lower():
                pairs[(renamed[name], synonym)] = None
    news = sorted({name for name, _ in pairs})
    for start in range(0, len(news), 500):
        held = EventNameSynonym.objects.filter(dataset=dataset, name__in=news[start : start + 500])
        for pair in held.values_list("name", "synonym"):
            pairs.pop(pair, None)
    EventNameSynonym.objects.bulk_create(
        [EventNameSynonym(dataset=dataset, name=n, synonym=s) for n, s in pairs], batch_size=2000
    )
