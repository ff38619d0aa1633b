"""Benchmark scoring through the app against the raw library, in the same run.

1. Generates ``--pairs`` synthetic (instruction, response, reference) triples in a dataset of its
   own (6 responses per instruction, MedAlign's shape: 1818 = 303 x 6).
2. Starts a real Celery worker process (unless ``--no-worker``), scores every pair with BERTScore
   end to end (tasks, model load in the worker, database writes) and times it.
3. Scores the same pairs directly with ``bert_score.BERTScorer`` in this process and times it.
4. Re-runs the finished run (it must cost almost nothing), then scores a few pairs with COMET so
   the worker holds both models, and reads the worker process's peak memory.
"""

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from medalign_site.procinfo import peak_rss_mb
from review.models import Dataset, Instruction, ModelResponse, ReferenceResponse
from scoring import services
from scoring.metrics import Pair
from scoring.models import ScoringRun
from scoring.selectors import run_progress

DATASET = "bench-scoring"
WORDS = [
    "patient",
    "presented",
    "with",
    "shortness",
    "of",
    "breath",
    "cough",
    "fever",
    "chest",
    "pain",
    "hypertension",
    "diabetes",
    "creatinine",
    "elevated",
    "baseline",
    "antibiotics",
    "admitted",
    "discharged",
    "follow-up",
    "clinic",
    "metformin",
    "lisinopril",
    "atorvastatin",
    "radiograph",
    "consolidation",
    "lobe",
    "echocardiogram",
    "ejection",
    "fraction",
    "potassium",
    "sodium",
    "hemoglobin",
    "normal",
    "abnormal",
    "recommended",
    "repeat",
    "weeks",
    "months",
    "history",
    "denies",
    "reports",
    "improved",
    "worsened",
    "stable",
    "plan",
    "continue",
    "increase",
    "decrease",
    "referral",
    "cardiology",
]


def _text(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    return " ".join(words).capitalize() + "."


def _make_dataset(n_pairs: int, name: str = DATASET, seed: int = 7) -> Dataset:
    Dataset.objects.filter(name=name).delete()
    rng = random.Random(seed)
    with transaction.atomic():
        dataset = Dataset.objects.create(name=name, is_synthetic=True)
        n_instructions = (n_pairs + 5) // 6
        made = 0
        for i in range(n_instructions):
            instruction = Instruction.objects.create(
                dataset=dataset, instruction_id=f"B{i}", question=_text(rng, 15)
            )
            reference = _text(rng, rng.randint(60, 150))
            ReferenceResponse.objects.create(
                instruction=instruction, annotator="Annotator_1", text=reference
            )
            responses = []
            for m in range(6):
                if made == n_pairs:
                    break
                words = reference.split()
                keep = [w for w in words if rng.random() > 0.1 * m]
                responses.append(
                    ModelResponse(
                        instruction=instruction,
                        model_name=f"bench-{m}",
                        text=" ".join(keep) or _text(rng, 20),
                    )
                )
                made += 1
            ModelResponse.objects.bulk_create(responses)
    return dataset


class Command(BaseCommand):
    help = "Score generated pairs through the app (Celery worker) and directly with bert-score."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--pairs", type=int, default=1818)
        parser.add_argument("--batch-size", type=int, default=256, help="responses per Celery task")
        parser.add_argument(
            "--no-worker",
            action="store_true",
            help="use an already running worker on the configured queues",
        )
        parser.add_argument("--skip-comet", action="store_true")

    def handle(self, *args: object, **options: object) -> None:
        n_pairs = int(options["pairs"])  # type: ignore[arg-type]
        self.stdout.write(
            f"database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}; broker: "
            f"{settings.CELERY_BROKER_URL.split('://')[0]}; {os.cpu_count()} cores; "
            f"{n_pairs} pairs"
        )
        dataset = _make_dataset(n_pairs)
        tmp = tempfile.TemporaryDirectory(prefix="bench-scoring-")
        comet_ckpt = settings.COMET_MODEL
        if not options["skip_comet"] and not comet_ckpt:
            from scoring.metrics.tiny_comet import build_tiny_comet

            comet_ckpt = str(build_tiny_comet(Path(tmp.name) / "tiny-comet"))
            self.stdout.write(
                "COMET: no COMET_MODEL set; using a tiny COMET built offline "
                "(plumbing only, not a metric)"
            )
        settings.COMET_MODEL = comet_ckpt
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        worker = None
        if not options["no_worker"]:
            settings.SCORING_MODEL_QUEUE = settings.SCORING_LEXICAL_QUEUE = queue
            worker = self._start_worker(queue, comet_ckpt, Path(tmp.name) / "worker.log")
        try:
            app_seconds = self._run(dataset, ["bertscore"], int(options["batch_size"]))  # type: ignore[arg-type]
            rerun_seconds = self._run(dataset, ["bertscore"], int(options["batch_size"]))  # type: ignore[arg-type]
            lib_seconds = self._library(dataset)
            memory = ""
            if not options["skip_comet"]:
                # A few pairs are enough to have COMET loaded beside BERTScore in the worker.
                small = _make_dataset(24, name=f"{DATASET}-small")
                self._run(small, ["comet"], int(options["batch_size"]))  # type: ignore[arg-type]
            if worker is not None:
                memory = _worker_memory(worker.pid)
        finally:
            if worker is not None:
                os.killpg(worker.pid, signal.SIGTERM)
                try:
                    worker.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(worker.pid, signal.SIGKILL)
            Dataset.objects.filter(name__in=[DATASET, f"{DATASET}-small"]).delete()
            tmp.cleanup()
        app_rate, lib_rate = n_pairs / app_seconds, n_pairs / lib_seconds
        self.stdout.write(
            f"app (Celery worker, DB writes): {app_seconds:8.1f} s  {app_rate:6.2f} pairs/s"
        )
        self.stdout.write(
            f"bert-score directly:            {lib_seconds:8.1f} s  {lib_rate:6.2f} pairs/s"
        )
        self.stdout.write(f"ratio app/library: {app_rate / lib_rate:.2f} (target >= 0.85)")
        self.stdout.write(f"re-running the finished run: {rerun_seconds:.2f} s (target < 2 s)")
        if memory:
            self.stdout.write(
                f"worker memory with BERTScore and COMET loaded: {memory} (target < 2 GB)"
            )

    def _start_worker(self, queue: str, comet: str, log: Path) -> subprocess.Popen:
        env = {
            **os.environ,
            "COMET_MODEL": comet,
            "SCORING_MODEL_QUEUE": queue,
            "SCORING_LEXICAL_QUEUE": queue,
        }
        proc = subprocess.Popen(  # noqa: S603 - our own worker
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "medalign_site",
                "worker",
                "-Q",
                queue,
                "--concurrency",
                "1",
                "--loglevel",
                "INFO",
                "--without-mingle",
                "--without-gossip",
            ],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # Time the scoring, not the worker's start-up: wait for it to say it is ready.
        deadline = time.monotonic() + 120
        while "ready." not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise CommandError(f"the worker did not start; its log is {log}")
            time.sleep(0.2)
        self.stdout.write(f"started a Celery worker (pid {proc.pid}) on queue {queue}")
        return proc

    def _run(self, dataset: Dataset, metrics: list[str], batch_size: int) -> float:
        start = time.perf_counter()
        run = services.scoring_run_create(dataset=dataset, metrics=metrics, batch_size=batch_size)
        if run.unavailable:
            raise CommandError(f"unavailable: {run.unavailable}")
        deadline = time.monotonic() + 3600
        while True:
            progress = run_progress(run)
            if progress.status == ScoringRun.Status.DONE:
                break
            if progress.status == ScoringRun.Status.FAILED:
                raise CommandError(f"run failed: {progress.error}")
            if time.monotonic() > deadline:
                raise CommandError("the run did not finish within an hour")
            time.sleep(0.2)
        return time.perf_counter() - start

    def _library(self, dataset: Dataset) -> float:
        from bert_score import BERTScorer

        from scoring.services import backend_for

        backend = backend_for("bertscore")
        triples = [
            Pair(r.instruction.question, r.text, r.instruction.references.all()[0].text)
            for r in ModelResponse.objects.filter(instruction__dataset=dataset)
            .select_related("instruction")
            .prefetch_related("instruction__references")
        ]
        start = time.perf_counter()
        scorer = BERTScorer(
            model_type=str(backend._resolve().path),
            num_layers=backend.options["num_layers"],
            batch_size=backend.options["batch_size"],
            lang="en",
        )
        scorer.score(
            [t.hypothesis for t in triples],
            [t.reference for t in triples],
            batch_size=backend.options["batch_size"],
        )
        return time.perf_counter() - start


def _worker_memory(pid: int) -> str:
    """Peak RSS of the worker's processes (main + pool children), from /proc."""
    out = []
    try:
        children = subprocess.run(  # noqa: S603
            ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
        ).stdout.split()
    except FileNotFoundError:
        children = []
    for p in [str(pid), *children]:
        peak = peak_rss_mb(p)
        if peak is not None:
            out.append(f"pid {p} peak {peak:.0f} MB")
    return "; ".join(out)
