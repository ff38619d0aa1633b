"""The import service: runs an importer and records it in the audit trail."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

from review.importers import ImportSummary, ProgressFn, import_release
from review.models import AuditEvent, Dataset, ModelResponse, User

from .audit import audit_record
from .excerpts import record_excerpts_prepare
from .studies import StudyError, study_add_responses, study_first_round


def dataset_import(
    *,
    path: Path | str,
    dataset_name: str,
    replace: bool = False,
    actor: User | None = None,
    progress: ProgressFn | None = None,
    description: str = "",
    is_synthetic: bool = False,
    responses_as_candidates: bool = False,
) -> ImportSummary:
    """Import a release (all or nothing), then put its new responses in the dataset's latest
    study, unless ``responses_as_candidates`` or a review of that study has started on one of
    their instructions: then they stay candidates, and the summary says so (an admin adds
    them to a new round: a started instruction's response set never changes)."""
    before = set(
        ModelResponse.objects.filter(instruction__dataset__name=dataset_name).values_list(
            "pk", flat=True
        )
    )
    summary = import_release(
        path,
        dataset_name=dataset_name,
        replace=replace,
        progress=progress,
        description=description,
        is_synthetic=is_synthetic,
    )
    # After the import committed (it is all or nothing; this is not): every instruction's
    # excerpt ranked and rendered now rather than on a clinician's first view.
    dataset = Dataset.objects.get(name=dataset_name)
    summary.counts["excerpts prepared"] = record_excerpts_prepare(dataset_id=dataset.pk)
    _new_responses_to_study(summary, dataset, before, actor, responses_as_candidates)
    audit_record(
        action=AuditEvent.Action.DATA_IMPORTED,
        actor=actor,
        details={
            "dataset": dataset_name,
            "replace": replace,
            "counts": dict(summary.counts),
            # What each table or code family read, fell back on and ignored, and why rows were
            # skipped or look wrong: whether the cohort came through whole, kept with the record
            # of the import (names of tables, vocabularies and columns, never patient text).
            "sources": _largest(
                {name: dict(c) for name, c in summary.sources.items()},
                key=lambda counts: sum(counts.values()),
            ),
            "skipped": _largest(dict(summary.skipped), key=int),
            "warnings": _largest(dict(summary.warnings), key=int),
        },
    )
    return summary


# Entries per part of an import's audit record: a MEDS cohort may hold thousands of code
# families; the largest are kept and the rest summed under "(others)".
AUDIT_ENTRIES = 100


def _largest(entries: dict[str, Any], *, key: Callable[[Any], int]) -> dict[str, Any]:
    if len(entries) <= AUDIT_ENTRIES:
        return entries
    ranked = sorted(entries.items(), key=lambda item: -key(item[1]))
    kept = dict(ranked[:AUDIT_ENTRIES])
    kept["(others)"] = {
        "entries": len(ranked) - AUDIT_ENTRIES,
        "rows": sum(key(v) for _, v in ranked[AUDIT_ENTRIES:]),
    }
    return kept


def _new_responses_to_study(
    summary: ImportSummary,
    dataset: Dataset,
    before: set[int],
    actor: User | None,
    as_candidates: bool,
) -> None:
    new = [
        r
        for r in ModelResponse.objects.filter(instruction__dataset=dataset)
        .select_related("instruction")
        .order_by("pk")
        if r.pk not in before
    ]
    if not new:
        return
    if as_candidates:
        summary.counts["responses kept as candidates"] = len(new)
        return
    study = study_first_round(dataset=dataset, actor=actor)
    try:
        change = study_add_responses(study=study, responses=new, source="import", actor=actor)
    except StudyError:
        summary.counts["responses kept as candidates"] = len(new)
        summary.skipped[
            f"responses kept as candidates: reviews of {study.name} have started on their "
            "instructions (add them to a new round)"
        ] += len(new)
        return
    summary.counts[f"responses added to {study.name}"] = change.added
