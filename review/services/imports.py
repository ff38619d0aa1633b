"""The import service: runs an importer and records it in the audit trail."""

from pathlib import Path

from review.importers import ImportSummary, import_release
from review.importers.loader import ProgressFn
from review.models import AuditEvent, User

from .audit import audit_record


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
    audit_record(
        action=AuditEvent.Action.DATA_IMPORTED,
        actor=actor,
        details={"dataset": dataset_name, "replace": replace, "counts": dict(summary.counts)},
    )
    return summary
