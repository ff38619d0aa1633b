import time

import numpy as np
from django.core.management.base import BaseCommand, CommandParser
from scipy import stats as sps

from scoring.analysis import compute_results, response_rows
from scoring.statistics import bench_inputs, per_review_tau


class Command(BaseCommand):
    help = (
        "Time a full report's statistics on synthetic data (default: 303 instructions x 6 "
        "responses x 3 clinicians x 6 metrics, 10,000 resamples), and a scipy-loop baseline."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--instructions", type=int, default=303)
        parser.add_argument("--responses", type=int, default=6)
        parser.add_argument("--clinicians", type=int, default=3)
        parser.add_argument("--metrics", type=int, default=6)
        parser.add_argument("--resamples", type=int, default=10_000)
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args: object, **o: object) -> None:
        table, scores = bench_inputs(
            int(o["instructions"]), int(o["responses"]), int(o["clinicians"]), int(o["metrics"]),
            seed=int(o["seed"]),
        )  # fmt: skip
        params = {"n_resamples": int(o["resamples"]), "seed": int(o["seed"]), "confidence": 0.95}
        self.stdout.write(
            f"{o['instructions']} instructions x {o['responses']} responses x {o['clinicians']} "
            f"clinicians = {len(table):,} judgements; {len(scores)} metrics; "
            f"{o['resamples']:,} bootstrap resamples"
        )
        started = time.perf_counter()
        # Two of the synthetic models play one base model at two context lengths.
        variants = {"model_1": ("base", 32768), "model_2": ("base", 2048)}
        results = compute_results(table, scores, params, variants=variants)
        results["responses"] = response_rows(
            table,
            scores,
            clinician_pseudonym=[f"C{c:010d}" for c in table.clinician],
            instruction_code=[str(i) for i in table.instruction],
            error_tags=[[] for _ in range(len(table))],
        )
        report_s = time.perf_counter() - started
        best = max(results["correlation"], key=lambda r: r["mean_tau"] or -2)
        self.stdout.write(
            f"report (everything report_compute stores): {report_s:.2f} s "
            f"[target < 3 s]; best metric {best['metric']} tau {best['mean_tau']:.3f} "
            f"[{best['ci_low']:.3f}, {best['ci_high']:.3f}]"
        )

        # Baseline: the same per-review taus, scipy.stats.kendalltau called once per review.
        started = time.perf_counter()
        review_ids, inverse = np.unique(table.review, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.cumsum(np.bincount(inverse))
        rank = -table.rank.astype(float)
        for values in scores.values():
            for rows in np.split(order, bounds[:-1]):
                x, y = rank[rows], values[rows]
                ok = ~np.isnan(y)
                if ok.sum() >= 2:
                    sps.kendalltau(x[ok], y[ok], variant="b")
        loop_s = time.perf_counter() - started
        started = time.perf_counter()
        for values in scores.values():
            per_review_tau(table, values)
        vec_s = time.perf_counter() - started
        self.stdout.write(
            f"per-review taus, {len(review_ids):,} reviews x {len(scores)} metrics: "
            f"scipy.stats.kendalltau loop {loop_s:.2f} s, vectorised {vec_s:.3f} s "
            f"({loop_s / max(vec_s, 1e-9):.0f}x)"
        )
