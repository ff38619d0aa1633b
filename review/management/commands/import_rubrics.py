"""Import rubrics from a HealthBench-shaped JSONL file (review.services.rubric_jsonl)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.models import Dataset, User
from review.services.rubric_jsonl import rubrics_import
from review.services.rubrics import RubricError


class Command(BaseCommand):
    help = (
        "Read rubrics from JSONL in HealthBench's shape ({prompt_id, rubrics: [{criterion, "
        "points, tags}]}; other fields ignored; a byte-order mark is fine); prompt_id names an "
        "instruction of --dataset. Each becomes the "
        "instruction's next version, in review: a second clinician (--reviewer) accepts it "
        "before it is graded."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path")
        parser.add_argument("--dataset", required=True)
        parser.add_argument("--reviewer", default="", help="email of the reviewing clinician")

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"no dataset {options['dataset']!r}")
        reviewer = None
        if options["reviewer"]:
            reviewer = User.objects.filter(email=str(options["reviewer"]).lower()).first()
            if reviewer is None:
                raise CommandError(f"no user {options['reviewer']!r}")
        path = Path(str(options["path"]))
        try:
            with path.open(encoding="utf-8") as handle:
                result = rubrics_import(
                    dataset=dataset,
                    lines=handle,
                    source_name=path.name,
                    actor=None,
                    reviewer=reviewer,
                )
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        except RubricError as exc:
            raise CommandError(f"nothing imported: {exc.message}") from None
        self.stdout.write(
            f"Imported {len(result.created)} rubric(s) into {dataset.name}, in review; "
            f"skipped {len(result.skipped)}."
        )
        for line, prompt_id, why in result.skipped:
            self.stdout.write(f"  line {line} ({prompt_id}): {why}")
