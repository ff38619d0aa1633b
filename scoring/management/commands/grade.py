"""manage.py grade: grade a dataset's responses against their accepted rubrics with a local
model or an allowlisted endpoint."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.models import Dataset
from scoring.generation.runs import model_choices
from scoring.grading import runs as grading
from scoring.models import GradingBatch, GradingRun
from scoring.runs import machinery
from scoring.runs.selectors import run_progress


class Command(BaseCommand):
    help = (
        "Grade every response of a dataset on every criterion of its instruction's latest "
        "accepted rubric with a model folder under GENERATION_MODEL_DIR or an allowlisted "
        "endpoint: one greedy call per (response, criterion); an answer that does not parse is "
        "kept as missing. Verdicts that exist are never asked again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", help="dataset name")
        parser.add_argument("--model", help="local:<folder> or endpoint:<id> (--list-models)")
        parser.add_argument("--list-models", action="store_true")
        parser.add_argument("--record-tokens", type=int, default=2048)
        parser.add_argument("--max-new-tokens", type=int, default=256)
        parser.add_argument("--retries", type=int, default=2)
        parser.add_argument("--inline", action="store_true", help="run the batches here")
        parser.add_argument("--resume", type=int, metavar="RUN_ID", help="resume a run")

    def handle(self, *args: object, **options: object) -> None:
        if options["list_models"]:
            for choice in model_choices():
                self.stdout.write(f"{choice.key}\t{choice.description}")
            return
        inline = bool(options["inline"])
        resume = options["resume"]
        if isinstance(resume, int):
            run = GradingRun.objects.filter(pk=resume).first()
            if run is None:
                raise CommandError(f"no grading run {resume}")
            run = grading.grading_run_resume(run=run, enqueue=not inline)
        else:
            dataset = Dataset.objects.filter(name=options["dataset"]).first()
            if dataset is None or not options["model"]:
                raise CommandError("--dataset (an existing dataset's name) and --model are needed")
            try:
                run = grading.grading_run_create(
                    dataset=dataset,
                    model=str(options["model"]),
                    options={
                        "record_tokens": options["record_tokens"],
                        "max_new_tokens": options["max_new_tokens"],
                        "retries": options["retries"],
                    },
                    enqueue=not inline,
                )
            except grading.GradingRunError as exc:
                raise CommandError(str(exc)) from None
        if inline:
            pending = GradingBatch.objects.filter(run=run, status=machinery.PENDING)
            for batch_id in pending.values_list("pk", flat=True):
                try:
                    grading.grading_batch_execute(batch_id=batch_id)
                except Exception as exc:  # recorded on the batch; the run shows it
                    self.stderr.write(f"batch {batch_id} failed: {grading.describe(exc)}")
        run.refresh_from_db()
        progress = run_progress(run)
        self.stdout.write(
            f"grading run {run.pk}: {run.status}, {progress.produced} of {progress.total} "
            f"verdicts ({run.config.label})"
        )
