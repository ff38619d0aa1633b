"""Simulated clinicians of known reliability, for the consensus models (``bench_consensus``).

Each instruction has ``n_responses`` responses with a true order (drawn at random) and true
verdicts (correct with probability ``share_correct``). A clinician of reliability ``q``:

- marks each response's correctness right with probability ``q`` (else the opposite);
- ranks the instruction truthfully with probability ``q``, else by a uniformly random order.

``reviews_per_instruction`` clinicians, drawn at random, review each instruction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scoring.reports.statistics import JudgementTable
from scoring.reports.statistics.table import Array

RELIABILITIES = (0.95, 0.9, 0.85, 0.75, 0.6, 0.5)


@dataclass(frozen=True, eq=False)
class Simulated:
    table: JudgementTable
    reliability: Array  # per clinician id (0-based)
    true_correct: dict[int, float]  # response id -> 1.0 / 0.0
    true_rank: dict[int, float]  # response id -> 1 = best


def simulate(
    *,
    n_instructions: int = 200,
    n_responses: int = 4,
    reliabilities: tuple[float, ...] = RELIABILITIES,
    reviews_per_instruction: int = 3,
    share_correct: float = 0.5,
    seed: int = 0,
) -> Simulated:
    rng = np.random.default_rng(seed)
    q = np.asarray(reliabilities, dtype=float)
    rows: list[tuple[int, int, int, int, float, float, int]] = []
    true_correct: dict[int, float] = {}
    true_rank: dict[int, float] = {}
    review = 0
    for i in range(n_instructions):
        responses = [i * n_responses + k for k in range(n_responses)]
        truth = (rng.random(n_responses) < share_correct).astype(float)
        best_first = rng.permutation(n_responses)  # the true order, best first
        for k, r in enumerate(responses):
            true_correct[r] = truth[k]
            true_rank[r] = float(np.flatnonzero(best_first == k)[0] + 1)
        for c in rng.choice(q.shape[0], size=reviews_per_instruction, replace=False):
            review += 1
            honest = rng.random() < q[c]
            order = best_first if honest else rng.permutation(n_responses)
            ranks = np.empty(n_responses)
            ranks[order] = np.arange(1, n_responses + 1)
            right = rng.random(n_responses) < q[c]
            verdicts = np.where(right, truth, 1.0 - truth)
            for k, r in enumerate(responses):
                rows.append((review, i, int(c), r, float(ranks[k]), float(verdicts[k]), k))
    cols = list(zip(*rows, strict=True))
    n = len(rows)
    table = JudgementTable(
        review=np.asarray(cols[0], dtype=np.int64),
        instruction=np.asarray(cols[1], dtype=np.int64),
        clinician=np.asarray(cols[2], dtype=np.int64),
        model=np.asarray([f"model-{k}" for k in cols[6]], dtype=object),
        response=np.asarray(cols[3], dtype=np.int64),
        rank=np.asarray(cols[4], dtype=float),
        correct=np.asarray(cols[5], dtype=float),
        position=np.zeros(n, dtype=np.int64),
        category=np.asarray(["sim"] * n, dtype=object),
        specialty=np.asarray(["sim"] * n, dtype=object),
    )
    return Simulated(table=table, reliability=q, true_correct=true_correct, true_rank=true_rank)
