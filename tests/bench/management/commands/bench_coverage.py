"""Coverage of the report's 95% intervals at 10, 15, 30 and 60 clusters, by simulation."""

import math

from django.core.management.base import BaseCommand, CommandParser

from scoring.reports.statistics.intervals import INTERVAL_METHOD
from tests.bench.coverage_sim import BEFORE, ICC_LEVELS, SHIPPED, bench

FAMILIES = ("review", "ppi", "adaptive", "rubric")
FAMILY_NAMES = {
    "review": f"{INTERVAL_METHOD}",
    "ppi": "prediction-powered, lambda cross-fitted, Student's t",
    "adaptive": "active inference, lambda fixed at 1, CR2 with Bell-McCaffrey t",
    "rubric": f"{INTERVAL_METHOD}",
}
# The targets: no cell below this, and the mean over cells at least that.
FLOOR, MEAN = 0.935, 0.945


class Command(BaseCommand):
    help = (
        "Simulate studies of 10, 15, 30 and 60 patients (within-patient correlation low and "
        "about 0.3) and print, per statistic (a metric's tau, each model's share correct, the "
        "paired difference of two metrics' taus, prediction-powered and adaptive shares, rubric "
        "scores and HealthBench's aggregate), how "
        "often the report's 95% interval covered the truth, beside the method used before."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--replicates", type=int, default=2000)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--family", action="append", choices=FAMILIES, default=[])
        parser.add_argument("--icc", action="append", choices=list(ICC_LEVELS), default=[])

    def handle(self, *args: object, **o: object) -> None:
        replicates = int(o["replicates"])  # type: ignore[call-overload]
        families: tuple[str, ...] = tuple(o["family"] or FAMILIES)  # type: ignore[arg-type]
        levels: tuple[str, ...] = tuple(o["icc"] or ICC_LEVELS)  # type: ignore[arg-type]
        w = self.stdout.write
        error = 2 * math.sqrt(0.95 * 0.05 / replicates)
        w(
            f"Coverage of 95% intervals, {replicates} replicates per cell, seed {o['seed']} "
            f"(Monte Carlo error at 95%: ±{100 * error:.1f} points, 2 standard errors)"
        )
        result = bench(
            replicates, seed=int(o["seed"]), families=families, levels=levels,  # type: ignore[call-overload]
            progress=lambda m: self.stderr.write(f"  done: {m}"),
        )  # fmt: skip
        for level, values in result.icc.items():
            measured = ", ".join(f"{k} {v:.2f}" for k, v in values.items())
            w(f"within-patient correlation at ICC level {level!r}: {measured}")
        w("")
        shipped_cov: list[tuple[float, str]] = []
        for family, cell in result.cells:
            new, old = SHIPPED[family], BEFORE[family]
            label = f"{cell.statistic:<20} {cell.n_clusters:>2} clusters  ICC {cell.icc:<4}"
            line = (
                f"{label}  {cell.replicates(new)} replicates  {FAMILY_NAMES[family]}: "
                f"coverage {100 * cell.coverage(new):.1f}% width {cell.mean_width(new):.3f}  |  "
                f"before ({old}): coverage {100 * cell.coverage(old):.1f}% "
                f"width {cell.mean_width(old):.3f}"
            )
            if cell.note:
                line += f"  ({cell.note})"
            w(line)
            shipped_cov.append((cell.coverage(new), label.strip()))
        low, where = min(shipped_cov)
        mean = sum(c for c, _ in shipped_cov) / len(shipped_cov)
        met = low >= FLOOR and mean >= MEAN
        w("")
        w(
            f"{len(shipped_cov)} cells, {replicates} replicates each: lowest coverage "
            f"{100 * low:.1f}% ({' '.join(where.split())}), mean coverage {100 * mean:.1f}%; "
            f"target (no cell below {100 * FLOOR:.1f}%, mean at least {100 * MEAN:.1f}%): "
            f"{'met' if met else 'NOT met'}"
        )
        w(f"{result.seconds:.1f} s ({result.cpu_seconds:.1f} s of CPU), {len(result.cells)} cells")
