import time

import numpy as np
from django.core.management.base import BaseCommand, CommandParser
from scipy import stats as sps

from scoring.reports import learned
from scoring.reports.analysis import compute_results, response_rows
from scoring.reports.statistics import (
    choose_clusters,
    leave_one_clinician_out,
    per_review_tau,
    perm_both_tests,
)
from tests.bench.synthetic import bench_inputs


class Command(BaseCommand):
    help = (
        "Time a full report's statistics on synthetic data (default: 303 instructions x 6 "
        "responses x 3 clinicians x 7 metrics, 10,000 resamples), and a scipy-loop baseline."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--instructions", type=int, default=303)
        parser.add_argument("--responses", type=int, default=6)
        parser.add_argument("--clinicians", type=int, default=3)
        parser.add_argument("--metrics", type=int, default=7)
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
        # Synthetic stand-ins for the learned metric's embeddings (the real ones come from MiniLM
        # and are computed once per text; their time depends on the texts, not on the report).
        rng = np.random.default_rng(int(o["seed"]))
        n_resp = int(table.response.max()) + 1
        unit = rng.normal(size=(3, n_resp, 384))
        unit /= np.linalg.norm(unit, axis=-1, keepdims=True)
        emb = [u[table.response] for u in unit]
        lengths = rng.integers(5, 400, size=n_resp)[table.response]

        # scikit-learn's import (seconds on a busy machine) happens once per worker process.
        started = time.perf_counter()
        import sklearn.linear_model  # noqa: F401
        import sklearn.model_selection  # noqa: F401

        import_s = time.perf_counter() - started
        # Patients: four instructions in three share a record (MedAlign: 303 over 276), so the
        # bootstrap resamples patients, as a report of such data does.
        patient = np.array([f"P{int(i) * 3 // 4:04d}" for i in table.instruction])
        keys, unit = choose_clusters(table.instruction.astype(str), patient, "auto")
        table = table.with_clusters(keys)
        cpu = time.process_time()
        started = time.perf_counter()
        features, _ = learned.build_features(scores, lengths, *emb)
        oof, info = learned.cross_validated_scores(table, features, patient=patient)
        learned_s = time.perf_counter() - started
        all_scores = {**scores, learned.LEARNED_KEY: oof}
        # Two of the synthetic models play one base model at two context lengths.
        variants = {"model_1": ("base", 32768), "model_2": ("base", 2048)}
        style = {"length_words": lengths.astype(float)}
        started = time.perf_counter()
        results = compute_results(
            table, all_scores, params, variants=variants, style=style, cluster_unit=unit
        )
        stats_s = time.perf_counter() - started
        results["responses"] = response_rows(
            table,
            all_scores,
            clinician_pseudonym=[f"C{c:010d}" for c in table.clinician],
            instruction_code=[str(i) for i in table.instruction],
            error_tags=[[] for _ in range(len(table))],
            patient=list(patient),
        )
        report_s = learned_s + stats_s
        cpu_s = time.process_time() - cpu
        best = max(results["correlation"], key=lambda r: r["mean_tau"] or -2)
        self.stdout.write(
            f"report (everything report_compute stores: {len(all_scores)} metrics incl. the "
            f"learned one, PERM-BOTH for all {len(results['significance']['pairs'])} pairs x "
            f"{results['significance']['n_permutations']} permutations, leave-one-clinician-out "
            f"overall and per group, acc23, style control, context length): {report_s:.2f} s "
            f"wall, {cpu_s:.2f} s CPU [target < 3 s]"
        )
        self.stdout.write(
            f"  best metric {best['metric']} tau {best['mean_tau']:.3f} "
            f"[{best['ci_low']:.3f}, {best['ci_high']:.3f}], clustered by {unit} "
            f"({results['clustering']['n_clusters']} clusters)"
        )
        self.stdout.write(
            f"  of which learned metric ({info['n_splits']}-fold CV by patient, one split, "
            f"{features.shape[1]} features, {info['n_training_pairs']:,} training pairs): "
            f"{learned_s:.2f} s; statistics {stats_s:.2f} s "
            f"(scikit-learn import, once per process, not counted: {import_s:.2f} s)"
        )
        for name, fn in (
            ("PERM-BOTH, every pair", lambda: perm_both_tests(table, all_scores)),
            ("leave-one-clinician-out", lambda: leave_one_clinician_out(table, all_scores)),
        ):
            started = time.perf_counter()
            fn()
            self.stdout.write(f"    {name}: {time.perf_counter() - started:.2f} s")
        started = time.perf_counter()
        learned.cross_validated_scores(
            table, features, patient=patient, repeats=learned.DEFAULT_REPEATS
        )
        self.stdout.write(
            f"  the learned metric's {learned.DEFAULT_REPEATS} repeated splits (a report with the "
            f"learned metric adds these): {time.perf_counter() - started:.2f} s"
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
