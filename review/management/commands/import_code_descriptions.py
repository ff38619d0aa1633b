from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.importers import ImportFailed
from review.services.code_descriptions import code_descriptions_import


class Command(BaseCommand):
    help = (
        "Attach code descriptions to an imported dataset: a codes file in MEDS's metadata shape "
        "(codes.parquet: code, description) or a CSV/TSV with the columns code and description "
        "(a MIMIC dictionary converted: LAB//50912,Creatinine). Events named by their raw code "
        "take the description (a code's longest //-prefix counts: LAB//50912 describes "
        "LAB//50912//mg/dL); record search reads the new names at once and the changed "
        "records' excerpts are prepared again. All or nothing; audited."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--dataset", required=True, help="the dataset's name")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="rename every event whose code the file describes, not only those still "
            "named by their code",
        )

    def handle(self, *args: object, **options: object) -> None:
        try:
            summary = code_descriptions_import(
                dataset_name=str(options["dataset"]),
                path=Path(str(options["path"])),
                replace=bool(options["replace"]),
            )
        except ImportFailed as exc:
            raise CommandError(exc.render()) from None
        self.stdout.write(
            self.style.SUCCESS(f"Descriptions from {summary.file} attached to {summary.dataset!r}")
        )
        for label, value in (
            ("codes described in the file", summary.codes_in_file),
            ("rows without a description (skipped)", summary.rows_without_description),
            ("descriptions cut to 500 characters", summary.descriptions_cut),
            ("codes of the dataset given a name", summary.codes_described),
            ("events renamed", summary.events_renamed),
            ("records changed", summary.records_changed),
            ("events still named by their code", summary.events_still_undescribed),
            ("excerpts prepared", summary.excerpts_prepared),
        ):
            self.stdout.write(f"  {label:<45} {value:>10,}")
        if summary.codes_in_file and not summary.codes_described:
            self.stdout.write(
                self.style.WARNING(
                    "  none of the file's codes names an event of this dataset still named by "
                    "its code (another dataset? codes written otherwise? --replace?)"
                )
            )
