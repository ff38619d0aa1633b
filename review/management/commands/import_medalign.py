from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from review.importers import ImportFailed, total_bytes
from review.services.imports import dataset_import


class Command(BaseCommand):
    help = (
        "Import MedAlign release files (a folder holding any subset of them, or one file) into a "
        "dataset: the two TSVs, the instructions and taxonomy CSVs, and EHR XML in both formats; "
        "records may also come as a MEDS dataset (data/*.parquet) or OMOP CDM tables "
        "(person.csv, measurement.csv…). All or nothing; re-running is idempotent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--dataset", required=True, help="dataset name, e.g. medalign-v1.3")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="overwrite rows and records that differ from what is stored",
        )
        parser.add_argument(
            "--responses-as-candidates",
            action="store_true",
            help="keep the imported responses out of every study (an admin adds them later); "
            "by default they join the dataset's latest study unless its reviews have started",
        )
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: object, **options: object) -> None:
        path: Path = options["path"]  # type: ignore[assignment]
        size = total_bytes(path) if path.exists() else 0
        bar = tqdm(
            total=size,
            unit="B",
            unit_scale=True,
            desc="importing",
            disable=bool(options["no_progress"]),
            file=self.stderr._out,
        )
        try:
            summary = dataset_import(
                path=path,
                dataset_name=str(options["dataset"]),
                replace=bool(options["replace"]),
                progress=bar.update,
                responses_as_candidates=bool(options["responses_as_candidates"]),
            )
        except ImportFailed as exc:
            bar.close()
            raise CommandError(exc.render()) from None
        bar.close()
        self.stdout.write(self.style.SUCCESS(f"Imported into dataset {summary.dataset!r}"))
        for file, kind in summary.files.items():
            self.stdout.write(f"  {kind:<14} {file}")
        for label in (
            "patients",
            "encounters",
            "events",
            "notes",
            "taxonomy entries",
            "instructions",
            "references",
            "responses",
            "references updated",
            "responses updated",
            "responses with model names masked",
            "responses with near misses to check",
            "instructions whose record is not loaded yet",
            "excerpts prepared",
        ):
            if label in summary.counts or label in ("patients", "events", "instructions"):
                self.stdout.write(f"  {label:<45} {summary.counts.get(label, 0):>10,}")
        masked = summary.counts.get("responses with model names masked", 0)
        near = summary.counts.get("responses with near misses to check", 0)
        if masked or near:
            self.stdout.write(
                f"  {masked} response{'s' if masked != 1 else ''} had model names masked for "
                f"clinicians; {near} hold{'s' if near == 1 else ''} near misses that await an "
                f"admin's check (manage.py mask_check --dataset {summary.dataset})"
            )
        for label, count in sorted(summary.counts.items()):
            if label.startswith(("responses added to ", "responses kept as candidates")):
                self.stdout.write(f"  {label:<45} {count:>10,}")
        if summary.sources:
            # MEDS and OMOP: did the cohort come through whole, table by table? A row that fell
            # back was read all the same (kept under its source value or as an observation):
            # "read" counts it, "by fallback" says how many of those read did.
            headings = ("read", "by fallback", "ignored")
            width = max(30, *(len(source) for source in summary.sources))
            self.stdout.write(
                f"  {'rows by table or code family':<{width + 2}}"
                + "".join(f"{h:>14}" for h in headings)
            )
            for source, counts in sorted(summary.sources.items()):
                fell_back = counts.get("fell back", 0)
                shown = (counts.get("read", 0) + fell_back, fell_back, counts.get("ignored", 0))
                self.stdout.write(f"    {source:<{width}}" + "".join(f"{n:>14,}" for n in shown))
        if summary.skipped:
            self.stdout.write("  rows skipped:")
            for reason, count in sorted(summary.skipped.items()):
                self.stdout.write(f"    {count:>8,}  {reason}")
        if summary.warnings:
            self.stdout.write("  warnings (read, but check the source):")
            for message, count in sorted(summary.warnings.items()):
                self.stdout.write(f"    {count:>8,}  {message}")
