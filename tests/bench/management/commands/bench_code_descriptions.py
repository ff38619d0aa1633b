"""Benchmark attaching code descriptions to an imported MEDS cohort (``import_code_descriptions``).

Writes bench_import's MIMIC-shaped cohort (``--events`` rows, thousands of distinct codes)
without its codes file, imports it, then attaches a code,description CSV that describes the
labs by item (``LAB//50912``, so each is matched by prefix), the medications and diagnoses by
whole code. Prints the import's seconds, the service's seconds by phase (reading the file, the
renaming in the database, the per-patient recount, the excerpts), and, as the baseline, the
bare SQL: one ``UPDATE … FROM`` of the same rows from the same scratch table, run again on a
copy of the names (rolled back). The dataset is synthetic and deleted afterwards.
"""

import csv
import tempfile
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

from review.importers import import_release
from review.importers.descriptions import (
    describe,
    patients_count_undescribed,
    read_descriptions,
    undescribed_pairs,
)
from review.importers.scratch import ScratchTable, drop_scratch_tables, scratch_tables
from review.models import Dataset, Event, Patient
from review.services.code_descriptions import code_descriptions_apply
from review.services.excerpts import record_excerpts_prepare
from tests.bench.management.commands.bench_import import (
    MIMIC_DIAGNOSIS_CODES,
    MIMIC_DRUG_CODES,
    MIMIC_LAB_CODES,
    write_mimic_bench,
)

DATASET = "bench-code-descriptions"


class Command(BaseCommand):
    help = (
        "Time import_code_descriptions on a MIMIC-shaped MEDS cohort imported without "
        "descriptions, beside the bare SQL UPDATE of the same rows."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--events", type=int, default=100_000)

    def handle(self, *args: object, **options: object) -> None:
        existing = Dataset.objects.filter(name=DATASET).first()
        if existing is not None and not existing.is_synthetic:
            raise CommandError(f"dataset {DATASET!r} exists and is not synthetic: not touched")
        Dataset.objects.filter(name=DATASET).delete()
        n_events = int(options["events"])  # type: ignore[call-overload]
        self.stdout.write(f"database: {connection.vendor}; {n_events:,} MEDS rows, MIMIC-shaped")
        with tempfile.TemporaryDirectory() as folder:
            root = write_mimic_bench(Path(folder) / "mimic", n_events)
            (root / "metadata" / "codes.parquet").unlink()
            dictionary = _write_dictionary(Path(folder) / "labels.csv")
            started = time.perf_counter()
            summary = import_release(root, dataset_name=DATASET, is_synthetic=True)
            imported = time.perf_counter() - started
            events = summary.counts["events"]
            self._row("import (MEDS, no descriptions)", imported, f"{events:,} events")
            try:
                self._describe(dictionary)
            finally:
                Dataset.objects.filter(name=DATASET).delete()

    def _describe(self, dictionary: Path) -> None:
        dataset = Dataset.objects.get(name=DATASET)
        started = time.perf_counter()
        read = read_descriptions(dictionary)
        self._row("read the CSV", time.perf_counter() - started, f"{len(read.descriptions):,}")
        with transaction.atomic():
            baseline, rows = _bare_update(dataset.pk, read.descriptions)
            transaction.set_rollback(True)
        self._row("baseline: bare UPDATE ... FROM", baseline, f"{rows:,} rows")
        started = time.perf_counter()
        summary = code_descriptions_apply(dataset_name=DATASET, read=read)
        applied = time.perf_counter() - started
        self._row("code_descriptions_apply", applied, f"{summary.events_renamed:,} renamed")
        self.stdout.write(f"  ratio to the bare UPDATE: {applied / baseline:.2f}x")
        started = time.perf_counter()
        patients_count_undescribed(dataset_id=dataset.pk)
        self._row("per-patient recount, run again alone", time.perf_counter() - started, "")
        started = time.perf_counter()
        prepared = record_excerpts_prepare(dataset_id=dataset.pk)
        self._row("excerpts prepared", time.perf_counter() - started, f"{prepared:,}")

    def _row(self, label: str, seconds: float, note: str) -> None:
        self.stdout.write(f"  {label:<36} {seconds:>8.2f} s  {note}")


def _write_dictionary(path: Path) -> Path:
    """Labs and vitals by item (matched by prefix), medications and diagnoses by whole code."""
    rows = [(f"LAB//{50_800 + i}", f"Lab test {i}") for i in range(MIMIC_LAB_CODES)]
    rows += [("LAB//220045", "Heart Rate"), ("LAB//220210", "Respiratory Rate")]
    rows += [
        (f"MEDICATION//DRUG{i}//Administered", f"Drug {i} administered")
        for i in range(MIMIC_DRUG_CODES)
    ]
    rows += [
        (f"DIAGNOSIS//ICD//10//D{i:04d}", f"Diagnosis {i}") for i in range(MIMIC_DIAGNOSIS_CODES)
    ]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["code", "description"])
        writer.writerows(rows)
    return path


def _bare_update(dataset_id: int, descriptions: dict[str, str]) -> tuple[float, int]:
    """The same renaming as one statement, the pairs worked out beforehand (not timed)."""
    changes = [
        (code, name, new)
        for code, name in undescribed_pairs(dataset_id=dataset_id)
        if (new := describe(code, descriptions)) is not None
    ]
    (table,) = scratch_tables(
        ScratchTable(
            "bench_descriptions_scratch",
            [("code", "TEXT NOT NULL"), ("old_name", "TEXT NOT NULL"), ("new_name", "TEXT")],
        )
    )
    table.insert(changes)
    events, patients = Event._meta.db_table, Patient._meta.db_table
    in_dataset = f"SELECT id FROM {patients} WHERE dataset_id = %s"  # noqa: S608 - our table
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {events} AS e SET name = t.new_name FROM {table.name} t "  # noqa: S608
            f"WHERE e.code = t.code AND e.name = t.old_name AND e.patient_id IN ({in_dataset})",
            [dataset_id],
        )
        rows = cursor.rowcount
    seconds = time.perf_counter() - started
    drop_scratch_tables([table])
    return seconds, rows
