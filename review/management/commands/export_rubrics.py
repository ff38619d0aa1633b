"""Export accepted rubrics as HealthBench-shaped JSONL (review.services.rubric_jsonl)."""

import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.models import Dataset
from review.services.rubric_jsonl import rubrics_export


class Command(BaseCommand):
    help = (
        "Write --dataset's accepted rubrics (the latest version of each instruction, or every "
        "accepted version with --all-versions) as HealthBench's JSONL {prompt_id, prompt, "
        "rubrics: [{criterion, points, tags}], example_tags, ideal_completions_data}, to "
        "--output or standard output. Audited as an export."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True)
        parser.add_argument("--output", default="-")
        parser.add_argument("--all-versions", action="store_true")

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"no dataset {options['dataset']!r}")
        lines = rubrics_export(
            dataset=dataset, actor=None, all_versions=bool(options["all_versions"])
        )
        output = str(options["output"])
        if output == "-":
            for line in lines:
                sys.stdout.write(line)
            return
        count = 0
        with open(output, "w", encoding="utf-8") as handle:
            for line in lines:
                handle.write(line)
                count += 1
        self.stderr.write(f"Wrote {count} rubric(s) to {output}.")
