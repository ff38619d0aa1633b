from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.models import Dataset
from review.selectors.datasets import dataset_contents
from review.services.datasets import DatasetError, dataset_delete


class Command(BaseCommand):
    help = (
        "Delete a dataset and everything in it (records, instructions, responses, scores, "
        "reports), audited. Prints what it holds first; --yes to delete."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--yes", action="store_true", help="delete (else only count)")
        parser.add_argument(
            "--with-reviews",
            action="store_true",
            help="also delete its reviews (clinicians' judgements), which are kept otherwise",
        )

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=options["name"]).first()
        if dataset is None:
            raise CommandError(f"No dataset is named {options['name']!r}.")
        contents = dataset_contents(dataset)
        self.stdout.write(
            f"Dataset {dataset.name}: "
            + ", ".join(f"{count:,} {kind}" for kind, count in contents.items())
        )
        if not options["yes"]:
            self.stdout.write("Nothing deleted: run again with --yes to delete it.")
            return
        try:
            dataset_delete(dataset=dataset, with_reviews=bool(options["with_reviews"]))
        except DatasetError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(f"Dataset {dataset.name} deleted."))
