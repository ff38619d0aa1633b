import time

from django.core.management.base import BaseCommand, CommandError, CommandParser
from kombu.exceptions import OperationalError as BrokerError
from tqdm import tqdm

from review.models import Dataset
from scoring.models import ScoringBatch, ScoringRun
from scoring.runs import metric_configs
from scoring.runs import scoring as scoring_runs
from scoring.runs.machinery import describe
from scoring.runs.selectors import run_progress


class Command(BaseCommand):
    help = (
        "Score a dataset's responses against the clinician reference answers. Work is split into "
        "Celery batches; scores that already exist are never recomputed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", required=True)
        parser.add_argument(
            "--metrics",
            default=",".join(metric_configs.DEFAULT_METRICS),
            help="comma-separated: bertscore,comet,rougeL,bleu,chrf,meteor (and jury)",
        )
        parser.add_argument(
            "--preset",
            choices=sorted(metric_configs.PRESETS),
            help="a fixed set of metrics and models (replaces --metrics), e.g. medalign-helm: "
            "BERTScore distilbert-base-uncased, COMET Unbabel/wmt22-comet-da, chrF++, ROUGE-L, "
            "BLEU, METEOR; refused, naming what is missing, unless its models are in the local "
            "cache",
        )
        parser.add_argument("--aggregate", choices=["first", "max", "mean"])
        parser.add_argument("--batch-size", type=int)
        parser.add_argument(
            "--inline",
            action="store_true",
            help="run the batches in this process instead of on Celery workers",
        )
        parser.add_argument("--no-wait", action="store_true", help="enqueue and return")
        parser.add_argument("--resume", type=int, metavar="RUN_ID", help="resume a run")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: object, **options: object) -> None:
        try:
            dataset = Dataset.objects.get(name=options["dataset"])
        except Dataset.DoesNotExist:
            raise CommandError(f"no dataset named {options['dataset']!r}") from None
        inline = bool(options["inline"])
        try:
            if options["resume"]:
                run = ScoringRun.objects.get(pk=options["resume"], dataset=dataset)
                run = scoring_runs.scoring_run_resume(run=run, enqueue=not inline)
            else:
                run = scoring_runs.scoring_run_create(
                    dataset=dataset,
                    metrics=[m.strip() for m in str(options["metrics"]).split(",") if m.strip()],
                    aggregate=options["aggregate"],  # type: ignore[arg-type]
                    batch_size=options["batch_size"],  # type: ignore[arg-type]
                    enqueue=not inline,
                    preset=options["preset"],  # type: ignore[arg-type]
                )
        except metric_configs.ScoringError as exc:
            raise CommandError(str(exc)) from None
        except ScoringRun.DoesNotExist:
            raise CommandError(f"no run {options['resume']} for this dataset") from None
        except BrokerError as exc:  # the run is kept: `score --resume` queues it later
            raise CommandError(
                f"could not queue the scoring tasks: the Celery broker is unreachable ({exc})"
            ) from None
        for name, reason in run.unavailable.items():
            self.stderr.write(self.style.WARNING(f"{name}: unavailable: {reason}"))
        self.stdout.write(
            f"Scoring run {run.pk} on {dataset.name}: {run.total} scores to have, "
            f"{run.batches.filter(status=ScoringBatch.Status.PENDING).count()} batches queued."
        )
        if inline:
            self._run_inline(run, quiet=bool(options["no_progress"]))
            return
        if options["no_wait"]:
            return
        self._wait(run, quiet=bool(options["no_progress"]))

    def _run_inline(self, run: ScoringRun, *, quiet: bool) -> None:
        batches = list(run.batches.filter(status=ScoringBatch.Status.PENDING).order_by("id"))
        for batch in tqdm(batches, unit="batch", disable=quiet):
            try:
                scoring_runs.scoring_batch_execute(batch_id=batch.pk)
            except Exception as exc:
                # Redacted like a worker's errors: a message can quote response text.
                scoring_runs.scoring_batch_fail(batch_id=batch.pk, error=describe(exc))
        self._wait(run, quiet=True)

    def _wait(self, run: ScoringRun, *, quiet: bool) -> None:
        progress = run_progress(run)
        bar = tqdm(total=progress.total, initial=progress.produced, unit="score", disable=quiet)
        last_change = time.monotonic()
        warned = False
        while progress.status not in (ScoringRun.Status.DONE, ScoringRun.Status.FAILED):
            time.sleep(0.5)
            new = run_progress(run)
            if new.produced != progress.produced:
                last_change = time.monotonic()
            bar.update(new.produced - progress.produced)
            progress = new
            if not warned and time.monotonic() - last_change > 60:
                self.stderr.write(
                    "No progress for a minute: is a Celery worker running? (make worker)"
                )
                warned = True
        bar.close()
        if progress.status == ScoringRun.Status.FAILED:
            raise CommandError(f"run {run.pk} failed: {progress.error}")
        self.stdout.write(
            self.style.SUCCESS(
                f"Run {run.pk} done: {progress.produced} of {progress.total} scored."
            )
        )
