"""Assign a dataset's instructions to clinicians with a target overlap, balanced."""

import secrets

from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.access import can_unblind, unblinding_roles
from review.models import Dataset, Instruction, Study, User
from review.selectors.adaptive import adaptive_state
from review.selectors.assignments import clinicians_approved, instructions_for_assignment
from review.selectors.studies import study_current
from review.services.adaptive import adaptive_assign_wave, study_set_adaptive
from review.services.assignment_design import assignments_create_mixed
from review.services.assignments import (
    MAX_OVERLAP,
    AssignmentError,
    assignments_create,
    assignments_plan,
)
from review.services.studies import StudyError
from scoring.reports.study_design import study_design


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
        parser.add_argument(
            "--repeat-reviewers",
            action="store_true",
            help=(
                "also assign clinicians who hold an instruction in another round with some of "
                "the same responses (a copied round): left out by default, since they would "
                "see what is new beside what they ranked"
            ),
        )
        parser.add_argument(
            "--mode",
            choices=["uniform", "adaptive"],
            default="",
            help=(
                "adaptive: make the study adaptive (before anyone is assigned in it), then draw "
                "its next wave; an adaptive study draws its next wave without --mode"
            ),
        )
        parser.add_argument("--predictor", type=int, default=None, help="metric config id")
        parser.add_argument("--min-probability", type=float, default=0.1)
        parser.add_argument(
            "--budget", type=float, default=0.4, help="expected share of a wave reviewed"
        )
        parser.add_argument("--waves", type=int, default=5)
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument(
            "--recommend",
            action="store_true",
            help="compare study designs on the round's reviews so far and recommend the one "
            "with the fewest clinician reviews that still gives every report section; "
            "writes nothing",
        )
        parser.add_argument(
            "--double",
            type=int,
            default=0,
            metavar="N",
            help="the mixed design (with --overlap 1): a second clinician on N of the "
            "instructions, drawn with --seed and spread over patients",
        )
        parser.add_argument("--margin", type=float, default=5.0, help="points, for --recommend")
        parser.add_argument(
            "--agreement-half-width",
            type=float,
            default=None,
            help="for --recommend: size the agreement subset so the human ceiling's interval "
            "is this narrow (default: enough patients for an interval at all)",
        )

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
        # Accounts that can read model names (researcher, admin, staff): their reviews are
        # flagged and left out of reports. Left out of the default pool (the demo's admin was
        # given the only OMOP review), assigned when named, with a warning.
        unblinding = {e: unblinding_roles(u) for e, u in approved.items() if can_unblind(u)}
        if emails:
            missing = [e for e in emails if not User.objects.filter(email=e).exists()]
            if missing:
                raise CommandError(f"no such user(s): {', '.join(missing)}")
            not_approved = [e for e in emails if e not in approved]
            if not_approved:
                raise CommandError(f"not approved clinicians (today): {', '.join(not_approved)}")
            clinicians = [approved[e] for e in emails]
            for email in emails:
                if email in unblinding:
                    self.stdout.write(
                        f"Warning: {email} can read model names "
                        f"({', '.join(unblinding[email])}): their reviews are flagged and left "
                        "out of reports unless a researcher includes them."
                    )
        else:
            clinicians = [u for e, u in approved.items() if e not in unblinding]
            for email, roles in unblinding.items():
                self.stdout.write(
                    f"skipped {email}: can read model names ({', '.join(roles)}); name it with "
                    "--clinicians to assign it knowingly (its reviews are left out of reports)."
                )
        if not clinicians:
            raise CommandError(
                "no approved clinicians to assign to"
                + (
                    f" ({len(unblinding)} skipped: they can read model names; name them with "
                    "--clinicians to assign them knowingly)"
                    if unblinding and not emails
                    else ""
                )
            )
        target = study or study_current(dataset)
        adaptive = target is not None and target.assignment_mode == Study.AssignmentMode.ADAPTIVE
        if adaptive and options["mode"] == "uniform":
            raise CommandError(f"{target.name} is adaptive: it is assigned in waves")  # type: ignore[union-attr]
        instructions = instructions_for_assignment(
            dataset=dataset,
            specialty=str(options["specialty"]),
            category=str(options["category"]),
        )
        # Before the adaptive branch: a recommendation writes nothing, whatever the round.
        if options["recommend"]:
            self._recommend(dataset, target, list(instructions), clinicians, options)
            return
        if options["double"] and (options["mode"] == "adaptive" or adaptive):
            raise CommandError("--double is a uniform design: an adaptive round draws waves")
        if options["mode"] == "adaptive" or adaptive:
            self._adaptive(target, clinicians, overlap, options)
            return
        if options["double"]:
            self._mixed(study, list(instructions), clinicians, overlap, options)
            return
        repeat = bool(options["repeat_reviewers"])
        if options["dry_run"]:
            plan = assignments_plan(
                instructions=instructions,
                clinicians=clinicians,
                overlap=overlap,
                study=study,
                repeat_reviewers=repeat,
            )
        else:
            plan = assignments_create(
                instructions=instructions,
                clinicians=clinicians,
                overlap=overlap,
                actor=None,
                study=study,
                repeat_reviewers=repeat,
            )
        verb = "Would create" if options["dry_run"] else "Created"
        self.stdout.write(
            f"{verb} {plan.created} assignments for {plan.instructions} instructions "
            f"(overlap {overlap}; {plan.already_full} already full; {plan.short} left short)."
        )
        for email, n in plan.per_clinician.items():
            self.stdout.write(f"  {email}: +{n}")
        if plan.repeats_left_out:
            rounds = ", ".join(str(r) for r in plan.shared_rounds)
            self.stdout.write(
                f"{plan.repeats_left_out} (instruction, clinician) pairs left out on "
                f"{plan.shared_instructions} instructions: those clinicians hold them in round "
                f"{rounds} with some of the same responses and would see what is new beside "
                "what they ranked (--repeat-reviewers assigns them knowingly)."
            )

    def _adaptive(
        self, study: Study | None, clinicians: list[User], overlap: int, options: dict[str, object]
    ) -> None:
        """Record the adaptive design if the study is still uniform, then draw the next wave
        (or, with --dry-run, show it). Prints the stopping rule's verdict."""
        if study is None:
            raise CommandError("the dataset has no study to assign in")
        try:
            if study.assignment_mode != Study.AssignmentMode.ADAPTIVE:
                if options["dry_run"]:
                    raise CommandError("--dry-run shows the next wave of an adaptive study only")
                study = study_set_adaptive(
                    study=study,
                    actor=None,
                    predictor_config_id=options["predictor"],  # type: ignore[arg-type]
                    predictor=f"metric config {options['predictor']}"
                    if options["predictor"] is not None
                    else "",
                    overlap=overlap,
                    min_probability=float(options["min_probability"]),  # type: ignore[arg-type]
                    budget=float(options["budget"]),  # type: ignore[arg-type]
                    waves=int(options["waves"]),  # type: ignore[call-overload]
                    seed=options["seed"],  # type: ignore[arg-type]
                )
                self.stdout.write(f"{study.name} is now adaptive: {study.assignment_params}")
            if options["dry_run"]:
                state = adaptive_state(study)
            else:
                result, state = adaptive_assign_wave(study=study, clinicians=clinicians, actor=None)
                self.stdout.write(
                    f"Wave {result.wave}: {result.drawn} of {result.walked} instructions drawn "
                    f"({result.expected:.1f} expected); {result.assignments.created} "
                    "assignments created."
                )
        except StudyError as exc:
            raise CommandError(str(exc)) from exc
        if options["dry_run"] and state.next_wave is not None:
            self.stdout.write(
                f"Next: wave {state.next_wave}, {state.drawn_next} of {len(state.plan)} "
                "instructions would be reviewed:"
            )
            for row in state.plan:
                self.stdout.write(
                    f"  {row.code}: p={row.probability:.3f} {'drawn' if row.drawn else ''}"
                )
        self.stdout.write(state.message)

    def _recommend(
        self,
        dataset: Dataset,
        study: Study | None,
        instructions: list[Instruction],
        clinicians: list[User],
        options: dict[str, object],
    ) -> None:
        """The design calculator's comparison for these instructions and clinicians."""
        margin = float(options["margin"])  # type: ignore[arg-type]
        if not 0.5 <= margin <= 50:
            raise CommandError("--margin is in points, between 0.5 and 50")
        half = options["agreement_half_width"]
        plan = study_design(
            dataset=dataset,
            study=study,
            instructions=len(instructions),
            patients=len({i.person_id or f"i{i.pk}" for i in instructions}),
            clinicians=len(clinicians),
            margin=margin / 100.0,
            half_width=None if half is None else float(half),  # type: ignore[arg-type]
        )
        w = self.stdout.write
        where = f"{study.name}" if study is not None else "the first round"
        w(
            f"Design for {dataset.name}, {where}: {plan['instructions']} instructions, "
            f"{plan['patients']} patients, {plan['clinicians']} clinicians; "
            f"{plan['reviews_made']} reviews so far"
            + (f"; predictor {plan['predictor_label']}" if plan["predictor_label"] else "")
        )
        w(
            f"Agreement subset: {plan['agreement_subset']} instructions with two clinicians "
            f"(human ceiling expected within ±{plan['human_ceiling_half_width']:.2f})"
        )
        for note in plan["notes"]:
            w(f"Note: {note}")
        every = plan["every"]
        for block in [*plan["targets"], *([every] if every else [])]:
            w(f"Target: {block['label']}")
            for row in block["rows"]:
                mark = "*" if row["recommended"] else " "
                reviews = (
                    f"{row['reviews']} reviews ({row['ratio_text']} the clinician reviews of "
                    "uniform overlap-2 classical)"
                    if row["reviews"] is not None
                    else f"not reached ({row['why']})"
                )
                lost = "; ".join(row["gives_up"]) or "nothing"
                w(f" {mark} {row['label']}: {reviews}; gives up: {lost}")
        pick = every["recommended"] if every else None
        if pick is None:
            w("Recommended: none. " + (every["reason"] if every else "Nothing to plan."))
            return
        how = {
            True: f"--overlap 1 --double {plan['agreement_subset']}",
            False: f"--overlap {pick['key'].split('-')[0].removeprefix('overlap')}",
        }[pick["key"].startswith("mixed")]
        if "adaptive" in pick["key"]:
            how = f"--mode adaptive {how}"
        w(
            f"Recommended: {pick['label']}: {pick['reviews']} clinician reviews "
            f"({pick['ratio_text']} the clinician reviews of uniform overlap-2 classical, "
            f"{pick['more']} more); assign with {how}"
        )

    def _mixed(
        self,
        study: Study | None,
        instructions: list[Instruction],
        clinicians: list[User],
        overlap: int,
        options: dict[str, object],
    ) -> None:
        doubled = int(options["double"])  # type: ignore[call-overload]
        if overlap != 1:
            raise CommandError("--double is the mixed design: use it with --overlap 1")
        if not 0 < doubled <= len(instructions):
            raise CommandError(f"--double must be between 1 and {len(instructions)}")
        if options["dry_run"]:
            raise CommandError("--double has no --dry-run; --recommend shows the plan")
        seed = options["seed"]
        seed = secrets.randbelow(2**31) if seed is None else int(seed)  # type: ignore[call-overload]
        try:
            first, second, subset = assignments_create_mixed(
                instructions=instructions,
                clinicians=clinicians,
                doubled=doubled,
                seed=seed,
                actor=None,
                study=study,
                repeat_reviewers=bool(options["repeat_reviewers"]),
            )
        except AssignmentError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"Created {first.created + second.created} assignments: one clinician on "
            f"{first.instructions} instructions, a second on {len(subset)} (the agreement "
            f"subset, seed {seed}; {first.short + second.short} left short)."
        )
