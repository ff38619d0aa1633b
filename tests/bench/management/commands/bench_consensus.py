"""Clinicians of known reliability, recovered by the latent-class consensus (a simulation)."""

import numpy as np
from django.core.management.base import BaseCommand, CommandParser
from scipy import stats

from scoring.reports.statistics.consensus import consensus
from tests.bench.consensus_sim import RELIABILITIES, Simulated, simulate

METHODS = ("majority", "dawid_skene", "mace")


def _right(sim: Simulated, method: str) -> tuple[float, float, dict[int, dict[str, float]]]:
    """The consensus's share of verdicts equal to the truth, its share of instructions whose
    best response is the true best, and its clinicians' estimated reliability."""
    found = consensus(sim.table, method)
    t = found.table
    verdicts = float(
        np.mean([c == sim.true_correct[int(r)] for r, c in zip(t.response, t.correct, strict=True)])
    )
    firsts = [
        sim.true_rank[int(r)] == 1.0 for r, k in zip(t.response, t.rank, strict=True) if k == 1.0
    ]
    return verdicts, float(np.mean(firsts)), found.reliability


class Command(BaseCommand):
    help = (
        "Simulate clinicians of known reliability judging instructions (each verdict right "
        "with that probability; each ranking the true one with that probability, else random), "
        "and print what the majority, Dawid-Skene and MACE consensus recover: the truth, and "
        "each clinician's reliability. Not timed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--instructions", type=int, default=300)
        parser.add_argument("--reviews-per-instruction", type=int, default=3)
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args: object, **o: object) -> None:
        sim = simulate(
            n_instructions=int(o["instructions"]),  # type: ignore[call-overload]
            reviews_per_instruction=int(o["reviews_per_instruction"]),  # type: ignore[call-overload]
            seed=int(o["seed"]),  # type: ignore[call-overload]
        )
        w = self.stdout.write
        w(
            f"{o['instructions']} instructions of 4 responses, {o['reviews_per_instruction']} "
            f"of {len(RELIABILITIES)} clinicians each, seed {o['seed']}"
        )
        estimated: dict[str, dict[int, dict[str, float]]] = {}
        for method in METHODS:
            verdicts, firsts, reliability = _right(sim, method)
            estimated[method] = reliability
            w(
                f"{method:<12} verdicts right {100 * verdicts:5.1f}%   "
                f"best response right {100 * firsts:5.1f}%"
            )
        w("")
        w("clinician  true    Dawid-Skene (verdicts, ranking)   MACE (verdicts, ranking)")
        for c, q in enumerate(sim.reliability):
            ds, mc = estimated["dawid_skene"].get(c, {}), estimated["mace"].get(c, {})
            w(
                f"{c:>9}  {q:.2f}    {ds.get('correct', float('nan')):.2f}, "
                f"{ds.get('ranking', float('nan')):.2f}                        "
                f"{mc.get('correct', float('nan')):.2f}, {mc.get('ranking', float('nan')):.2f}"
            )
        # Dawid-Skene's reliability is an accuracy; MACE's the probability of knowing the
        # answer rather than guessing, which for a yes/no verdict guessed evenly is 2q - 1.
        targets = {
            "dawid_skene": ("Dawid-Skene", sim.reliability, "accuracy q"),
            "mace": ("MACE", 2 * sim.reliability - 1, "2q - 1"),
        }
        for method, (name, truth, what) in targets.items():
            values = [estimated[method][c]["correct"] for c in range(len(sim.reliability))]
            tau = stats.kendalltau(values, sim.reliability).statistic
            error = float(np.max(np.abs(np.asarray(values) - truth)))
            w(
                f"{name}: order of the clinicians' reliability against the truth, Kendall's tau "
                f"{tau:.2f}; largest error on verdicts against {what}: {error:.2f}"
            )
