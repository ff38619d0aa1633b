"""Assign rubric work in bulk: authors (with second-clinician reviewers), or graders."""

from itertools import cycle

from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.models import Dataset, Instruction, Rubric, Study, User
from review.selectors.assignments import clinicians_approved
from review.services.grading import gradings_assign
from review.services.rubrics import RubricError, rubric_assign


def _clinicians(raw: str) -> list[User]:
    approved = {u.email: u for u in clinicians_approved()}
    emails = [e.strip().lower() for e in raw.split(",") if e.strip()]
    missing = [e for e in emails if e not in approved]
    if missing:
        raise CommandError(f"not approved clinicians (today): {', '.join(missing)}")
    return [approved[e] for e in emails]


class Command(BaseCommand):
    help = (
        "Write: each instruction of --dataset with no rubric yet (or every one with --revise, "
        "except those with a version open) gets an author from --authors in turn and a reviewer "
        "from --reviewers in turn, never the author. Grade (--grade): each instruction's latest "
        "accepted version is graded by every clinician of --clinicians, on --study's responses."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True)
        parser.add_argument("--instructions", default="", help="comma-separated instruction ids")
        parser.add_argument("--authors", default="")
        parser.add_argument("--reviewers", default="")
        parser.add_argument("--revise", action="store_true")
        parser.add_argument("--grade", action="store_true")
        parser.add_argument("--clinicians", default="")
        parser.add_argument("--study", type=int, default=None, help="round (default: latest)")

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"no dataset {options['dataset']!r}")
        instructions = dataset.instructions.order_by("instruction_id")
        wanted = [i.strip() for i in str(options["instructions"]).split(",") if i.strip()]
        if wanted:
            instructions = instructions.filter(instruction_id__in=wanted)
        if options["grade"]:
            self._grade(dataset, list(instructions), options)
        else:
            self._write(list(instructions), options)

    def _write(self, instructions: list[Instruction], options: dict[str, object]) -> None:
        authors = _clinicians(str(options["authors"]))
        reviewers = _clinicians(str(options["reviewers"]))
        if not authors or not reviewers:
            raise CommandError("name --authors and --reviewers (a second clinician reviews)")
        if len({*authors, *reviewers}) < 2:
            raise CommandError("the reviewer must be a second clinician: name two people")
        versions = Rubric.objects.filter(instruction__in=instructions)
        open_ids = set(
            versions.exclude(status=Rubric.Status.ACCEPTED).values_list("instruction_id", flat=True)
        )
        having = set(versions.values_list("instruction_id", flat=True))
        next_author, next_reviewer = cycle(authors), cycle(reviewers)
        created = 0
        for instruction in instructions:
            if instruction.pk in open_ids or (instruction.pk in having and not options["revise"]):
                continue
            author = next(next_author)
            reviewer = next(next_reviewer)
            while reviewer.pk == author.pk:
                reviewer = next(next_reviewer)
            rubric_assign(instruction=instruction, author=author, reviewer=reviewer, actor=None)
            created += 1
        self.stdout.write(f"Asked for {created} rubric(s) ({len(instructions)} instructions).")

    def _grade(
        self, dataset: Dataset, instructions: list[Instruction], options: dict[str, object]
    ) -> None:
        clinicians = _clinicians(str(options["clinicians"]))
        if not clinicians:
            raise CommandError("name the graders with --clinicians")
        studies = Study.objects.filter(dataset=dataset).order_by("-round")
        if options["study"] is not None:
            studies = studies.filter(round=int(str(options["study"])))
        study = studies.first()
        if study is None:
            raise CommandError(f"{dataset.name} has no such study")
        latest: dict[int, Rubric] = {}
        for rubric in Rubric.objects.filter(
            instruction__in=instructions, status=Rubric.Status.ACCEPTED
        ).order_by("instruction_id", "-version"):
            latest.setdefault(rubric.instruction_id, rubric)
        created = 0
        try:
            for rubric in latest.values():
                created += len(
                    gradings_assign(rubric=rubric, study=study, clinicians=clinicians, actor=None)
                )
        except RubricError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Created {created} grading assignment(s) for {len(latest)} rubric(s).")
