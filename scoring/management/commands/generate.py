"""manage.py generate: answer a dataset's instructions with a self-hosted model."""

import time

from django.core.management.base import BaseCommand, CommandError, CommandParser
from kombu.exceptions import OperationalError as BrokerError
from tqdm import tqdm

from review.models import Dataset
from scoring.generation import runs as generation
from scoring.llm.backends import GenerationParams
from scoring.models import GenerationBatch, GenerationRun
from scoring.runs import machinery
from scoring.runs.selectors import run_progress


class Command(BaseCommand):
    help = (
        "Generate responses to a dataset's instructions with a local model folder or an "
        "allowlisted OpenAI-compatible endpoint, at one or more context lengths. Each record is "
        "serialized (medalign-text/1), cut to the context with the model's own tokenizer and "
        "wrapped in the prompt template; responses join the dataset with their provenance. "
        "Work is split into Celery batches; responses that exist are never generated again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", help="dataset name (not needed with --list-models)")
        parser.add_argument(
            "--model",
            help="local:<folder under GENERATION_MODEL_DIR> or endpoint:<id> (--list-models)",
        )
        parser.add_argument("--list-models", action="store_true", help="list the models and exit")
        parser.add_argument(
            "--context-lengths", default="2048", help="comma-separated, e.g. 2048,32768"
        )
        parser.add_argument("--policy", choices=["recent", "bm25"], default="recent")
        parser.add_argument(
            "--template",
            help="a file holding the prompt template ({ehr} and {question}); default HELM's",
        )
        parser.add_argument("--template-name", default="", help="a name recorded with it")
        parser.add_argument("--label", default="", help="model name in the responses")
        parser.add_argument("--max-new-tokens", type=int, default=256)
        parser.add_argument("--temperature", type=float, default=0.0)
        parser.add_argument("--top-p", type=float, default=1.0)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--batch-size", type=int)
        parser.add_argument("--inline", action="store_true", help="run the batches here")
        parser.add_argument("--no-wait", action="store_true", help="enqueue and return")
        parser.add_argument("--resume", type=int, metavar="RUN_ID", help="resume a run")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: object, **options: object) -> None:
        if options["list_models"]:
            choices = generation.model_choices()
            for choice in choices:
                self.stdout.write(f"{choice.key}\t{choice.description}")
            if not choices:
                # On stderr: the list itself (stdout) stays empty for a script that reads it.
                self.stderr.write(generation.no_model_reason())
            return
        if not options["dataset"]:
            raise CommandError("--dataset is required")
        try:
            dataset = Dataset.objects.get(name=options["dataset"])
        except Dataset.DoesNotExist:
            raise CommandError(f"no dataset named {options['dataset']!r}") from None
        inline = bool(options["inline"])
        try:
            if options["resume"]:
                run = GenerationRun.objects.get(pk=int(str(options["resume"])), dataset=dataset)
                run = generation.generation_run_resume(run=run, enqueue=not inline)
            else:
                if not options["model"]:
                    raise CommandError("--model is required (see --list-models)")
                run = generation.generation_run_create(
                    dataset=dataset,
                    model=str(options["model"]),
                    context_lengths=_lengths(str(options["context_lengths"])),
                    policy=str(options["policy"]),
                    template_text=_template(options["template"]),
                    template_name=str(options["template_name"]),
                    params=_params(options),
                    label=str(options["label"]),
                    batch_size=options["batch_size"],  # type: ignore[arg-type]
                    enqueue=not inline,
                    # The operator, on the server: no admin's approval of the template needed.
                    by_operator=True,
                )
        except generation.GenerationRunError as exc:
            raise CommandError(str(exc)) from None
        except GenerationRun.DoesNotExist:
            raise CommandError(f"no run {options['resume']} for this dataset") from None
        except BrokerError as exc:  # the run is kept: `generate --resume` queues it later
            raise CommandError(
                f"could not queue the generation tasks: the Celery broker is unreachable ({exc})"
            ) from None
        pending = run.batches.filter(status=GenerationBatch.Status.PENDING).count()
        self.stdout.write(
            f"Generation run {run.pk} on {dataset.name}: {run.total} responses to have "
            f"({run.label} at {', '.join(map(str, run.context_lengths))} tokens, "
            f"{run.truncation_policy}), {pending} batches queued."
        )
        if inline:
            batches = list(run.batches.filter(status=GenerationBatch.Status.PENDING).order_by("id"))
            for batch in tqdm(batches, unit="batch", disable=bool(options["no_progress"])):
                try:
                    generation.generation_batch_execute(batch_id=batch.pk)
                except Exception as exc:
                    # Failed for good here, a transient error too: nobody retries inline.
                    machinery.batch_fail(
                        kind=generation.GENERATION,
                        batch_id=batch.pk,
                        error=generation.describe(exc),
                    )
        if options["no_wait"]:
            return
        self._wait(run, quiet=bool(options["no_progress"]) or inline)

    def _wait(self, run: GenerationRun, *, quiet: bool) -> None:
        progress = run_progress(run)
        bar = tqdm(total=progress.total, initial=progress.produced, unit="response", disable=quiet)
        last_change = time.monotonic()
        warned = False
        while progress.status not in (GenerationRun.Status.DONE, GenerationRun.Status.FAILED):
            time.sleep(0.5)
            new = run_progress(run)
            if new.produced != progress.produced:
                last_change = time.monotonic()
            bar.update(new.produced - progress.produced)
            progress = new
            if not warned and time.monotonic() - last_change > 120:
                self.stderr.write(
                    "No progress for two minutes: is a Celery worker on the queue running? "
                    "(local models: the gpu queue; endpoints: cpu)"
                )
                warned = True
        bar.close()
        if progress.status == GenerationRun.Status.FAILED:
            raise CommandError(f"run {run.pk} failed: {progress.error}")
        self.stdout.write(
            self.style.SUCCESS(
                f"Run {run.pk} done: {progress.produced} of {progress.total} responses."
            )
        )


def _lengths(raw: str) -> list[int]:
    try:
        return [int(v) for v in raw.split(",") if v.strip()]
    except ValueError:
        raise CommandError(f"--context-lengths: {raw!r} is not a list of whole numbers") from None


def _template(path: object) -> str | None:
    if not path:
        return None
    try:
        with open(str(path), encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise CommandError(f"--template {path}: {exc.strerror}") from None


def _params(options: dict[str, object]) -> GenerationParams:
    try:
        return GenerationParams(
            max_new_tokens=int(options["max_new_tokens"]),  # type: ignore[call-overload]
            temperature=float(options["temperature"]),  # type: ignore[arg-type]
            top_p=float(options["top_p"]),  # type: ignore[arg-type]
            seed=int(options["seed"]),  # type: ignore[call-overload]
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from None
