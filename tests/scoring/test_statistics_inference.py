"""Inference a hostile reviewer accepts: metrics compared on the same responses, PERM-BOTH and
significance clusters, tie-calibrated accuracy, every metric against the clinicians themselves,
clusters that are independent, no false certainty, reproducibility.

Each algorithm borrowed from the literature is checked against an independent, deliberately
plain re-derivation here (loops and scipy), never against the module's own helpers.
"""

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from scoring.reports import statistics as S
from scoring.reports.statistics import JudgementTable
from tests.bench.synthetic import bench_inputs
from tests.scoring.test_statistics import make_table


def _synthetic(seed=0, n_instructions=40, n_clinicians=2, n_responses=4, per_patient=1):
    table, scores = bench_inputs(
        n_instructions=n_instructions,
        n_responses=n_responses,
        n_clinicians=n_clinicians,
        n_metrics=3,
        seed=seed,
    )
    patient = np.array([f"P{int(i) // per_patient:03d}" for i in table.instruction])
    return table, scores, patient


# --- 3a. two metrics compared on the responses both scored ----------------------------------


def test_the_paired_test_compares_two_metrics_on_the_responses_both_scored():
    table, scores, _ = _synthetic(seed=2, n_instructions=60)
    good = scores["metric_0"].copy()
    weak = scores["metric_2"].copy()
    # The weak metric could not score the responses the clinicians ranked worst (say, empty
    # outputs): over its remaining responses it looks better than it is.
    mean_rank = {r: table.rank[table.response == r].mean() for r in np.unique(table.response)}
    worst = np.array([mean_rank[r] >= 2.5 for r in table.response])
    weak[worst] = np.nan  # a score belongs to a response: all its rows
    res = S.paired_bootstrap_test(table, good, weak, n_resamples=500, seed=1)
    both = ~np.isnan(good) & ~np.isnan(weak)
    common_good = np.where(both, good, np.nan)
    common_weak = np.where(both, weak, np.nan)
    ta, tb = S.per_review_tau(table, common_good), S.per_review_tau(table, common_weak)
    reviews = np.intersect1d(ta.review, tb.review)
    expected = np.mean([
        ta.tau[ta.review == r][0] - tb.tau[tb.review == r][0] for r in reviews
    ])  # fmt: skip
    assert res["difference"] == pytest.approx(expected)
    one_only = np.isnan(good) != np.isnan(weak)
    assert res["n_responses_excluded"] == np.unique(table.response[one_only]).shape[0] > 0
    # The old comparison (each metric on the responses it scored) gives another answer.
    naive = S.per_review_tau(table, good)
    mixed = np.mean([naive.tau[naive.review == r][0] for r in reviews]) - np.mean(
        [tb.tau[tb.review == r][0] for r in reviews]
    )
    assert abs(mixed - res["difference"]) > 0.01


# --- 3b. PERM-BOTH against a plain re-derivation of mt-metrics-eval's algorithm ------------


def _plain_mean_tau(table, scores):
    taus = []
    for r in np.unique(table.review):
        m = (table.review == r) & ~np.isnan(scores)
        x, y = -table.rank[m], scores[m]
        if m.sum() >= 2 and len(set(x)) > 1 and len(set(y)) > 1:
            taus.append(sps.kendalltau(x, y, variant="b").statistic)
    return np.mean(taus)


def test_perm_both_equals_a_plain_loop_with_the_same_draws():
    table, scores, _ = _synthetic(seed=5, n_instructions=12, n_responses=4)
    a, b = scores["metric_0"].copy(), scores["metric_1"].copy()
    a[table.response == table.response[3]] = np.nan  # one response only B scored: left out
    k, seed = 99, 13
    out = S.perm_both_tests(table, {"A": a, "B": b}, n_permutations=k, seed=seed)
    (pair,) = out["pairs"]
    # mt-metrics-eval's PermutationSigDiff, re-derived: z-score both metrics over the responses
    # both scored, swap each response's two scores with probability 1/2, count the
    # permutations whose difference is at least the observed one.
    responses = np.unique(table.response)
    first = {r: np.flatnonzero(table.response == r)[0] for r in responses}
    sa = np.array([a[first[r]] for r in responses])
    sb = np.array([b[first[r]] for r in responses])
    both = ~np.isnan(sa) & ~np.isnan(sb)
    za, zb = np.full_like(sa, np.nan), np.full_like(sb, np.nan)
    za[both], zb[both] = sps.zscore(sa[both]), sps.zscore(sb[both])
    row_of = {r: i for i, r in enumerate(responses)}
    idx = np.array([row_of[r] for r in table.response])

    def mean_tau(per_response):
        return _plain_mean_tau(table, per_response[idx])

    observed_a, observed_b = mean_tau(za), mean_tau(zb)
    assert pair["tau_a_common"] == pytest.approx(observed_a)
    assert pair["tau_b_common"] == pytest.approx(observed_b)
    hi_a = observed_a >= observed_b
    delta = abs(observed_a - observed_b)
    bits = np.random.default_rng(seed).integers(0, 2, size=(k, responses.shape[0]), dtype=np.int8)
    count = 0
    for w in bits:
        m1 = np.where(w == 1, za, zb)
        m2 = np.where(w == 1, zb, za)
        d = mean_tau(m1) - mean_tau(m2) if hi_a else mean_tau(m2) - mean_tau(m1)
        count += d >= delta - 1e-12
    assert pair["p_value"] == pytest.approx((1 + count) / (k + 1))
    assert pair["p_value"] >= 1 / (k + 1)
    assert pair["n_responses_excluded"] == 1


def test_significance_clusters_follow_assign_ranks():
    """mt-metrics-eval's AssignRanks: a metric starts a new cluster when a metric of the
    current cluster beats it."""
    ranked = ["m1", "m2", "m3", "m4", "m5"]
    p = {("m1", "m2"): 0.30, ("m1", "m3"): 0.01, ("m2", "m3"): 0.20, ("m1", "m4"): 0.001,
         ("m2", "m4"): 0.01, ("m3", "m4"): 0.5, ("m1", "m5"): 0.0, ("m2", "m5"): 0.0,
         ("m3", "m5"): 0.04, ("m4", "m5"): 0.2}  # fmt: skip
    from scoring.reports.statistics.significance import _assign_ranks

    got = _assign_ranks(ranked, lambda i, j: p[(i, j)], 0.05)
    # m3: m1 beats it -> cluster 2 starts at m3; m4: within {m3} nothing beats it -> 2;
    # m5: m3 beats it (0.04) -> 3.
    assert got == {"m1": 1, "m2": 1, "m3": 2, "m4": 2, "m5": 3}


def test_perm_both_separates_a_good_metric_from_noise_and_not_two_equals():
    table, scores, _ = _synthetic(seed=8, n_instructions=80)
    noise = np.random.default_rng(1).normal(size=len(table))
    twin = scores["metric_0"] + np.random.default_rng(2).normal(0, 1e-6, len(table))
    out = S.perm_both_tests(
        table, {"good": scores["metric_0"], "twin": twin, "noise": noise}, n_permutations=199
    )
    clusters = {row["metric"]: row["cluster"] for row in out["clusters"]}
    assert clusters["good"] == clusters["twin"] == 1 and clusters["noise"] == 2
    p = {(t["metric_a"], t["metric_b"]): t for t in out["pairs"]}
    assert p[("good", "noise")]["p_at_floor"] and p[("good", "noise")]["p_value"] == 1 / 200
    assert p[("good", "twin")]["p_value"] > 0.2


# --- 3c. acc23 with tie calibration, against a plain re-derivation ----------------------------


def _plain_acc23(table, scores):
    """mt-metrics-eval's tau_optimization with acc_23, averaged per review (row), re-derived
    with loops: every |difference| as a threshold, the best (and smallest) wins."""
    reviews = []
    for r in np.unique(table.review):
        m = (table.review == r) & ~np.isnan(scores) & ~np.isnan(table.rank)
        h, s = table.rank[m], scores[m]
        pairs = [(h[i], h[j], s[i], s[j]) for i, j in itertools.combinations(range(len(h)), 2)]
        if pairs:
            reviews.append(pairs)

    def acc(eps):
        total = 0.0
        for pairs in reviews:
            good = 0
            for h1, h2, m1, m2 in pairs:
                metric_tie = abs(m1 - m2) <= eps
                if h1 == h2:
                    good += metric_tie
                elif not metric_tie and (h1 < h2) == (m1 > m2):
                    good += 1
            total += good / len(pairs)
        return total / len(reviews)

    candidates = sorted({0.0} | {abs(p[2] - p[3]) for pairs in reviews for p in pairs})
    values = [acc(e) for e in candidates]
    best = int(np.argmax(values))
    return values[best], candidates[best]


def test_tie_calibrated_accuracy_equals_a_plain_loop():
    table, scores, _ = _synthetic(seed=3, n_instructions=15)
    metric = np.round(scores["metric_1"], 1)  # rounding makes metric ties
    out = S.tie_calibrated_accuracy(table, metric, n_resamples=200)
    expected, epsilon = _plain_acc23(table, metric)
    assert out["accuracy"] == pytest.approx(expected)
    assert out["epsilon"] == pytest.approx(epsilon)
    assert out["variant"].startswith("acc23") and out["level"] == "per review, averaged"


def test_tie_calibration_rewards_a_metric_that_predicts_the_clinicians_ties():
    # Clinicians tie two of four responses in every review; one metric ties them too (within a
    # small epsilon), the other orders them arbitrarily. Tau-b cannot tell; acc23 can.
    reviews, tie_aware, tie_blind = [], [], []
    rng = np.random.default_rng(0)
    for i in range(20):
        reviews.append((i, 0, [4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3], [1, 2, 2, 4]))
        tie_aware += [3.0, 2.0 + rng.uniform(0, 0.01), 2.0 + rng.uniform(0, 0.01), 0.0]
        tie_blind += [3.0, 2.5, 1.5, 0.0]
    table = make_table(reviews)
    aware = S.tie_calibrated_accuracy(table, np.array(tie_aware), n_resamples=100)
    blind = S.tie_calibrated_accuracy(table, np.array(tie_blind), n_resamples=100)
    assert aware["accuracy"] == pytest.approx(1.0) and 0 < aware["epsilon"] <= 0.01
    assert blind["accuracy"] < 0.9


# --- 4. every metric against the clinicians themselves ---------------------------------------


def test_leave_one_clinician_out_places_a_metric_among_the_clinicians():
    # Three clinicians on every instruction; clinician 2 is noisy. A metric that equals the
    # consensus agrees with the others better than clinician 2 does.
    rng = np.random.default_rng(4)
    reviews, truth = [], []
    for i in range(30):
        quality = rng.normal(size=5)
        truth.extend(quality)
        for c, noise in ((0, 0.3), (1, 0.3), (2, 3.0)):
            ranks = sps.rankdata(-(quality + rng.normal(0, noise, 5)), method="min")
            reviews.append((i, c, list(range(5 * i, 5 * i + 5)), list(ranks)))
    table = make_table(reviews)
    per_row = np.array(truth)[table.response]
    out = S.leave_one_clinician_out(
        table, {"oracle": per_row, "noise": rng.normal(size=len(table))}
    )
    agreement = {row["clinician"]: row["agreement"] for row in out["clinicians"]}
    assert out["n_clinicians"] == 3 and agreement[2] < min(agreement[0], agreement[1])
    # A_c by hand for clinician 0: tau with each other clinician's review, averaged.
    by_hand = []
    for i in range(30):
        mine = table.subset((table.instruction == i) & (table.clinician == 0))
        for other in (1, 2):
            theirs = table.subset((table.instruction == i) & (table.clinician == other))
            by_hand.append(sps.kendalltau(mine.rank, theirs.rank, variant="b").statistic)
    assert agreement[0] == pytest.approx(np.mean(by_hand))
    oracle, noise = out["metrics"]["oracle"], out["metrics"]["noise"]
    assert oracle["percentile"] >= 2 / 3 and oracle["at_least_median"]
    assert noise["percentile"] == 0.0 and noise["share_beating"] == 0.0


def test_leave_one_out_needs_enough_clinicians():
    table = make_table([(0, 0, [0, 1, 2], [1, 2, 3]), (0, 1, [0, 1, 2], [1, 3, 2])])
    out = S.leave_one_clinician_out(table, {"m": np.array([3.0, 2, 1, 3, 2, 1])})
    assert out["n_clinicians"] == 2 and math.isnan(out["metrics"]["m"]["percentile"])


# --- 5. clusters by patient, in a stable order -----------------------------------------------


def test_clusters_are_patients_when_instructions_share_records():
    table, _, patient = _synthetic(n_instructions=20, per_patient=2)
    keys, unit = S.choose_clusters(table.instruction.astype(str), patient, "auto")
    assert unit == "patient" and np.unique(keys).shape[0] == 10
    _, single, alone = _synthetic(n_instructions=20, per_patient=1)
    keys, unit = S.choose_clusters(table.instruction.astype(str), alone, "auto")
    assert unit == "instruction"
    keys, unit = S.choose_clusters(table.instruction.astype(str), patient, "instruction")
    assert unit == "instruction" and np.unique(keys).shape[0] == 20


def test_patient_clusters_widen_intervals_when_a_patients_instructions_agree():
    # Four instructions per patient, and a metric whose agreement is a property of the patient:
    # instruction clusters count each patient four times as if independent.
    table, scores, patient = _synthetic(seed=6, n_instructions=160, per_patient=4)
    rng = np.random.default_rng(1)
    effect = {p: rng.normal(0, 2.0) for p in np.unique(patient)}
    metric = scores["metric_2"] * np.array([np.exp(effect[p]) for p in patient])
    metric = np.where(np.array([effect[p] for p in patient]) > 0, metric, -metric)
    by_instruction = S.metric_correlation(table, metric, n_resamples=2000)
    keys, _ = S.choose_clusters(table.instruction.astype(str), patient, "patient")
    by_patient = S.metric_correlation(table.with_clusters(keys), metric, n_resamples=2000)
    width = lambda r: r["ci_high"] - r["ci_low"]  # noqa: E731
    assert by_patient["mean_tau"] == pytest.approx(by_instruction["mean_tau"])
    assert width(by_patient) > 1.3 * width(by_instruction)


def test_a_reimport_with_rows_in_another_order_gives_the_same_intervals():
    """Cluster keys are release ids, so database ids and row order do not move the draws."""
    table, scores, patient = _synthetic(seed=9, n_instructions=30, per_patient=2)
    keys, _ = S.choose_clusters(table.instruction.astype(str), patient, "auto")
    first = S.metric_correlation(table.with_clusters(keys), scores["metric_0"], 800, seed=5)
    # The same release imported again: new database ids in another order, rows shuffled.
    order = np.random.default_rng(0).permutation(len(table))
    relabel = np.random.default_rng(1).permutation(1000)
    moved = JudgementTable(
        review=relabel[table.review[order]],
        instruction=relabel[table.instruction[order] + 500],
        clinician=table.clinician[order],
        model=table.model[order],
        response=table.response[order] + 7000,
        rank=table.rank[order],
        correct=table.correct[order],
        position=table.position[order],
        category=table.category[order],
        specialty=table.specialty[order],
        cluster=keys[order],
    )
    second = S.metric_correlation(moved, scores["metric_0"][order], 800, seed=5)
    assert (second["ci_low"], second["ci_high"]) == pytest.approx(
        (first["ci_low"], first["ci_high"]), abs=1e-12
    )


# --- 6. the context-length test respects clusters ---------------------------------------------


def test_copying_one_clinicians_judgements_does_not_manufacture_evidence():
    rng = np.random.default_rng(7)
    reviews, models, correct = [], [], []
    for i in range(40):
        long_ok, short_ok = rng.random() < 0.75, rng.random() < 0.55
        for copy in range(3):  # one clinician's judgements, copied to three accounts
            reviews.append((i, copy, [3 * i, 3 * i + 1, 3 * i + 2], [1, 2, 3]))
            models += ["X-32k", "X-2k", "Y"]
            correct += [long_ok, short_ok, True]
    copied = make_table(reviews, models=models, correct=correct)
    once = copied.subset(copied.clinician == 0)
    variants = {"X-32k": ("X", 32768), "X-2k": ("X", 2048)}
    (alone,) = S.context_length_analysis(once, variants, n_resamples=2000, seed=1)["comparisons"]
    (tripled,) = S.context_length_analysis(copied, variants, n_resamples=2000, seed=1)[
        "comparisons"
    ]
    # The cluster bootstrap sees one instruction's three copies as one unit of evidence.
    assert tripled["correct_difference_p_value"] == pytest.approx(
        alone["correct_difference_p_value"], abs=0.02
    )
    assert tripled["correct_difference_ci_low"] == pytest.approx(
        alone["correct_difference_ci_low"], abs=0.02
    )
    # McNemar on the copies would have claimed far more: it is not given for them.
    assert not math.isnan(alone["mcnemar_p_value"]) and math.isnan(tripled["mcnemar_p_value"])


# --- 7. no false certainty ------------------------------------------------------------------


def test_one_instruction_gives_no_interval_and_no_p_value():
    table = make_table([(0, 0, [0, 1, 2, 3], [1, 2, 3, 4]), (0, 1, [0, 1, 2, 3], [2, 1, 3, 4])])
    metric = np.array([4.0, 3, 2, 1, 4, 3, 2, 1])
    corr = S.metric_correlation(table, metric, n_resamples=1000)
    assert not math.isnan(corr["mean_tau"]) and math.isnan(corr["ci_low"])
    assert corr["interval_note"] == "no interval: 1 cluster (fewer than 10)"
    test = S.paired_bootstrap_test(table, metric, -metric, n_resamples=1000)
    assert math.isnan(test["p_value"]) and math.isnan(test["ci_low"])


def test_a_constant_metric_has_no_accuracy_rather_than_a_certain_half():
    table, _, _ = _synthetic(n_instructions=30)
    constant = np.ones(len(table))
    acc = S.pairwise_accuracy(table, constant, n_resamples=200)
    assert math.isnan(acc["accuracy"]) and math.isnan(acc["ci_low"])
    assert math.isnan(S.metric_correlation(table, constant, n_resamples=200)["mean_tau"])


def test_a_bootstrap_p_value_is_never_below_its_resolution():
    table, scores, _ = _synthetic(seed=1, n_instructions=60)
    noise = np.random.default_rng(0).normal(size=len(table))
    res = S.paired_bootstrap_test(table, scores["metric_0"], noise, n_resamples=999)
    assert res["p_value"] == pytest.approx(S.p_value_floor(999)) and res["p_at_floor"]
    assert res["p_value"] > 0


# --- 10. Bradley-Terry with style control ---------------------------------------------------


def test_style_control_separates_length_from_quality():
    """Clinicians prefer longer answers here, and one model writes longer: the plain fit
    credits the model, the style-controlled fit credits length."""
    rng = np.random.default_rng(2)
    reviews, models, lengths = [], [], []
    for i in range(120):
        long_model = rng.random() < 0.5
        # A writes longer on average; every model's length varies widely.
        length = {m: max(20.0, rng.normal(350 if m == "A" else 200, 120)) for m in "ABC"}
        # Equal quality; the clinician ranks by (log) length plus noise.
        utility = {m: 3 * math.log(length[m]) + rng.normal(0, 0.7) for m in "ABC"}
        order = sorted("ABC", key=lambda m: -utility[m])
        ranks = [order.index(m) + 1 for m in "ABC"]
        reviews.append((i, 0, [3 * i, 3 * i + 1, 3 * i + 2], ranks))
        models += list("ABC")
        lengths += [length[m] for m in "ABC"]
        del long_model
    table = make_table(reviews, models=models)
    out = S.style_controlled_bradley_terry(table, {"length_words": np.array(lengths)})
    plain, controlled = out["plain"]["strength"], out["controlled"]["strength"]
    assert plain["A"] - plain["B"] > 1.0
    assert abs(controlled["A"] - controlled["B"]) < 0.5 * (plain["A"] - plain["B"])
    assert out["style_coefficients"]["length_words"]["ci_low"] > 0
    assert out["n_clusters"] == 120 and out["controlled"]["converged"]


def test_perm_both_gives_no_p_value_and_no_cluster_below_the_fewest_clusters():
    # Final walk-through finding: a metric scored on one patient's responses (the clinicians'
    # rubric score, 3 reviews) was put in a significance cluster with p = 0.016 against the
    # lexical metrics, while every interval on the page said "n/a" below 10 clusters.
    table, scores, _ = _synthetic(seed=8, n_instructions=80)
    sparse = scores["metric_0"].copy()
    one_patient = np.asarray(table.clusters) != np.asarray(table.clusters)[0]
    sparse[one_patient] = np.nan
    noise = np.random.default_rng(1).normal(size=len(table))
    out = S.perm_both_tests(
        table,
        {"good": scores["metric_0"], "sparse": sparse, "noise": noise},
        n_permutations=199,
        min_clusters=10,
    )
    pairs = {(t["metric_a"], t["metric_b"]): t for t in out["pairs"]}
    for pair in (("good", "sparse"), ("sparse", "noise")):
        assert math.isnan(pairs[pair]["p_value"]) and not pairs[pair]["p_at_floor"]
        assert pairs[pair]["n_clusters"] == 1
    assert pairs[("good", "noise")]["p_value"] == 1 / 200  # enough clusters: tested as before
    placed = {row["metric"]: row["cluster"] for row in out["clusters"]}
    assert placed["sparse"] is None and placed["good"] == 1 and placed["noise"] == 2


# --- 3d. significance clusters agree with their own test ---------------------------------------


def test_clusters_follow_the_common_responses_not_each_metrics_own():
    """An outside review's case: metric A could not score the responses clinicians found hard
    to order, so over its own responses it agrees best; on the responses both scored B beats
    it clearly. The clusters must not put A first."""
    table, scores, _ = _synthetic(seed=0, n_instructions=120, n_clinicians=2)
    good = scores["metric_0"]
    # A (a weaker metric) scored only the instructions that are easy to order: those where
    # the good metric agrees well with the clinicians (mean per-review tau >= 0.6).
    taus = S.per_review_tau(table, good)
    per_instruction = {}
    for i, tau in zip(taus.instruction, taus.tau, strict=True):
        per_instruction.setdefault(int(i), []).append(tau)
    easy = [i for i, v in per_instruction.items() if np.mean(v) >= 0.6]
    a = np.where(np.isin(table.instruction, easy), scores["metric_1"], np.nan)
    out = S.perm_both_tests(table, {"A": a, "B": good}, n_permutations=499)
    own = out["correlations"]
    assert own["A"] > own["B"]  # on its own responses A looks better
    (pair,) = out["pairs"]
    assert pair["better"] == "B" and pair["p_two_sided"] <= 0.05
    placed = {c["metric"]: c["cluster"] for c in out["clusters"]}
    assert [c["metric"] for c in out["clusters"]] == ["B", "A"]
    assert placed == {"B": 1, "A": 2}
    assert out["clusters"][0]["tau"] == pytest.approx(pair["tau_b_common"])


def test_two_equal_metrics_are_split_about_one_time_in_twenty():
    """Two metrics equally good by construction. A split at the one-sided level of the
    direction the data chose happens about twice as often as the level says; the clusters
    split at the two-sided level."""
    splits, one_sided, reps = 0, 0, 300
    for seed in range(reps):
        table, _, _ = _synthetic(seed=100 + seed, n_instructions=30, n_clinicians=1)
        rng = np.random.default_rng(seed)
        quality = -table.rank + rng.normal(0, 1.0, len(table))
        # A score belongs to a response: the same noise on every row of it.
        noise = rng.normal(0, 2.0, (2, int(table.response.max()) + 1))
        x, y = quality + noise[0, table.response], quality + noise[1, table.response]
        out = S.perm_both_tests(table, {"x": x, "y": y}, n_permutations=199, seed=seed)
        (pair,) = out["pairs"]
        one_sided += pair["p_value"] <= 0.05
        splits += len({c["cluster"] for c in out["clusters"]}) > 1
    assert one_sided / reps >= 0.065
    assert splits / reps <= 0.07
    assert splits <= one_sided


def test_patients_are_permuted_as_units_when_they_hold_several_instructions():
    table, scores, patient = _synthetic(seed=6, n_instructions=24, n_responses=3, per_patient=2)
    table = table.with_clusters(patient)
    a, b = scores["metric_0"], scores["metric_1"]
    k, seed = 99, 5
    out = S.perm_both_tests(table, {"A": a, "B": b}, n_permutations=k, seed=seed)
    assert out["permutation_unit"] == "cluster"
    (pair,) = out["pairs"]
    # Re-derived: one coin per patient (in the sorted order of their keys), every response
    # of a swapped patient takes the other metric's z-score.
    responses = np.unique(table.response)
    first = {r: np.flatnonzero(table.response == r)[0] for r in responses}
    sa, sb = (np.array([m[first[r]] for r in responses]) for m in (a, b))
    both = ~np.isnan(sa) & ~np.isnan(sb)
    za, zb = np.full_like(sa, np.nan), np.full_like(sb, np.nan)
    za[both], zb[both] = sps.zscore(sa[both]), sps.zscore(sb[both])
    patients = np.unique(patient)
    patient_of = np.searchsorted(patients, [patient[first[r]] for r in responses])
    idx = np.searchsorted(responses, table.response)
    bits = np.random.default_rng(seed).integers(0, 2, size=(k, patients.shape[0]), dtype=np.int8)
    observed = _plain_mean_tau(table, za[idx]) - _plain_mean_tau(table, zb[idx])
    count = 0
    for w in bits[:, patient_of]:
        d = _plain_mean_tau(table, np.where(w == 1, za, zb)[idx]) - _plain_mean_tau(
            table, np.where(w == 1, zb, za)[idx]
        )
        count += d >= observed - 1e-12 if observed >= 0 else d <= observed + 1e-12
    assert pair["p_value"] == pytest.approx((1 + count) / (k + 1))
    instruction_level = S.perm_both_tests(
        table, {"A": a, "B": b}, n_permutations=k, seed=seed, unit="response"
    )
    assert instruction_level["permutation_unit"] == "response"


def test_leave_one_out_with_three_clinicians_gives_its_uncertainty():
    """With three clinicians the place among them can only be 0, 1/3, 2/3 or 1: "beats 100%
    of clinicians" without an interval overstated it. The interval is a bootstrap over the
    clusters, re-derived here with loops over the resampled pairs."""
    rng = np.random.default_rng(8)
    reviews, truth = [], []
    for i in range(24):
        quality = rng.normal(size=4)
        truth.extend(quality)
        for c in range(3):
            ranks = sps.rankdata(-(quality + rng.normal(0, 0.8, 4)), method="min")
            reviews.append((i, c, list(range(4 * i, 4 * i + 4)), list(ranks)))
    table = make_table(reviews)
    metric = np.array(truth)[table.response] + rng.normal(0, 0.6, len(table))
    b, seed = 300, 2
    out = S.leave_one_clinician_out(table, {"m": metric}, n_resamples=b, seed=seed)
    row = out["metrics"]["m"]
    assert out["n_clinicians"] == 3 and row["n_at_most"] == round(3 * row["percentile"])
    # Plain re-derivation: every pair of reviews (a, b) of an instruction, both directions.
    pairs = []  # (cluster, clinician c, tau(c, other), tau(metric in c's place, other))
    for i in range(24):
        for c, o in itertools.permutations(range(3), 2):
            mine = table.subset((table.instruction == i) & (table.clinician == c))
            other = table.subset((table.instruction == i) & (table.clinician == o))
            score = metric[(table.instruction == i) & (table.clinician == c)]
            human = sps.kendalltau(mine.rank, other.rank, variant="b").statistic
            machine = sps.kendalltau(score, -other.rank, variant="b").statistic
            pairs.append((str(i), c, human, machine))
    keys = sorted({p[0] for p in pairs})
    draws = np.random.default_rng(seed).integers(0, len(keys), size=(b, len(keys)))
    pct, beat = [], []
    for row_draw in draws:
        chosen = [p for k in row_draw for p in pairs if p[0] == keys[k]]
        a = {c: np.mean([p[2] for p in chosen if p[1] == c]) for c in range(3)}
        m = {c: np.mean([p[3] for p in chosen if p[1] == c]) for c in range(3)}
        mean_m = np.mean(list(m.values()))
        pct.append(np.mean([a[c] <= mean_m for c in range(3)]))
        beat.append(np.mean([m[c] >= a[c] for c in range(3)]))
    assert row["percentile_ci"] == pytest.approx(list(np.quantile(pct, [0.025, 0.975])))
    assert row["share_beating_ci"] == pytest.approx(list(np.quantile(beat, [0.025, 0.975])))
    assert row["percentile_ci"][0] < row["percentile_ci"][1]  # not one certain value
    few = S.leave_one_clinician_out(
        table.subset(table.instruction < 6), {"m": metric[table.instruction < 6]}
    )
    assert math.isnan(few["metrics"]["m"]["percentile_ci"][0])
    assert few["interval_note"] == "no interval: 6 clusters (fewer than 10)"
