"""Assign a dataset's instructions to clinicians with a target overlap, balanced."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.models import Dataset, Study, User
from review.selectors.assignments import clinicians_approved, instructions_for_assignment
from review.services.assignments import MAX_OVERLAP, assignments_create, assignments_plan


class Command(BaseCommand):
    help = (
        "Assign instructions (a dataset, optionally one author specialty or category) so that "
        "each has --overlap clinicians, least-loaded first. Existing assignments count; nobody "
        "gets an instruction twice. Without --clinicians: every approved clinician."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True)
        parser.add_argument("--overlap", type=int, default=2)
        parser.add_argument("--specialty", default="")
        parser.add_argument("--category", default="")
        parser.add_argument("--clinicians", default="", help="comma-separated email addresses")
        parser.add_argument(
            "--study",
            type=int,
            default=None,
            help="the round to assign in (default: the dataset's latest study)",
        )
        parser.add_argument("--dry-run", action="store_true", help="show the plan, write nothing")

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"no dataset {options['dataset']!r}")
        study = None
        if options["study"] is not None:
            study = Study.objects.filter(dataset=dataset, round=options["study"]).first()
            if study is None:
                raise CommandError(f"{dataset.name} has no round {options['study']}")
        overlap = int(options["overlap"])  # type: ignore[arg-type]
        if not 1 <= overlap <= MAX_OVERLAP:
            raise CommandError(f"--overlap must be between 1 and {MAX_OVERLAP}")
        approved = {u.email: u for u in clinicians_approved()}
        emails = [e.strip().lower() for e in str(options["clinicians"]).split(",") if e.strip()]
        if emails:
            missing = [e for e in emails if not User.objects.filter(email=e).exists()]
            if missing:
                raise CommandError(f"no such user(s): {', '.join(missing)}")
            not_approved = [e for e in emails if e not in approved]
            if not_approved:
                raise CommandError(f"not approved clinicians (today): {', '.join(not_approved)}")
            clinicians = [approved[e] for e in emails]
        else:
            clinicians = list(approved.values())
        if not clinicians:
            raise CommandError("no approved clinicians to assign to")
        instructions = instructions_for_assignment(
            dataset=dataset,
            specialty=str(options["specialty"]),
            category=str(options["category"]),
        )
        if options["dry_run"]:
            plan = assignments_plan(
                instructions=instructions, clinicians=clinicians, overlap=overlap, study=study
            )
        else:
            plan = assignments_create(
                instructions=instructions,
                clinicians=clinicians,
                overlap=overlap,
                actor=None,
                study=study,
            )
        verb = "Would create" if options["dry_run"] else "Created"
        self.stdout.write(
            f"{verb} {plan.created} assignments for {plan.instructions} instructions "
            f"(overlap {overlap}; {plan.already_full} already full; {plan.short} left short)."
        )
        for email, n in plan.per_clinician.items():
            self.stdout.write(f"  {email}: +{n}")
