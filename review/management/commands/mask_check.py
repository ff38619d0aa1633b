"""List the responses whose text names a model, as clinicians would see them masked, and
refresh the "names a model" flag the Django admin filters on, and list the near misses: words
left as written that look like a name (a name's own word outside a self-reference, "Atlas",
"Gemini"; a word one edit from a distinctive name, "Mixtrall").

Every response is masked when a clinician sees it, flagged or not, against the same names as
here: every model name of the dataset (``review.selectors.reviews.masking_names``). The flag
and these lists are for an admin to confirm the heuristic's hits, and to spot what it missed.
Prints the words only, never whole responses (they can quote the record).
"""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from review import lexicon
from review.blinding import model_name_hits, near_misses
from review.models import Dataset, ModelResponse
from review.selectors.datasets import dataset_model_names, dataset_model_names_forget


class Command(BaseCommand):
    help = "List (and flag) the responses of a dataset whose text names a model or its maker."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True)
        parser.add_argument("--limit", type=int, default=50, help="hits to print (0: none)")

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=str(options["dataset"])).first()
        if dataset is None:
            raise CommandError(f"no dataset {options['dataset']!r}")
        # The names the clinician pages mask against (review.selectors.reviews.masking_names),
        # read fresh: so a response listed here is masked for clinicians as listed.
        dataset_model_names_forget()
        names = dataset_model_names(dataset.pk)
        if not lexicon.wordnet_found():
            self.stdout.write(
                "WordNet not found (METEOR_WORDNET_DIR; `make wordnet`): a model name's "
                "alphabetic words are masked in self-references only, never alone."
            )
        flagged: list[int] = []
        unflagged: list[int] = []
        near: list[tuple[str, str, str]] = []
        with_near = 0
        printed = 0
        limit = int(options["limit"])  # type: ignore[call-overload]
        rows = (
            ModelResponse.objects.filter(instruction__dataset=dataset)
            .order_by("pk")
            .values_list(
                "pk", "instruction__instruction_id", "model_name", "text", "mask_checked_at"
            )
        )
        for pk, instruction_id, model_name, text, checked_at in rows.iterator(chunk_size=2000):
            hits = model_name_hits(text, names)
            (flagged if hits else unflagged).append(pk)
            if hits and printed < limit:
                words = ", ".join(dict.fromkeys(hits))
                self.stdout.write(f"  {instruction_id:<14} {model_name:<30} {words}")
                printed += 1
            missed = near_misses(text, names)
            with_near += bool(missed) and checked_at is None  # not confirmed in the admin
            if missed and len(near) < limit:
                near.append((instruction_id, model_name, ", ".join(missed)))
        ModelResponse.objects.filter(pk__in=flagged).update(names_own_model=True)
        ModelResponse.objects.filter(pk__in=unflagged).update(names_own_model=False)
        self.stdout.write(
            f"{len(flagged)} of {len(flagged) + len(unflagged)} responses had model names "
            "masked for clinicians (any name of the dataset, a family or a maker). Confirm "
            "them in the Django admin (Model responses, filter 'names own model'); "
            f"{with_near} response{' holds' if with_near == 1 else 's hold'} near misses that "
            "await an admin's check (not yet confirmed there), left as written."
        )
        if near:
            self.stdout.write(
                "Near misses, left as written (a name's word outside a self-reference, or one "
                "edit from a name): confirm none of them names a model."
            )
            for instruction_id, model_name, words in near:
                self.stdout.write(f"  {instruction_id:<14} {model_name:<30} {words}")
