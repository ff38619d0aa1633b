"""Benchmark scoring through the app against the raw libraries, in one run, with the targets.

1. Generates ``--pairs`` synthetic (instruction, response, reference) triples in a dataset of its
   own (6 responses per instruction, MedAlign's shape: 1818 = 303 x 6).
2. Cold BERTScore, ``--repeats`` alternating rounds: the app end to end on a real Celery worker
   process started with an empty embedding cache (tasks, model load in the worker, database
   writes), then ``bert_score.BERTScorer`` on the same pairs in this process (model load
   included). Medians are compared (target >= 1.0x).
3. A seventh model: 303 more responses (one per instruction) added to the scored dataset, scored
   by the warm app, against ``bert-score`` scoring those pairs from scratch (target >= 1.8x).
4. COMET on ``--comet-pairs`` pairs: the app (worker, empty cache) against ``comet``'s own
   ``predict`` (checkpoint load included on both sides), with the largest score difference
   (target >= 1.5x). Without ``COMET_MODEL``, a COMET checkpoint is built offline around the
   bundled MiniLM encoder (``tests.scoring.tiny_comet``): real encoder cost, untrained head.
5. METEOR on ``--meteor-pairs`` pairs: the app (worker, WordNet loaded in it) against NLTK's
   ``meteor_score`` with ``nltk.corpus.wordnet`` loaded as NLTK loads it (from a copy of the same
   WordNet files laid out as ``nltk_data``; WordNet load included on both sides), with the
   largest score difference and both throughputs (target >= 0.9x: the app adds Celery and the
   database to the same work). Skipped, saying why, when METEOR is unavailable (no WordNet).
6. Re-running the finished run, and the worker's peak memory with both models loaded.
"""

import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from review.models import Dataset, Instruction, ModelResponse, ReferenceResponse
from scoring.metrics import Pair
from scoring.models import MetricScore, ScoringRun
from scoring.runs import scoring as scoring_runs
from scoring.runs.selectors import run_progress
from tests.bench.procinfo import peak_rss_mb

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


def _add_seventh_model(dataset: Dataset, seed: int = 11) -> int:
    """One more model's response per instruction (a paraphrase-like cut of the reference)."""
    rng = random.Random(seed)
    responses = []
    for instruction in Instruction.objects.filter(dataset=dataset).prefetch_related("references"):
        words = instruction.references.all()[0].text.split()
        keep = [w for w in words if rng.random() > 0.25]
        responses.append(
            ModelResponse(
                instruction=instruction,
                model_name="bench-seventh",
                text=" ".join(keep) or _text(rng, 20),
            )
        )
    ModelResponse.objects.bulk_create(responses)
    return len(responses)


def _triples(dataset: Dataset, model_name: str | None = None) -> list[Pair]:
    responses = ModelResponse.objects.filter(instruction__dataset=dataset)
    if model_name is not None:
        responses = responses.filter(model_name=model_name)
    return [
        Pair(r.instruction.question, r.text, r.instruction.references.all()[0].text)
        for r in responses.select_related("instruction").prefetch_related("instruction__references")
    ]


def _median(values: list[float]) -> float:
    return statistics.median(values)


class Command(BaseCommand):
    help = "Score generated pairs through the app (Celery worker) and directly with the libraries."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--pairs", type=int, default=1818)
        parser.add_argument("--repeats", type=int, default=3, help="alternating cold rounds")
        parser.add_argument("--comet-pairs", type=int, default=600)
        parser.add_argument("--batch-size", type=int, default=256, help="responses per Celery task")
        parser.add_argument("--skip-comet", action="store_true")
        parser.add_argument("--meteor-pairs", type=int, default=1818)
        parser.add_argument("--skip-meteor", action="store_true")

    def handle(self, *args: object, **options: object) -> None:
        n_pairs = int(options["pairs"])  # type: ignore[arg-type]
        repeats = max(1, int(options["repeats"]))  # type: ignore[arg-type]
        batch_size = int(options["batch_size"])  # type: ignore[arg-type]
        import torch

        from scoring.metrics.comet import import_comet

        import_comet()  # the libraries' import is outside every timing, on both sides
        import bert_score  # noqa: F401

        self.stdout.write(
            f"database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}; broker: "
            f"{settings.CELERY_BROKER_URL.split('://')[0]}; {os.cpu_count()} cores; torch "
            f"{torch.get_num_threads()} threads; {'cuda' if torch.cuda.is_available() else 'cpu'}; "
            f"{n_pairs} pairs; {repeats} alternating rounds"
        )
        dataset = _make_dataset(n_pairs)
        tmp = tempfile.TemporaryDirectory(prefix="bench-scoring-")
        self.tmp = Path(tmp.name)
        comet_ckpt = settings.COMET_MODEL
        if not options["skip_comet"] and not comet_ckpt:
            from tests.scoring.tiny_comet import build_tiny_comet

            comet_ckpt = str(build_tiny_comet(self.tmp / "tiny-comet"))
            self.stdout.write(
                "COMET: no COMET_MODEL set; a COMET checkpoint built offline around the bundled "
                "MiniLM encoder (real encoder cost; untrained head: plumbing, not a metric)"
            )
        settings.COMET_MODEL = comet_ckpt
        self.comet_ckpt = comet_ckpt
        self.queue = f"bench-{uuid.uuid4().hex[:8]}"
        settings.SCORING_MODEL_QUEUE = settings.SCORING_LEXICAL_QUEUE = self.queue
        self.worker: subprocess.Popen | None = None
        self.n_workers = 0
        results: list[tuple[str, float, float, float]] = []
        try:
            app_cold, lib_cold = [], []
            for i in range(repeats):
                self._fresh_worker()
                self._forget_scores(dataset)
                app_cold.append(self._run(dataset, ["bertscore"], batch_size))
                lib_cold.append(self._bert_score(_triples(dataset)))
                self.stdout.write(
                    f"  round {i + 1}: app {app_cold[-1]:.1f} s, bert-score {lib_cold[-1]:.1f} s"
                )
            results.append(
                ("cold run, BERTScore (median)", _median(lib_cold), _median(app_cold), 1.0)
            )
            rerun = self._run(dataset, ["bertscore"], batch_size)
            n_new = _add_seventh_model(dataset)
            app_new = self._run(dataset, ["bertscore"], batch_size)
            lib_new = self._bert_score(_triples(dataset, "bench-seventh"))
            results.append((f"a seventh model ({n_new} responses)", lib_new, app_new, 1.8))
            memory, comet_diff = "", None
            if not options["skip_comet"]:
                n_comet = int(options["comet_pairs"])  # type: ignore[arg-type]
                small = _make_dataset(n_comet, name=f"{DATASET}-comet")
                self._fresh_worker()
                app_comet = self._run(small, ["comet"], batch_size)
                lib_comet, comet_diff = self._comet(small)
                results.append((f"COMET ({n_comet} pairs)", lib_comet, app_comet, 1.5))
            if self.worker is not None:
                memory = _worker_memory(self.worker.pid)
            meteor, meteor_memory = None, ""
            if not options["skip_meteor"]:
                n_meteor = int(options["meteor_pairs"])  # type: ignore[arg-type]
                meteor = self._meteor_round(n_meteor, batch_size)
                if meteor is not None and self.worker is not None:
                    results.append(meteor[0])
                    meteor_memory = _worker_memory(self.worker.pid)
        finally:
            self._stop_worker()
            Dataset.objects.filter(
                name__in=[DATASET, f"{DATASET}-comet", f"{DATASET}-meteor"]
            ).delete()
            tmp.cleanup()
        self.stdout.write("")
        self.stdout.write(f"{'':40} {'library s':>10} {'app s':>8} {'ratio':>7}  target")
        for label, lib, app, target in results:
            ratio = lib / app
            verdict = "met" if ratio >= target else "NOT met"
            self.stdout.write(
                f"{label:40} {lib:10.1f} {app:8.1f} {ratio:6.2f}x  >= {target:.1f}x {verdict}"
            )
        if comet_diff is not None:
            self.stdout.write(
                f"COMET largest |app - comet predict| score difference: {comet_diff:.2e}"
            )
        if meteor is not None:
            (_, lib_s, app_s, _), n_meteor, meteor_diff = meteor
            self.stdout.write(
                f"METEOR throughput, WordNet load included: app {n_meteor / app_s:.0f} pairs/s, "
                f"nltk meteor_score {n_meteor / lib_s:.0f} pairs/s; largest |app - nltk| score "
                f"difference: {meteor_diff:.2e}"
            )
            self.stdout.write(f"worker memory, METEOR's WordNet loaded: {meteor_memory}")
        self.stdout.write(f"re-running the finished run: {rerun:.2f} s (target < 2 s)")
        if memory:
            self.stdout.write(
                f"worker memory, BERTScore and COMET loaded: {memory} (target < 2 GB)"
            )

    # ------------------------------------------------------------------ worker
    def _fresh_worker(self) -> None:
        """A new worker process with an empty embedding cache (memory and disk): a cold start."""
        self._stop_worker()
        self.n_workers += 1
        cache = self.tmp / f"embedding-cache-{self.n_workers}"
        log = self.tmp / f"worker-{self.n_workers}.log"
        env = {
            **os.environ,
            "COMET_MODEL": self.comet_ckpt or "",
            "SCORING_MODEL_QUEUE": self.queue,
            "SCORING_LEXICAL_QUEUE": self.queue,
            "SCORING_EMBEDDING_CACHE_DIR": str(cache),
            # the libraries are imported in this process before the library side is timed:
            # the worker imports them when it starts, too (weights still load in the run)
            "SCORING_IMPORT_AT_START": "true",
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
                self.queue,
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
        deadline = time.monotonic() + 900  # a loaded machine imports torch slowly
        while "scoring libraries imported" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise CommandError(f"the worker did not start; its log is {log}")
            time.sleep(0.2)
        self.worker = proc

    def _stop_worker(self) -> None:
        if self.worker is None:
            return
        os.killpg(self.worker.pid, signal.SIGTERM)
        try:
            self.worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.worker.pid, signal.SIGKILL)
            self.worker.wait(timeout=30)
        self.worker = None

    @staticmethod
    def _forget_scores(dataset: Dataset) -> None:
        MetricScore.objects.filter(response__instruction__dataset=dataset).delete()
        ScoringRun.objects.filter(dataset=dataset).delete()

    def _run(self, dataset: Dataset, metrics: list[str], batch_size: int) -> float:
        start = time.perf_counter()
        run = scoring_runs.scoring_run_create(
            dataset=dataset, metrics=metrics, batch_size=batch_size
        )
        if run.unavailable:
            raise CommandError(f"unavailable: {run.unavailable}")
        deadline = time.monotonic() + 3600
        status = ScoringRun.objects.filter(pk=run.pk).values_list("status", flat=True)
        # Only the status row while it runs: run_progress (it counts scores)
        # ten times a second would take CPU from the worker being measured.
        while (state := status.first()) not in (ScoringRun.Status.DONE, ScoringRun.Status.FAILED):
            if time.monotonic() > deadline:
                raise CommandError("the run did not finish within an hour")
            time.sleep(0.1)
        seconds = time.perf_counter() - start
        if state == ScoringRun.Status.FAILED:
            raise CommandError(f"run failed: {run_progress(run).error}")
        return seconds

    def _meteor_round(
        self, n_pairs: int, batch_size: int
    ) -> tuple[tuple[str, float, float, float], int, float] | None:
        from scoring.metrics import MetricUnavailable
        from scoring.runs.metric_configs import backend_for

        try:
            backend_for("meteor").check_available()
        except MetricUnavailable as exc:
            self.stdout.write(f"METEOR: skipped, unavailable here: {exc}")
            return None
        dataset = _make_dataset(n_pairs, name=f"{DATASET}-meteor")
        self._fresh_worker()
        app = self._run(dataset, ["meteor"], batch_size)
        library, diff = self._meteor(dataset)
        return (f"METEOR ({n_pairs} pairs, WordNet load)", library, app, 0.9), n_pairs, diff

    # ------------------------------------------------------------------ libraries
    @staticmethod
    def _bert_score(triples: list[Pair]) -> float:
        """``bert-score`` from scratch: scorer (model load) and score, as a user would."""
        from bert_score import BERTScorer

        from scoring.runs.metric_configs import backend_for

        backend = backend_for("bertscore")
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

    def _comet(self, dataset: Dataset) -> tuple[float, float]:
        """``comet``'s own load + ``predict``; also the largest difference from the app."""
        from scoring.metrics.comet import import_comet

        triples = _triples(dataset)
        comet = import_comet()
        start = time.perf_counter()
        model = comet.load_from_checkpoint(self.comet_ckpt, local_files_only=True)
        out = model.predict(
            [{"src": t.source, "mt": t.hypothesis, "ref": t.reference} for t in triples],
            batch_size=8,
            gpus=0,
            progress_bar=False,
            num_workers=0,
        )
        seconds = time.perf_counter() - start
        app = {
            (s.response.text, s.response.instruction_id): s.value
            for s in MetricScore.objects.filter(
                response__instruction__dataset=dataset, config__backend="comet"
            ).select_related("response")
        }
        responses = ModelResponse.objects.filter(instruction__dataset=dataset).select_related(
            "instruction"
        )
        lookup = {(r.instruction.question, r.text): (r.text, r.instruction_id) for r in responses}
        diff = max(
            abs(app[lookup[(t.source, t.hypothesis)]] - score)
            for t, score in zip(triples, out.scores, strict=True)
        )
        return seconds, diff

    def _meteor(self, dataset: Dataset) -> tuple[float, float]:
        """NLTK's ``meteor_score`` as a user runs it: ``nltk.corpus.wordnet`` found under an
        ``nltk_data`` folder (a copy of the app's WordNet files, laid out as
        ``nltk.download("wordnet")`` would, made before the clock starts), every default; also
        the largest difference from the app's scores."""
        import nltk

        from scoring.metrics.meteor import LEXNAMES_30, WORDNET_FILES
        from scoring.runs.metric_configs import backend_for

        source = backend_for("meteor").folder
        root = self.tmp / "nltk_data"
        target = root / "corpora" / "wordnet"
        target.mkdir(parents=True, exist_ok=True)
        for name in (*WORDNET_FILES, "lexnames", "index.sense"):
            if (source / name).is_file():
                shutil.copyfile(source / name, target / name)
        if not (target / "lexnames").exists():  # Debian's WordNet has none (see meteor.py)
            (target / "lexnames").write_text(LEXNAMES_30)
        if not (target / "index.sense").exists():  # read by NLTK's OMW mapping only
            (target / "index.sense").write_text("")
        nltk.data.path.insert(0, str(root))
        triples = _triples(dataset)
        start = time.perf_counter()
        from nltk.corpus import wordnet
        from nltk.translate.meteor_score import meteor_score

        wordnet.ensure_loaded()
        scores = [meteor_score([t.reference.split()], t.hypothesis.split()) for t in triples]
        seconds = time.perf_counter() - start
        app = {
            (s.response.instruction.question, s.response.text): s.value
            for s in MetricScore.objects.filter(
                response__instruction__dataset=dataset, config__backend="meteor"
            ).select_related("response__instruction")
        }
        diff = max(
            abs(app[(t.source, t.hypothesis)] - score)
            for t, score in zip(triples, scores, strict=True)
        )
        return seconds, diff


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
