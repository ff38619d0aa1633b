"""The import service: runs an importer and records it in the audit trail."""

from pathlib import Path

from review.importers import ImportSummary, import_release
from review.importers.loader import ProgressFn
from review.models import AuditEvent, Dataset, User

from .audit import audit_record
from .excerpts import record_excerpts_prepare


def dataset_import(
    *,
    path: Path | str,
    dataset_name: str,
    replace: bool = False,
    actor: User | None = None,
    progress: ProgressFn | None = None,
    description: str = "",
    is_synthetic: bool = False,
) -> ImportSummary:
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
    dataset_id = Dataset.objects.values_list("pk", flat=True).get(name=dataset_name)
    summary.counts["excerpts prepared"] = record_excerpts_prepare(dataset_id=dataset_id)
    audit_record(
        action=AuditEvent.Action.DATA_IMPORTED,
        actor=actor,
        details={"dataset": dataset_name, "replace": replace, "counts": dict(summary.counts)},
    )
    return summary
