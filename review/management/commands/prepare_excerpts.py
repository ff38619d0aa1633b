from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from review.models import Dataset, Instruction
from review.services.excerpts import record_excerpts_prepare


class Command(BaseCommand):
    help = (
        "Rank and render the record excerpt of every instruction that has none current, so no "
        "clinician's first view pays for it. Imports do this themselves; run it for datasets "
        "imported by an older version, or after changing the excerpt template or TIME_ZONE."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dataset", action="append", help="dataset name (repeatable; default all)"
        )
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: object, **options: object) -> None:
        names = options["dataset"] or list(Dataset.objects.values_list("name", flat=True))
        assert isinstance(names, list)
        for name in names:
            dataset = Dataset.objects.filter(name=name).first()
            if dataset is None:
                raise CommandError(f"no dataset named {name!r}")
            total = Instruction.objects.filter(dataset=dataset, patient__isnull=False).count()
            with tqdm(
                total=total,
                desc=f"excerpts of {name}",
                disable=bool(options["no_progress"]),
                file=self.stderr._out,
            ) as bar:
                # Counts only those it prepares; the bar ends short by those already current.
                prepared = record_excerpts_prepare(dataset_id=dataset.pk, progress=bar.update)
            self.stdout.write(f"{name}: {prepared} of {total} excerpts prepared")
