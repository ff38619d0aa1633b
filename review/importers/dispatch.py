"""Importing a release: what the files under a path are, and loading them in one transaction.

A path may hold any subset of a MedAlign release (its TSV/CSV tables and EHR XML records), a
MEDS dataset and OMOP CDM tables, side by side. ``import_release`` sorts the files out
(``discover``; MEDS shards and OMOP tables by their own finders), refuses the import before
reading anything when a file is too large or nothing is importable, then loads, in order: the
release's tables, its XML records, the MEDS dataset, the OMOP tables; then links instructions
to their patients and drops the scores that changed inputs made stale.

Everything happens in one transaction: a problem anywhere rolls back everything, and the
database is left exactly as it was. Readers gather every problem of a stage before the import
is refused, so a file reports all of its bad rows at once.
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection, models, transaction

from review.models import Dataset, Event, Patient
from scoring.models import MetricScore

from .bulk import bulk_load_begin, estimate_events
from .errors import ImportFailed, Problem
from .medalign import KIND_ORDER, ReleaseReader
from .meds import find_meds_root, load_meds
from .omop import find_omop_tables, find_unread_omop_tables, load_omop
from .run import ImportRun, ImportSummary, ProgressFn
from .tables import TABLE_SUFFIXES, read_header
from .writers import record_excerpts_invalidate


def classify_table(header: list[str]) -> str | None:
    """Which release table a header belongs to (``KIND_ORDER``'s kinds), by its columns."""
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


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block, and restored however it ends.

    An import allocates millions of short-lived row tuples and lists that form no cycles
    (reference counting frees them), yet the collector walks them, and every older object,
    hundreds of times (docs/benchmarks.md). Imports run in management commands
    (``import_medalign``, ``load_demo``), never in a web request, so pausing the process's
    collector for one is safe; a caller's own pause is kept."""
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
        run = ImportRun(dataset, replace=replace, progress=progress)
        release = ReleaseReader(run)
        for reason in ignored:
            run.summary.skipped[reason] += 1
        for kind in KIND_ORDER:
            for table in tables[kind]:
                release.load_table(kind, table)
        run.problems.raise_if_any()
        # Before any event is written (see bulk.py); rolled back with everything else.
        meds_shards = sorted((meds_root / "data").rglob("*.parquet")) if meds_root else []
        bulk = bulk_load_begin(
            estimate_events([*xml_files, *meds_shards], omop_tables),
            # Only records already in the dataset are replaced (their events deleted).
            replaces=replace and Patient.objects.filter(dataset=dataset).exists(),
        )
        for xml_file in xml_files:
            release.load_xml(xml_file)
        run.problems.raise_if_any()
        if meds_root is not None:
            load_meds(run, meds_root)
            run.problems.raise_if_any()
        if omop_tables:
            load_omop(run, omop_tables, omop_unread)
            run.problems.raise_if_any()
        if bulk is not None:
            bulk.finish()
        release.link_patients()
        release.changed_instructions.update(
            i.pk
            for i in release.instructions.values()
            if i.pk in release.original_questions and release.original_questions[i.pk] != i.question
        )
        record_excerpts_invalidate(instructions=release.changed_instructions)
        if release.changed_responses or release.changed_instructions:
            MetricScore.objects.filter(
                models.Q(response_id__in=release.changed_responses)
                | models.Q(response__instruction_id__in=release.changed_instructions)
            ).delete()
        dataset.save(update_fields=["updated_at"])
    if connection.vendor == "postgresql" and run.summary.counts["events"] >= 10_000:
        # Fresh statistics after a large load: without them PostgreSQL plans the record pages
        # as if the events table were small, and deep timeline pages slow down several times.
        # Only the columns the record pages' indexes hold (their filters and sort keys): the
        # values, texts and attributes are read, never planned on, and are most of the
        # ANALYZE's work (a column list leaves autovacuum's count of changed rows as it is, so
        # autovacuum still gathers the rest in the background).
        columns = ", ".join(f'"{column}"' for column in planned_event_columns())
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {Event._meta.db_table} ({columns})")  # noqa: S608 - model's
    return run.summary


def planned_event_columns() -> list[str]:
    """The event table's columns in the model's indexes, in their order, once each."""
    fields = dict.fromkeys(
        name.lstrip("-") for index in Event._meta.indexes for name in index.fields
    )
    columns = []
    for name in fields:
        field = Event._meta.get_field(name)
        assert isinstance(field, models.Field) and field.column  # indexes hold concrete fields
        columns.append(field.column)
    return columns


def total_bytes(path: Path | str) -> int:
    """The size of the file at ``path``, or of every file under it: the progress bar's end."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
