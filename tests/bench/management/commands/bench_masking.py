"""Benchmark masking on hostile responses: the worst case per response, beside the target.

Masks every response of ``tests.bench.masking_corpus`` (long digit and separator runs after family
words, 100 kB responses, every version form, dense self-references, NUL, lone surrogates,
combining marks, look-alike letters) against each of the corpus's response sets (models named
with words and hub ids; models named "gpt-4", "GPT-4o"), ``--repeats`` times, and prints for
each the best time per call and that time scaled to 10 kB (10,240 characters), the figure the
target is stated in; the worst of all, with its verdict, last. Beside it, in the same run, the
raw library call: google-re2's ``finditer`` over the same text with the pattern of every word a
match can start with (the scan masking cannot do without), so what lies above it is masking's
own work. The cold start (the word lists read and the patterns compiled, once per process and
response set) is printed on its own.
"""

import os
import time
from collections.abc import Callable
from typing import Any

import re2
from django.core.management.base import BaseCommand, CommandParser

from review import blinding, linear
from tests.bench.masking_corpus import DATASETS, corpus

TARGET_MS_PER_10K = 5.0
TEN_KB = 10 * 1024


def _best_ms(call: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best * 1000


class Command(BaseCommand):
    help = (
        "Time masking on the adversarial corpus: per response and per 10 kB, the worst case "
        "beside the 5 ms target, and google-re2's finditer over the same text."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--repeats", type=int, default=5, help="calls per response (best)")

    def handle(self, *args: object, **options: object) -> None:
        repeats = max(1, int(options["repeats"]))  # type: ignore[call-overload]
        self.stdout.write(f"load average {os.getloadavg()[0]:.2f}")
        worst = ("", 0.0)
        for label, models in DATASETS:
            names = tuple(sorted(models))
            started = time.perf_counter()
            blinding.model_name_spans("warm up", names)
            cold_ms = (time.perf_counter() - started) * 1000
            raw = re2.compile(blinding.heads_pattern(names))
            self.stdout.write(
                f"masking against {len(names)} model names ({label}); cold start (word lists, "
                f"patterns): {cold_ms:.0f} ms"
            )
            self.stdout.write(
                f"{'response':<48} {'set':<10} {'chars':>7} {'spans':>6} {'ms':>8} "
                f"{'ms/10kB':>8} {'raw RE2 ms':>10}"
            )
            for case in corpus():
                text = case.text
                spans = len(blinding.model_name_spans(text, names))
                clean = linear.encodable(text)

                def mask(t: str = text, n: tuple[str, ...] = names) -> object:
                    return blinding.model_name_spans(t, n)

                def scan(t: str = clean, r: Any = raw) -> object:
                    return list(r.finditer(t))

                ms = _best_ms(mask, repeats)
                raw_ms = _best_ms(scan, repeats)
                per_10k = ms * TEN_KB / max(len(text), TEN_KB)
                if per_10k > worst[1]:
                    worst = (f"{case.name}, {label}", per_10k)
                self.stdout.write(
                    f"{case.name[:48]:<48} {label:<10} {len(text):>7} {spans:>6} {ms:>8.3f} "
                    f"{per_10k:>8.3f} {raw_ms:>10.3f}"
                )
        verdict = "within" if worst[1] < TARGET_MS_PER_10K else "OVER"
        self.stdout.write(
            f"worst case: {worst[1]:.3f} ms per 10 kB ({worst[0]}); target < "
            f"{TARGET_MS_PER_10K:.0f} ms at 10 kB: {verdict}"
        )
