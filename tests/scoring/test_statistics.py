"""Tests for scoring.reports.statistics (pure numpy/scipy; no Django needed)."""

from __future__ import annotations

import inspect
import math
from dataclasses import fields, replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from scoring.reports import statistics as S
from scoring.reports.statistics import JudgementTable
from tests.bench.synthetic import bench_inputs

FAST = 1000  # resamples used by most tests


# ---------------------------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------------------------


def make_table(reviews, *, models=None, correct=None, positions=None):
    """Build a table from ``[(instruction, clinician, responses, ranks), ...]``.

    The review id is the index in the list; model defaults to ``m<response % 10>``.
    """
    cols = {k: [] for k in ("review", "instruction", "clinician", "response", "rank")}
    for rid, (inst, clin, responses, ranks) in enumerate(reviews):
        assert len(responses) == len(ranks)
        for resp, rank in zip(responses, ranks, strict=True):
            cols["review"].append(rid)
            cols["instruction"].append(inst)
            cols["clinician"].append(clin)
            cols["response"].append(resp)
            cols["rank"].append(rank)
    n = len(cols["review"])
    if models is None:
        models = [f"m{r % 10}" for r in cols["response"]]
    if correct is None:
        correct = [True] * n
    if positions is None:
        positions = []
        for _, _, responses, _ in reviews:
            positions.extend(range(len(responses)))
    return JudgementTable(
        review=np.array(cols["review"]),
        instruction=np.array(cols["instruction"]),
        clinician=np.array(cols["clinician"]),
        model=np.array(models, dtype=object),
        response=np.array(cols["response"]),
        rank=np.array(cols["rank"], dtype=float),
        correct=np.array(correct),
        position=np.array(positions),
        category=np.array(["cat_a" if i % 2 == 0 else "cat_b" for i in cols["instruction"]]),
        specialty=np.array(["spec"] * n),
    )


def single_review(ranks, scores):
    table = make_table([(0, 0, list(range(len(ranks))), ranks)])
    return table, np.array(scores, dtype=float)


def random_table(seed, n_reviews=60, max_responses=7, nan_share=0.1):
    rng = np.random.default_rng(seed)
    reviews, scores = [], []
    next_resp = 0
    for r in range(n_reviews):
        n = int(rng.integers(1, max_responses + 1))
        ranks = rng.integers(1, n + 1, size=n).astype(float)  # ties likely
        reviews.append((r // 3, r % 3, list(range(next_resp, next_resp + n)), list(ranks)))
        next_resp += n
        s = np.round(rng.normal(size=n), 1)  # rounding creates score ties
        s[rng.random(n) < nan_share] = np.nan
        scores.extend(s)
    return make_table(reviews), np.array(scores)


def concat(first, second):
    """Stack two tables; the second table's review ids are shifted to stay distinct."""
    cols = {
        f.name: np.concatenate([getattr(first, f.name), getattr(second, f.name)])
        for f in fields(first)
    }
    cols["review"] = np.concatenate([first.review, second.review + first.review.max() + 1])
    return JudgementTable(**cols)


def plain_bootstrap_t(values, clusters, n_resamples, seed, confidence=0.95):
    """The studentized cluster bootstrap with loops, as Davison & Hinkley (1997, 5.2.1) state
    it: every resample concatenates the drawn clusters (a cluster drawn twice counts twice),
    its mean and its cluster-robust standard error give t_b = (m_b - m) / se_b, and the interval
    is [m - t_(1-a/2) se, m - t_(a/2) se]; the p-value counts the t_b beyond t = m / se.
    Returns (lo, hi, p)."""
    values = np.asarray(values, dtype=float)
    clusters = np.asarray(clusters)
    ids = np.unique(clusters)
    groups = [values[clusters == c] for c in ids]

    def mean_se(parts):
        flat = np.concatenate(parts)
        m = flat.mean()
        return m, math.sqrt(sum((part - m).sum() ** 2 for part in parts)) / flat.size

    m, se = mean_se(groups)
    draws = np.random.default_rng(seed).integers(0, len(ids), size=(n_resamples, len(ids)))
    t = []
    for row in draws:
        mb, seb = mean_se([groups[c] for c in row])
        if seb > 0:  # a resample of clusters that all share one mean has no t: left out
            t.append((mb - m) / seb)
    t = np.array(t)
    n_resamples = len(t)
    a = 1 - confidence
    q_lo, q_hi = np.quantile(t, [a / 2, 1 - a / 2])
    t_obs = m / se
    k = np.sum(t >= t_obs) if t_obs > 0 else np.sum(t <= t_obs)
    return m - q_hi * se, m - q_lo * se, min(1.0, 2 * (k + 1) / (n_resamples + 1))


def scipy_reference_taus(table, scores):
    """Independent reference: scipy.stats.kendalltau per review, same skip rule."""
    out = {}
    for rid in np.unique(table.review):
        m = table.review == rid
        x, y = -table.rank[m].astype(float), scores[m]
        ok = ~np.isnan(x) & ~np.isnan(y)
        x, y = x[ok], y[ok]
        if len(np.unique(x)) < 2 or len(np.unique(y)) < 2:
            continue
        out[int(rid)] = sps.kendalltau(x, y, variant="b").statistic
    return out


# ---------------------------------------------------------------------------------------------
# JudgementTable
# ---------------------------------------------------------------------------------------------


def test_table_rejects_ragged_columns():
    table, _ = single_review([1, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match="different lengths"):
        replace(table, rank=np.array([1.0]))


def test_subset_keeps_rows_and_validates_mask():
    table, _ = random_table(0, n_reviews=10)
    mask = table.instruction == 1
    sub = table.subset(mask)
    assert len(sub) == mask.sum()
    assert np.array_equal(sub.response, table.response[mask])
    with pytest.raises(ValueError):
        table.subset(np.ones(3, dtype=bool))
    with pytest.raises(ValueError):
        table.subset(np.arange(len(table)))


# ---------------------------------------------------------------------------------------------
# 1. per-review tau: hand-worked cases
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ranks", "scores", "expected"),
    [
        # x = -rank = [-1, -2, -2, -3]; y = [4, 3, 2, 1]. Of the 6 pairs, (1, 2) is tied in rank
        # only; the other 5 are concordant. P=5, Q=0, untied_x=5, untied_y=6 -> 5/sqrt(30).
        ([1, 2, 2, 3], [4, 3, 2, 1], 5 / math.sqrt(30)),
        # Same ranks, scores reversed: all 5 untied pairs discordant -> -5/sqrt(30).
        ([1, 2, 2, 3], [1, 2, 3, 4], -5 / math.sqrt(30)),
        # Ties on both sides in the same places: pairs (0,1) and (2,3) tied in both;
        # 4 concordant pairs, untied_x = untied_y = 4 -> 1.
        ([1, 1, 2, 2], [2, 2, 1, 1], 1.0),
        # x = [-1, -2, -3]; y = [.5, .9, .1]: (0,1) discordant, (0,2) and (1,2) concordant
        # -> (2 - 1) / 3.
        ([1, 2, 3], [0.5, 0.9, 0.1], 1 / 3),
        # x = [-1, -2, -2, -3]; y = [1, 1, 0, 0]: (0,1) tied in y, (1,2) tied in x,
        # (2,3) tied in y; (0,2) (0,3) (1,3) concordant. P=3, untied_x=5, untied_y=4
        # -> 3 / sqrt(20).
        ([1, 2, 2, 3], [1, 1, 0, 0], 3 / math.sqrt(20)),
        # The nan score drops response 0; the remaining three are perfectly ordered -> 1.
        ([1, 2, 3, 4], [np.nan, 3, 2, 1], 1.0),
    ],
)
def test_per_review_tau_hand_worked(ranks, scores, expected):
    table, s = single_review(ranks, scores)
    res = S.per_review_tau(table, s)
    assert res.skipped == 0
    assert res.tau == pytest.approx([expected])
    ref = sps.kendalltau(-np.array(ranks, float)[~np.isnan(s)], s[~np.isnan(s)]).statistic
    assert expected == pytest.approx(ref)


def test_per_review_tau_unpacks_as_tuple():
    table, s = single_review([1, 2, 3], [3.0, 2.0, 1.0])
    review_ids, instruction_ids, taus = S.per_review_tau(table, s)
    assert list(review_ids) == [0]
    assert list(instruction_ids) == [0]
    assert taus == pytest.approx([1.0])


@pytest.mark.parametrize(
    ("ranks", "scores"),
    [
        ([1, 1, 1], [1.0, 2.0, 3.0]),  # one distinct rank
        ([1, 2, 3], [5.0, 5.0, 5.0]),  # constant scores
        ([1, 2, 3], [np.nan, 5.0, np.nan]),  # < 2 scored responses
        ([1, 1, 2], [1.0, 2.0, np.nan]),  # distinct ranks only via an unscored row
        ([1], [1.0]),  # single response
    ],
)
def test_undefined_reviews_are_skipped_not_zero(ranks, scores):
    good = (1, 0, [100, 101, 102], [1, 2, 3])
    table = make_table([(0, 0, list(range(len(ranks))), ranks), good])
    s = np.concatenate([np.array(scores, float), [3.0, 1.0, 2.0]])
    res = S.per_review_tau(table, s)
    assert res.skipped == 1
    assert list(res.skipped_reviews) == [0]
    assert list(res.review) == [1]
    # Good review: (0,1) C, (0,2) C, (1,2) D -> 1/3; mean is NOT (0 + 1/3) / 2.
    out = S.metric_correlation(table, s, n_resamples=200)
    assert out["mean_tau"] == pytest.approx(1 / 3)
    assert out["n_reviews"] == 1
    assert out["n_skipped"] == 1


def test_scores_must_align_with_rows():
    table, _ = single_review([1, 2], [1.0, 2.0])
    with pytest.raises(ValueError):
        S.per_review_tau(table, np.array([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_review_tau_agrees_with_scipy_on_every_review(seed):
    table, scores = random_table(seed, n_reviews=150)
    ref = scipy_reference_taus(table, scores)
    for engine in ("numpy", "scipy"):
        res = S.per_review_tau(table, scores, engine=engine)
        got = dict(zip(res.review.tolist(), res.tau.tolist(), strict=True))
        assert got.keys() == ref.keys()
        for rid, tau in ref.items():
            assert got[rid] == pytest.approx(tau, abs=1e-12), rid
        assert res.skipped == len(np.unique(table.review)) - len(ref)
        # instruction reported for each review is that review's instruction
        for rid, inst in zip(res.review, res.instruction, strict=True):
            assert set(table.instruction[table.review == rid]) == {inst}


def test_per_review_tau_handles_large_reviews_in_chunks(monkeypatch):
    monkeypatch.setattr(S.table, "_CHUNK_ELEMENTS", 50)  # force several chunks
    table, scores = random_table(7, n_reviews=40, max_responses=9)
    ref = scipy_reference_taus(table, scores)
    res = S.per_review_tau(table, scores)
    assert dict(zip(res.review.tolist(), res.tau.tolist(), strict=True)) == pytest.approx(ref)


# ---------------------------------------------------------------------------------------------
# 1. per-review tau: property tests
# ---------------------------------------------------------------------------------------------


@st.composite
def tables_with_scores(draw, allow_nan=True):
    n_reviews = draw(st.integers(1, 6))
    reviews, scores = [], []
    next_resp = 0
    for r in range(n_reviews):
        n = draw(st.integers(1, 6))
        ranks = draw(st.lists(st.integers(1, n), min_size=n, max_size=n))
        # Scores on a 1/4 grid: distinct values stay distinct under exp/affine/cube.
        sc = draw(st.lists(st.integers(-40, 40), min_size=n, max_size=n))
        sc = [v / 4 for v in sc]
        if allow_nan:
            holes = draw(st.lists(st.booleans(), min_size=n, max_size=n))
            sc = [np.nan if h else v for v, h in zip(sc, holes, strict=True)]
        reviews.append((r // 2, r % 2, list(range(next_resp, next_resp + n)), ranks))
        next_resp += n
        scores.extend(sc)
    return make_table(reviews), np.array(scores, dtype=float)


MONOTONE = {
    "exp": np.exp,
    "affine": lambda s: 3.5 * s - 7.0,
    "cube": lambda s: s**3,
    "logistic": lambda s: 1.0 / (1.0 + np.exp(-s)),
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=tables_with_scores(), transform=st.sampled_from(sorted(MONOTONE)))
def test_tau_invariant_under_strictly_monotone_transform(data, transform):
    table, scores = data
    base = S.per_review_tau(table, scores)
    moved = S.per_review_tau(table, MONOTONE[transform](scores))
    assert np.array_equal(base.review, moved.review)
    assert base.skipped == moved.skipped
    np.testing.assert_allclose(moved.tau, base.tau, atol=1e-12)


@settings(max_examples=150, deadline=None)
@given(data=tables_with_scores())
def test_tau_sign_flips_when_ranks_reverse(data):
    table, scores = data
    reversed_table = replace(table, rank=100.0 - table.rank)
    base = S.per_review_tau(table, scores)
    flipped = S.per_review_tau(reversed_table, scores)
    assert np.array_equal(base.review, flipped.review)
    np.testing.assert_allclose(flipped.tau, -base.tau, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(data=tables_with_scores())
def test_numpy_engine_matches_scipy_reference(data):
    table, scores = data
    ref = scipy_reference_taus(table, scores)
    res = S.per_review_tau(table, scores)
    assert dict(zip(res.review.tolist(), res.tau.tolist(), strict=True)) == pytest.approx(ref)
    assert np.all(np.abs(res.tau) <= 1.0 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(data=tables_with_scores(), n_constant=st.integers(1, 5))
def test_adding_single_rank_review_only_increments_skipped(data, n_constant):
    table, scores = data
    before = S.metric_correlation(table, scores, n_resamples=50)
    extra = make_table([(99, 0, list(range(1000, 1000 + n_constant)), [2] * n_constant)])
    joined = concat(table, extra)
    after = S.metric_correlation(joined, np.r_[scores, np.arange(n_constant, dtype=float)], 50)
    assert after["n_skipped"] == before["n_skipped"] + 1
    assert after["n_reviews"] == before["n_reviews"]
    if before["n_reviews"]:
        assert after["mean_tau"] == pytest.approx(before["mean_tau"])
    else:
        assert math.isnan(after["mean_tau"])


@settings(max_examples=60, deadline=None)
@given(data=tables_with_scores(allow_nan=False), seed=st.integers(0, 2**16))
def test_ci_contains_point_estimate(data, seed):
    table, scores = data
    # The mechanics, on any number of clusters (min_clusters=1); the default refuses few.
    out = S.metric_correlation(table, scores, n_resamples=300, seed=seed, min_clusters=1)
    if out["n_reviews"] == 0:
        assert math.isnan(out["mean_tau"]) and math.isnan(out["ci_low"])
        return
    assert out["ci_low"] - 1e-9 <= out["mean_tau"] <= out["ci_high"] + 1e-9
    acc = S.pairwise_accuracy(table, scores, n_resamples=300, seed=seed, min_clusters=1)
    if not math.isnan(acc["accuracy"]):
        assert acc["ci_low"] - 1e-9 <= acc["accuracy"] <= acc["ci_high"] + 1e-9
    default = S.metric_correlation(table, scores, n_resamples=300, seed=seed)
    if default["n_clusters"] < S.MIN_CLUSTERS:
        assert math.isnan(default["ci_low"]) and default["interval_note"]


# ---------------------------------------------------------------------------------------------
# 2. Cluster bootstrap
# ---------------------------------------------------------------------------------------------


def test_bootstrap_reproducible_with_seed_and_differs_across_seeds():
    rng = np.random.default_rng(3)
    values = rng.normal(size=200)
    clusters = rng.integers(0, 40, size=200)
    a = S.cluster_bootstrap_ci(values, clusters, n_resamples=FAST, seed=11)
    b = S.cluster_bootstrap_ci(values, clusters, n_resamples=FAST, seed=11)
    c = S.cluster_bootstrap_ci(values, clusters, n_resamples=FAST, seed=12)
    assert a == b
    assert a != c
    assert a[0] < values.mean() < a[1]


def test_bootstrap_matches_naive_loop_over_resamples():
    """The vectorized statistic equals an explicit per-resample concatenation."""
    rng = np.random.default_rng(5)
    values = rng.normal(size=37)
    clusters = rng.choice([3, 8, 10, 21, 40, 41], size=37)
    n_resamples, seed = 400, 9
    ids = np.unique(clusters)
    draws = np.random.default_rng(seed).integers(0, len(ids), size=(n_resamples, len(ids)))
    means = [np.concatenate([values[clusters == ids[c]] for c in row]).mean() for row in draws]
    expected = np.quantile(means, [0.05, 0.95])
    got = S.cluster_bootstrap_ci(
        values, clusters, n_resamples, seed, confidence=0.9, min_clusters=6
    )
    assert got == pytest.approx(tuple(expected), abs=1e-12)
    # Six clusters are fewer than the default minimum: no interval at all.
    assert all(math.isnan(v) for v in S.cluster_bootstrap_ci(values, clusters, n_resamples, seed))


def test_cluster_bootstrap_width_reflects_clusters_not_rows():
    # 30 clusters of 20 identical values: the information is 30 cluster means, not 600 rows.
    rng = np.random.default_rng(1)
    cluster_means = rng.normal(size=30)
    values = np.repeat(cluster_means, 20)
    clusters = np.repeat(np.arange(30), 20)
    lo, hi = S.cluster_bootstrap_ci(values, clusters, n_resamples=4000, seed=0)
    se = cluster_means.std(ddof=0) / math.sqrt(30)
    assert (hi - lo) == pytest.approx(2 * 1.96 * se, rel=0.15)
    iid_lo, iid_hi = S.cluster_bootstrap_ci(values, np.arange(600), n_resamples=4000, seed=0)
    assert (iid_hi - iid_lo) < 0.4 * (hi - lo)


def test_bootstrap_single_cluster_and_empty():
    # One cluster: every resample is the same cluster, a zero-width "interval" claiming
    # certainty the data do not have. None is shown below the minimum number of clusters.
    lo, hi = S.cluster_bootstrap_ci(np.array([0.2, 0.4]), np.array([1, 1]), n_resamples=50)
    assert math.isnan(lo) and math.isnan(hi)
    lo, hi = S.cluster_bootstrap_ci(
        np.array([0.2, 0.4]), np.array([1, 1]), n_resamples=50, min_clusters=1
    )
    assert lo == pytest.approx(0.3) and hi == pytest.approx(0.3)
    assert all(math.isnan(v) for v in S.cluster_bootstrap_ci(np.array([]), np.array([])))
    with pytest.raises(ValueError):
        S.cluster_bootstrap_ci(np.array([1.0]), np.array([1]), n_resamples=0)


def test_default_resamples_is_ten_thousand():
    for fn in (
        S.cluster_bootstrap_ci,
        S.metric_correlation,
        S.pairwise_accuracy,
        S.paired_bootstrap_test,
        S.human_ceiling,
        S.leaderboard,
    ):
        assert inspect.signature(fn).parameters["n_resamples"].default == 10_000, fn
    table, scores = random_table(0, n_reviews=12)
    out = S.metric_correlation(table, scores)
    assert out["n_resamples"] == 10_000
    assert out["seed"] == 0


# ---------------------------------------------------------------------------------------------
# 3/4/5/6. Correlation summaries
# ---------------------------------------------------------------------------------------------


def test_metric_correlation_counts():
    table, scores = random_table(4, n_reviews=90)
    out = S.metric_correlation(table, scores, n_resamples=FAST, seed=1)
    ref = scipy_reference_taus(table, scores)
    assert out["mean_tau"] == pytest.approx(np.mean(list(ref.values())))
    assert out["n_reviews"] == len(ref)
    assert out["n_skipped"] == 90 - len(ref)
    insts = {int(table.instruction[table.review == r][0]) for r in ref}
    assert out["n_instructions"] == len(insts)
    assert out["ci_low"] < out["mean_tau"] < out["ci_high"]
    assert (out["seed"], out["n_resamples"]) == (1, FAST)


def test_metric_correlations_for_a_dict():
    table, scores = random_table(4, n_reviews=30)
    out = S.metric_correlations(table, {"a": scores, "b": -scores}, n_resamples=200)
    assert out["a"]["mean_tau"] == pytest.approx(-out["b"]["mean_tau"])


def test_pairwise_accuracy_hand_worked():
    # ranks [1, 2, 2, 3], scores [3, 4, 1, 3]. Strict pairs (rank-tied (1,2) excluded):
    # (0,1) rank 0 better but 3 < 4 -> 0;  (0,2) 3 > 1 -> 1;  (0,3) 3 == 3 -> 1/2;
    # (1,3) 4 > 3 -> 1;  (2,3) 1 < 3 -> 0.   Accuracy = 2.5 / 5.
    table, s = single_review([1, 2, 2, 3], [3, 4, 1, 3])
    out = S.pairwise_accuracy(table, s, n_resamples=100)
    assert out["accuracy"] == pytest.approx(0.5)
    assert out["n_pairs"] == 5
    assert out["n_metric_ties"] == 1


def test_pairwise_accuracy_skips_nan_scores_and_bounds():
    table, s = single_review([1, 2, 3], [np.nan, 2.0, 1.0])
    out = S.pairwise_accuracy(table, s, n_resamples=100)
    assert out["n_pairs"] == 1 and out["accuracy"] == 1.0
    table, scores = random_table(8, n_reviews=80)
    out = S.pairwise_accuracy(table, scores, n_resamples=FAST)
    flipped = S.pairwise_accuracy(table, -scores, n_resamples=FAST)
    # Reversing the metric swaps agreeing and disagreeing pairs; ties stay at 1/2.
    assert out["accuracy"] + flipped["accuracy"] == pytest.approx(1.0)
    assert out["ci_low"] <= out["accuracy"] <= out["ci_high"]


def test_system_level_tau():
    # Mean ranks: A 1.5, B 1.5... build 3 models over 2 reviews.
    reviews = [(0, 0, [0, 1, 2], [1, 2, 3]), (1, 0, [10, 11, 12], [1, 3, 2])]
    models = ["A", "B", "C", "A", "B", "C"]
    table = make_table(reviews, models=models)
    # mean ranks A=1, B=2.5, C=2.5 ; mean scores A=3, B=1, C=2 (C row 2 is nan-ignored).
    scores = np.array([3.0, 1.0, 2.0, 3.0, 1.0, np.nan])
    out = S.system_level_tau(table, scores)
    ref = sps.kendalltau([-1, -2.5, -2.5], [3, 1, 2])
    assert out["tau"] == pytest.approx(ref.statistic)
    assert out["p_value"] == pytest.approx(ref.pvalue)
    assert out["n_models"] == 3
    assert out["mean_rank"] == {"A": 1.0, "B": 2.5, "C": 2.5}
    assert out["mean_score"] == {"A": 3.0, "B": 1.0, "C": 2.0}


def test_paired_bootstrap_test():
    table, quality = random_table(10, n_reviews=120, nan_share=0.0)
    good = -table.rank + np.random.default_rng(0).normal(0, 0.3, len(table))
    bad = np.random.default_rng(1).normal(size=len(table))
    res = S.paired_bootstrap_test(table, good, bad, n_resamples=FAST, seed=2)
    assert res["difference"] > 0.3
    assert res["ci_low"] > 0
    assert res["p_value"] < 0.01
    assert res["difference"] == pytest.approx(res["mean_tau_a"] - res["mean_tau_b"])
    rev = S.paired_bootstrap_test(table, bad, good, n_resamples=FAST, seed=2)
    assert rev["difference"] == pytest.approx(-res["difference"])
    assert rev["p_value"] == pytest.approx(res["p_value"])
    same = S.paired_bootstrap_test(table, good, good, n_resamples=FAST, seed=2)
    assert same["difference"] == 0 and same["p_value"] == 1.0
    noisy = S.paired_bootstrap_test(table, bad, bad[::-1].copy(), n_resamples=FAST, seed=2)
    assert 0.0 <= noisy["p_value"] <= 1.0
    assert noisy["p_value"] > 0.01


def test_paired_p_value_matches_naive_bootstrap():
    table, _ = random_table(21, n_reviews=60, nan_share=0.0)
    rng = np.random.default_rng(4)
    a = -table.rank + rng.normal(0, 6.0, len(table))
    b = rng.normal(size=len(table))
    n_resamples, seed = 500, 3
    res = S.paired_bootstrap_test(table, a, b, n_resamples=n_resamples, seed=seed)
    ta, tb = S.per_review_tau(table, a), S.per_review_tau(table, b)
    common = np.intersect1d(ta.review, tb.review)
    diff = {r: ta.tau[ta.review == r][0] - tb.tau[tb.review == r][0] for r in common}
    inst = {r: table.clusters[table.review == r][0] for r in common}
    ids = np.unique(list(inst.values()))
    draws = np.random.default_rng(seed).integers(0, len(ids), size=(n_resamples, len(ids)))
    boot = np.array(
        [np.mean([diff[r] for c in row for r in common if inst[r] == ids[c]]) for row in draws]
    )
    d = np.mean(list(diff.values()))
    other_side = np.mean(boot <= 0) if d > 0 else np.mean(boot >= 0)
    assert res["difference"] == pytest.approx(d)
    assert 0 < other_side < 0.5  # a non-trivial case
    # The studentized bootstrap's p-value, by a plain loop; the observed sample counts among
    # the resamples, so it is never below 2 / (B + 1).
    values = np.array([diff[r] for r in common])
    lo, hi, p = plain_bootstrap_t(values, [inst[r] for r in common], n_resamples, seed)
    assert res["p_value"] == pytest.approx(p)
    assert (res["ci_low"], res["ci_high"]) == pytest.approx((lo, hi))
    assert 2 / (n_resamples + 1) < p < 1


def test_paired_test_uses_only_reviews_valid_for_both():
    table = make_table([(0, 0, [0, 1, 2], [1, 2, 3]), (1, 0, [3, 4, 5], [1, 2, 3])])
    a = np.array([3.0, 2.0, 1.0, 3.0, 2.0, 1.0])
    b = np.array([1.0, 2.0, 3.0, 5.0, 5.0, 5.0])  # review 1 undefined for b
    res = S.paired_bootstrap_test(table, a, b, n_resamples=100)
    assert res["n_reviews"] == 1
    assert res["difference"] == pytest.approx(2.0)


# ---------------------------------------------------------------------------------------------
# 7. Human ceiling and Krippendorff's alpha
# ---------------------------------------------------------------------------------------------


def test_human_ceiling_hand_worked():
    reviews = [
        # instruction 1: A [1,2,3] vs B [1,3,2] -> (0,1) C, (0,2) C, (1,2) D -> 1/3
        (1, 0, [10, 11, 12], [1, 2, 3]),
        (1, 1, [10, 11, 12], [1, 3, 2]),
        # instruction 2: x=[1,1,2], y=[1,2,2]: only (0,2) untied on both (concordant);
        # untied_x = 2, untied_y = 2 -> 1/2
        (2, 0, [20, 21, 22], [1, 1, 2]),
        (2, 1, [20, 21, 22], [1, 2, 2]),
        # instruction 3: clinician 0 gives one distinct rank -> pair skipped
        (3, 0, [30, 31, 32], [1, 1, 1]),
        (3, 1, [30, 31, 32], [1, 2, 3]),
        # instruction 4: one clinician only -> not a pair
        (4, 0, [40, 41], [1, 2]),
        # instruction 5: shared responses are 51 and 52 only: A [2, 3] vs B [1, 2] -> 1
        (5, 0, [50, 51, 52], [1, 2, 3]),
        (5, 1, [51, 52, 53], [1, 2, 3]),
        # instruction 6: the same clinician twice -> not an inter-clinician pair
        (6, 0, [60, 61], [1, 2]),
        (6, 0, [60, 61], [2, 1]),
    ]
    out = S.human_ceiling(make_table(reviews), n_resamples=FAST)
    assert out["mean_tau"] == pytest.approx((1 / 3 + 1 / 2 + 1) / 3)
    assert out["n_pairs"] == 3
    assert out["n_skipped_pairs"] == 1
    assert out["n_instructions"] == 3
    # Three clusters: no interval by default; the mechanics with the minimum lowered.
    assert math.isnan(out["ci_low"]) and out["interval_note"].startswith("no interval: 3")
    out = S.human_ceiling(make_table(reviews), n_resamples=FAST, min_clusters=1)
    assert out["ci_low"] <= out["mean_tau"] <= out["ci_high"]


def test_human_ceiling_counts_a_review_without_ranked_rows_as_skipped():
    nan = float("nan")
    reviews = [
        (1, 0, [10, 11, 12], [1, 2, 3]),
        (1, 1, [10, 11, 12], [1, 3, 2]),
        (1, 2, [10, 11, 12], [nan, nan, nan]),  # submitted, but no response ranked
    ]
    out = S.human_ceiling(make_table(reviews), n_resamples=FAST)
    assert out["n_pairs"] == 1
    # Clinician 2's review pairs with each of the other two: both pairs are skipped.
    assert out["n_skipped_pairs"] == 2


def test_human_ceiling_alpha_uses_first_rank_of_duplicates():
    kd = pytest.importorskip("krippendorff")
    reviews = [
        (1, 0, [10, 11, 12], [1, 2, 3]),
        (1, 1, [10, 11, 12], [1, 3, 2]),
        (1, 0, [10, 11, 12], [3, 2, 1]),  # clinician 0 again: ignored for alpha
        (2, 0, [20, 21], [1, 2]),
        (2, 1, [20, 21], [1, 2]),
    ]
    out = S.human_ceiling(make_table(reviews), n_resamples=100)
    data = np.array([[1, 2, 3, 1, 2], [1, 3, 2, 1, 2]], dtype=float)
    assert out["alpha"] == pytest.approx(
        kd.alpha(reliability_data=data, level_of_measurement="ordinal")
    )
    # pairs: (A1, B) -> 1/3, (A2, B) -> -1/3 on instruction 1; 1 on instruction 2
    assert out["n_pairs"] == 3
    assert out["mean_tau"] == pytest.approx(1 / 3)


def test_krippendorff_alpha_known_value():
    # Example from the krippendorff package docs / Krippendorff (2011): ordinal alpha 0.815.
    nan = np.nan
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
    assert S.krippendorff_alpha_ordinal(np.array(data)) == pytest.approx(0.815, abs=5e-4)


def test_krippendorff_alpha_perfect_and_degenerate():
    perfect = np.array([[1, 2, 3, 4, np.nan], [1, 2, 3, 4, 2], [1, np.nan, 3, 4, 2]])
    assert S.krippendorff_alpha_ordinal(perfect) == 1.0
    assert math.isnan(S.krippendorff_alpha_ordinal(np.array([[1.0, 1.0], [1.0, 1.0]])))
    assert math.isnan(S.krippendorff_alpha_ordinal(np.array([[1.0, np.nan], [np.nan, 2.0]])))


@pytest.mark.parametrize("seed", range(6))
def test_krippendorff_alpha_matches_package(seed):
    kd = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(seed)
    n_coders, n_units = int(rng.integers(2, 6)), int(rng.integers(5, 60))
    truth = rng.integers(1, 7, size=n_units)
    data = (truth + rng.integers(-1, 2, size=(n_coders, n_units))).astype(float)
    data[rng.random(data.shape) < 0.25] = np.nan
    if seed % 2:
        data = data / 2  # non-integer ordered values
    expected = kd.alpha(reliability_data=data, level_of_measurement="ordinal")
    assert S.krippendorff_alpha_ordinal(data) == pytest.approx(expected, abs=1e-10)


def test_human_ceiling_alpha_matches_package_on_its_matrix():
    kd = pytest.importorskip("krippendorff")
    table, _ = bench_inputs(n_instructions=20, n_responses=4, n_clinicians=3, n_metrics=1)
    # Drop clinician 2 on half the instructions so some units have only two coders.
    keep = ~((table.clinician == 2) & (table.instruction % 2 == 0))
    table = table.subset(keep)
    units = sorted(
        {(int(i), int(r)) for i, r in zip(table.instruction, table.response, strict=True)}
    )
    data = np.full((3, len(units)), np.nan)
    index = {u: k for k, u in enumerate(units)}
    for i, r, c, rank in zip(
        table.instruction, table.response, table.clinician, table.rank, strict=True
    ):
        data[c, index[(int(i), int(r))]] = rank
    out = S.human_ceiling(table, n_resamples=200)
    expected = kd.alpha(reliability_data=data, level_of_measurement="ordinal")
    assert out["alpha"] == pytest.approx(expected, abs=1e-10)
    assert out["n_units"] == len(units)


# ---------------------------------------------------------------------------------------------
# 8. Wilson
# ---------------------------------------------------------------------------------------------


def test_wilson_interval_hand_values():
    # p = .8, z = 1.96: centre = (.8 + 1.9208/10) / 1.38416 = .71674,
    # half = 1.96 * sqrt(.016 + .009604) / 1.38416 = .22658 -> (.490, .943)
    lo, hi = S.wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=5e-4)
    assert hi == pytest.approx(0.9433, abs=5e-4)
    lo0, hi0 = S.wilson_interval(0, 10)
    assert lo0 == 0.0 and hi0 == pytest.approx(0.2775, abs=5e-4)
    lo90, hi90 = S.wilson_interval(8, 10, confidence=0.90)
    assert lo < lo90 < hi90 < hi
    assert all(math.isnan(v) for v in S.wilson_interval(0, 0))
    with pytest.raises(ValueError):
        S.wilson_interval(11, 10)


# ---------------------------------------------------------------------------------------------
# 9. Bradley-Terry, leaderboard and win rates
# ---------------------------------------------------------------------------------------------


def bt_table(strengths, n_instructions, seed, per_review=4):
    """Reviews of ``per_review`` responses from random models, ranked by a Plackett-Luce draw."""
    rng = np.random.default_rng(seed)
    # Names run against the strength order so that sorting by name cannot pass for ranking.
    names = [f"model_{len(strengths) - 1 - k}" for k in range(len(strengths))]
    reviews, models = [], []
    resp = 0
    for inst in range(n_instructions):
        picked = rng.choice(len(strengths), size=per_review, replace=False)
        # Gumbel-max trick: sorting strength + Gumbel noise samples a Plackett-Luce order.
        utility = np.asarray(strengths)[picked] + rng.gumbel(size=per_review)
        ranks = sps.rankdata(-utility).tolist()
        reviews.append((inst, 0, list(range(resp, resp + per_review)), ranks))
        models.extend(names[k] for k in picked)
        resp += per_review
    return make_table(reviews, models=models)


def test_bradley_terry_recovers_synthetic_order():
    strengths = [1.5, 0.8, 0.0, -0.7, -1.6]
    table = bt_table(strengths, n_instructions=400, seed=0)
    rows = S.leaderboard(table, n_resamples=500, seed=0)
    assert [r["model"] for r in rows] == [f"model_{k}" for k in (4, 3, 2, 1, 0)]
    est = np.array([r["bt_strength"] for r in rows])
    assert est.sum() == pytest.approx(0.0, abs=1e-9)
    truth = np.array(strengths) - np.mean(strengths)
    np.testing.assert_allclose(est, truth, atol=0.35)
    for r in rows:
        assert r["bt_ci_low"] <= r["bt_strength"] <= r["bt_ci_high"]


def test_bradley_terry_is_the_penalized_mle():
    rng = np.random.default_rng(2)
    wins = rng.integers(0, 20, size=(4, 4)).astype(float)
    np.fill_diagonal(wins, 0)
    wins[3, :] = 0  # model 3 never wins
    prior = 0.1
    log_p = S.bradley_terry(wins, prior=prior)
    assert np.all(np.isfinite(log_p)) and np.argmin(log_p) == 3
    w = wins + prior * (1 - np.eye(4))
    n = w + w.T
    p = np.exp(log_p)
    # Score equations of the likelihood: W_i = sum_j N_ij p_i / (p_i + p_j)
    expected_wins = (n * p[:, None] / (p[:, None] + p[None, :])).sum(axis=1)
    np.testing.assert_allclose(expected_wins, w.sum(axis=1), rtol=1e-7)
    # Batched fit equals separate fits.
    batch = np.stack([wins, wins.T])
    np.testing.assert_allclose(S.bradley_terry(batch, prior=prior)[0], log_p, atol=1e-8)
    np.testing.assert_allclose(
        S.bradley_terry(batch, prior=prior)[1], S.bradley_terry(wins.T, prior=prior), atol=1e-8
    )


def _old_mm(wins, prior, max_iter=10_000, tol=1e-10):
    """Hunter's MM as the report ran it before: stops silently after 10,000 iterations."""
    m = wins.shape[0]
    off = 1 - np.eye(m)
    w = wins * off + prior * off
    n, total = w + w.T, w.sum(axis=1)
    log_p, p = np.zeros(m), np.ones(m)
    for _ in range(max_iter):
        new = np.log(total / (n / (p[:, None] + p[None, :])).sum(axis=1))
        new -= new.mean()
        delta = np.abs(new - log_p).max()
        log_p, p = new, np.exp(new)
        if delta < tol:
            break
    return log_p


def _two_weakly_linked_groups():
    w = np.zeros((6, 6))
    for group in ([0, 1, 2], [3, 4, 5]):
        for i in group:
            for j in group:
                if i != j:
                    w[i, j] = 200 + 50 * (j - i)
    w[0, 3] = w[3, 0] = 0.05  # the groups meet almost never
    w[1, 4] = 0.02
    return w


def test_bradley_terry_matches_choix_on_a_case_mm_did_not_finish():
    choix = pytest.importorskip("choix")
    wins = _two_weakly_linked_groups()
    reference = choix.ilsr_pairwise_dense(wins, alpha=0.0, tol=1e-14, max_iter=1_000_000)
    fit = S.bradley_terry_fit(wins, prior=0.0)
    assert bool(fit.converged) and fit.iterations < S.BT_MAX_ITER
    np.testing.assert_allclose(fit.log_p, reference - reference.mean(), atol=1e-9)
    # The old 10,000-iteration MM stopped far from the optimum and said nothing.
    assert np.abs(_old_mm(wins, prior=0.0) - reference).max() > 0.05


def test_bradley_terry_matches_choix_on_random_dense_matrices():
    choix = pytest.importorskip("choix")
    rng = np.random.default_rng(7)
    for _ in range(5):
        wins = rng.integers(1, 30, size=(5, 5)).astype(float)
        np.fill_diagonal(wins, 0)
        reference = choix.ilsr_pairwise_dense(wins, alpha=0.0, tol=1e-14, max_iter=100_000)
        np.testing.assert_allclose(
            S.bradley_terry(wins, prior=0.0), reference - reference.mean(), atol=1e-9
        )


def test_bradley_terry_reports_non_convergence():
    wins = _two_weakly_linked_groups()
    fit = S.bradley_terry_fit(wins, prior=0.0, max_iter=2)
    assert not bool(fit.converged) and fit.n_not_converged == 1 and fit.max_change > fit.tol
    # No finite maximum without pseudo-wins when a model never wins (Ford 1957): reported as
    # not converged even though the steps end up below the tolerance in floating point.
    never = np.array([[0, 3, 2], [1, 0, 4], [0, 0, 0]], dtype=float)
    assert not bool(S.bradley_terry_fit(never, prior=0.0).converged)
    assert bool(S.bradley_terry_fit(never, prior=0.1).converged)
    fine = np.array([[0, 3, 2], [1, 0, 4], [1, 1, 0]], dtype=float)
    batch = S.bradley_terry_fit(np.stack([never, fine]), prior=0.0)
    assert batch.converged.tolist() == [False, True]


def test_leaderboard_says_how_bradley_terry_converged():
    table = bt_table([1.0, 0.5, 0.0, -1.0], n_instructions=60, seed=1)
    rows, info = S.leaderboard_fit(table, n_resamples=200, seed=0)
    assert rows == S.leaderboard(table, n_resamples=200, seed=0)
    assert info["converged"] is True and 0 < info["iterations"] < S.BT_MAX_ITER
    assert info["bootstrap_fits"] == 200 and info["bootstrap_not_converged"] == 0
    assert info["tol"] == S.BT_TOL and info["prior"] == 0.1


def test_empty_and_degenerate_tables_give_nan_not_errors():
    table, scores = bench_inputs(n_instructions=3, n_metrics=1)
    s = scores["metric_0"]
    empty = table.subset(np.zeros(len(table), dtype=bool))
    assert math.isnan(S.metric_correlation(empty, s[:0], n_resamples=10)["mean_tau"])
    assert S.pairwise_accuracy(empty, s[:0], n_resamples=10)["n_pairs"] == 0
    assert math.isnan(S.human_ceiling(empty, n_resamples=10)["alpha"])
    assert S.leaderboard(empty, n_resamples=10) == []
    assert S.breakdown(empty, s[:0], "category", S.metric_correlation) == {}
    one_model = table.subset(table.model == "model_0")
    (row,) = S.leaderboard(one_model, n_resamples=10)
    assert row["bt_strength"] == 0.0
    one_clinician = table.subset(table.clinician == 0)
    assert S.human_ceiling(one_clinician, n_resamples=10)["n_pairs"] == 0


def test_win_rate_matrix_properties():
    table = bt_table([1.0, 0.0, -1.0, 0.5], n_instructions=80, seed=3, per_review=3)
    # Add a model that only ever meets model_0.
    extra = make_table([(500, 0, [9000, 9001], [1, 1])], models=["model_0", "loner"])
    joined = concat(table, extra)
    models, m = S.win_rate_matrix(joined)
    assert models == sorted(models) and "loner" in models
    assert np.all(np.isnan(np.diag(m)))
    defined = ~np.isnan(m)
    np.testing.assert_allclose((m + m.T)[defined], 1.0)
    assert np.all((m[defined] >= 0) & (m[defined] <= 1))
    lone = models.index("loner")
    zero = models.index("model_0")
    assert m[lone, zero] == 0.5  # one tie
    others = [k for k in range(len(models)) if k not in (lone, zero)]
    assert np.all(np.isnan(m[lone, others]))


def test_win_rate_hand_worked():
    # Review 1: A 1, B 2, C 2 -> A>B, A>C, B~C.  Review 2: B 1, A 2 -> B>A.
    table = make_table(
        [(0, 0, [0, 1, 2], [1, 2, 2]), (1, 0, [3, 4], [2, 1])], models=["A", "B", "C", "A", "B"]
    )
    models, m = S.win_rate_matrix(table)
    assert models == ["A", "B", "C"]
    assert m[0, 1] == pytest.approx(0.5)  # 1 win of 2
    assert m[0, 2] == pytest.approx(1.0)
    assert m[1, 2] == pytest.approx(0.5)  # tie counts half


def test_same_model_pairs_are_not_comparisons():
    # One review shows two responses of model A (ranks 1 and 2) and one of B (rank 3).
    table = make_table([(0, 0, [0, 1, 2], [1, 2, 3])], models=["A", "A", "B"])
    models, m = S.win_rate_matrix(table)
    assert models == ["A", "B"]
    assert m[0, 1] == 1.0 and m[1, 0] == 0.0
    assert np.isnan(m[0, 0])
    rows = {r["model"]: r for r in S.leaderboard(table, n_resamples=50)}
    assert rows["A"]["n_comparisons"] == 2
    assert rows["B"]["n_comparisons"] == 2


def test_leaderboard_correct_share_and_ranks():
    reviews = [(0, 0, [0, 1], [1, 2]), (1, 0, [2, 3], [1, 2]), (2, 0, [4, 5], [2, 1])]
    models = ["A", "B", "A", "B", "A", "B"]
    correct = np.array([1.0, 0.0, 1.0, np.nan, 0.0, 1.0])
    rows = S.leaderboard(
        make_table(reviews, models=models, correct=correct), n_resamples=300, seed=0
    )
    by = {r["model"]: r for r in rows}
    assert [r["model"] for r in rows] == ["A", "B"]  # A won 2 of 3
    assert by["A"]["n"] == 3 and by["A"]["n_correct_known"] == 3
    assert by["A"]["share_correct"] == pytest.approx(2 / 3)
    # Three clusters: too few for an interval (a binomial interval would also treat the
    # judgements as independent).
    assert math.isnan(by["A"]["correct_ci_low"]) and math.isnan(by["A"]["correct_ci_high"])
    assert by["B"]["n_correct_known"] == 2 and by["B"]["share_correct"] == 0.5
    assert by["A"]["mean_rank"] == pytest.approx(4 / 3)
    assert by["A"]["bt_strength"] == pytest.approx(-by["B"]["bt_strength"])
    assert by["A"]["n_comparisons"] == 3


# ---------------------------------------------------------------------------------------------
# 10/11. Position bias and breakdown
# ---------------------------------------------------------------------------------------------


def test_position_bias_is_the_mean_per_review_tau():
    reviews = [(0, 0, [0, 1, 2, 3], [1, 2, 3, 4]), (1, 1, [4, 5], [2, 1])]
    table = make_table(reviews, positions=[0, 1, 2, 3, 0, 1])
    out = S.position_bias(table, n_resamples=FAST)
    assert out["positions"] == [0, 1, 2, 3]
    assert out["mean_rank"] == pytest.approx([1.5, 1.5, 3.0, 4.0])
    assert out["count"] == [2, 2, 1, 1]
    # Review 0: tau +1; review 1: tau -1; mean 0.
    assert out["tau"] == pytest.approx(0.0)
    # Pooling the six judgements (what the report did before) gives a clearly positive tau.
    assert sps.kendalltau([0, 1, 2, 3, 0, 1], [1, 2, 3, 4, 2, 1])[0] > 0.5
    # Two clusters: no p-value or interval by default; the mechanics with the minimum lowered.
    assert math.isnan(out["p_value"]) and out["interval_note"].startswith("no interval: 2")
    assert S.position_bias(table, n_resamples=FAST, min_clusters=2)["p_value"] == 1.0
    assert out["n"] == 6 and out["n_reviews"] == 2 and out["n_skipped"] == 0


def test_position_bias_p_value_is_the_cluster_bootstrap_of_review_taus():
    table, _ = random_table(31, n_reviews=90, nan_share=0.0)
    rng = np.random.default_rng(5)
    # Shown positions that lean towards the ranks, with noise: a non-trivial p-value.
    positions = np.argsort(np.argsort(table.rank + rng.normal(0, 4.0, len(table))))
    table = replace(table, position=positions)
    n_resamples, seed = 400, 9
    out = S.position_bias(table, n_resamples=n_resamples, seed=seed)
    taus = {}
    for r in np.unique(table.review):
        m = table.review == r
        if len(np.unique(table.rank[m])) > 1 and len(np.unique(table.position[m])) > 1:
            taus[r] = sps.kendalltau(table.position[m], table.rank[m]).statistic
    # Clusters are drawn in the sorted order of their keys (strings), never of database ids.
    inst = {r: table.clusters[table.review == r][0] for r in taus}
    assert out["n_reviews"] == len(taus)
    assert out["tau"] == pytest.approx(np.mean(list(taus.values())))
    ids = np.unique(list(inst.values()))
    draws = np.random.default_rng(seed).integers(0, len(ids), size=(n_resamples, len(ids)))
    boot = np.array(
        [np.mean([taus[r] for c in row for r in taus if inst[r] == ids[c]]) for row in draws]
    )
    lo, hi, p = plain_bootstrap_t(list(taus.values()), list(inst.values()), n_resamples, seed)
    assert out["p_value"] == pytest.approx(p)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((lo, hi))
    # The percentile distribution of the same resamples, for the reader: the studentized
    # interval is not it (it is wider at this size, and leans with the skew).
    assert (out["ci_low"], out["ci_high"]) != pytest.approx(
        tuple(np.quantile(boot, [0.025, 0.975]))
    )


def test_breakdown_equals_manual_subsets():
    table, scores = random_table(12, n_reviews=60)
    out = S.breakdown(table, scores, "category", S.metric_correlation, n_resamples=200)
    assert sorted(out) == ["cat_a", "cat_b"]
    for cat, res in out.items():
        mask = table.category == cat
        assert res == S.metric_correlation(table.subset(mask), scores[mask], n_resamples=200)
    by_spec = S.breakdown(table, None, "specialty", S.position_bias, n_resamples=200)
    assert by_spec == {"spec": S.position_bias(table, n_resamples=200)}
    with pytest.raises(ValueError):
        S.breakdown(table, scores, "colour", S.metric_correlation)


# ---------------------------------------------------------------------------------------------
# Benchmark inputs
# ---------------------------------------------------------------------------------------------


def test_bench_inputs_shape_and_signal():
    table, scores = bench_inputs(n_instructions=40, n_responses=5, n_clinicians=3, n_metrics=4)
    assert len(table) == 40 * 5 * 3
    assert sorted(scores) == [f"metric_{j}" for j in range(4)]
    for inst in range(40):
        assert set(table.clinician[table.instruction == inst]) == {0, 1, 2}
    # a response has one score, whichever clinician's row it is on
    for s in scores.values():
        for resp in np.unique(table.response)[:20]:
            vals = s[table.response == resp]
            assert np.all(vals == vals[0]) or np.all(np.isnan(vals))
    best = S.metric_correlation(table, scores["metric_0"], n_resamples=200)["mean_tau"]
    worst = S.metric_correlation(table, scores["metric_3"], n_resamples=200)["mean_tau"]
    assert best > worst > 0


def test_the_full_benchmark_does_no_python_work_per_resample():
    """The bootstrap is vectorized: the Python calls a full report's core statistics make do not
    grow with the number of resamples. Counted, not timed (timings live in bench_report)."""
    import cProfile
    import pstats

    table, scores = bench_inputs()

    def calls(n_resamples: int) -> int:
        S.resampling._cluster_counts.cache_clear()
        profile = cProfile.Profile()
        profile.enable()
        for s in scores.values():
            S.metric_correlation(table, s, n_resamples=n_resamples)
        profile.disable()
        return int(pstats.Stats(profile).total_calls)

    few, many = calls(200), calls(2000)
    # A per-resample Python loop would add at least one call per extra resample and metric.
    assert many - few < 1800 * len(scores)


# ---------------------------------------------------------------------------------------------
# 12. Context length
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("b,c", [(0, 0), (1, 0), (3, 9), (10, 10), (0, 7), (25, 12), (40, 71)])
def test_mcnemar_exact_matches_statsmodels(b, c):
    contingency = pytest.importorskip("statsmodels.stats.contingency_tables")
    reference = contingency.mcnemar([[5, b], [c, 4]], exact=True).pvalue
    assert S.mcnemar_exact(b, c) == pytest.approx(reference, rel=1e-12)


def _context_table(rng, n_instructions=40, n_clinicians=2):
    """Instructions answered by X-32k, X-2k and Y; X-32k is correct more often than X-2k."""
    reviews, models, correct = [], [], []
    resp = 0
    for inst in range(n_instructions):
        responses = list(range(resp, resp + 3))
        resp += 3
        for clin in range(n_clinicians):
            long_ok, short_ok = rng.random() < 0.8, rng.random() < 0.5
            ranks = [1, 3, 2] if long_ok and not short_ok else list(rng.permutation([1, 2, 3]))
            reviews.append((inst, clin, responses, ranks))
            models.extend(["X-32k", "X-2k", "Y"])
            correct.extend([long_ok, short_ok, True])
    return make_table(reviews, models=models, correct=correct)


def test_context_length_analysis_hand_checked_against_plain_loops():
    contingency = pytest.importorskip("statsmodels.stats.contingency_tables")
    table = _context_table(np.random.default_rng(3))
    variants = {"X-32k": ("X", 32768), "X-2k": ("X", 2048)}
    out = S.context_length_analysis(table, variants, n_resamples=300, seed=4)
    assert [(c["base_model"], c["context_length"]) for c in out["cells"]] == [
        ("X", 2048),
        ("X", 32768),
    ]
    for cell in out["cells"]:
        mine = table.model == cell["models"][0]
        assert cell["share_correct"] == pytest.approx(table.correct[mine].mean())
        assert cell["mean_rank"] == pytest.approx(table.rank[mine].mean())
    (cmp,) = out["comparisons"]
    assert (cmp["long"], cmp["short"]) == (32768, 2048)
    pairs = []
    for r in np.unique(table.review):
        m = table.review == r
        long = m & (table.model == "X-32k")
        short = m & (table.model == "X-2k")
        pairs.append(
            (
                table.instruction[m][0],
                bool(table.correct[long][0]),
                bool(table.correct[short][0]),
                table.rank[short][0] - table.rank[long][0],
            )
        )
    b = sum(lo and not sh for _, lo, sh, _ in pairs)
    c = sum(sh and not lo for _, lo, sh, _ in pairs)
    assert (cmp["only_long_correct"], cmp["only_short_correct"]) == (b, c)
    assert cmp["n_reviews"] == len(pairs) == 80 and cmp["n_instructions"] == 40
    # Two clinicians per instruction: McNemar would count their pairs as independent, so it
    # is not given; on one clinician's pairs alone (one per cluster) it is, as statsmodels has it.
    assert math.isnan(cmp["mcnemar_p_value"]) and "not independent" in cmp["mcnemar_note"]
    alone = S.context_length_analysis(
        table.subset(table.clinician == 0), variants, n_resamples=300, seed=4
    )["comparisons"][0]
    assert alone["mcnemar_p_value"] == pytest.approx(
        contingency.mcnemar(
            [
                [alone["both_correct"], alone["only_long_correct"]],
                [alone["only_short_correct"], alone["neither_correct"]],
            ],
            exact=True,
        ).pvalue
    )
    d = np.array([float(lo) - float(sh) for _, lo, sh, _ in pairs])
    assert cmp["correct_difference"] == pytest.approx(d.mean())
    assert cmp["correct_difference"] > 0.15  # the long context is right more often
    assert cmp["rank_difference"] == pytest.approx(np.mean([p[3] for p in pairs]))
    # The interval is the studentized cluster bootstrap over instructions, by a plain loop.
    inst = np.array([str(p[0]) for p in pairs])
    lo, hi, p = plain_bootstrap_t(d, inst, 300, 4)
    assert (cmp["correct_difference_ci_low"], cmp["correct_difference_ci_high"]) == pytest.approx(
        (lo, hi)
    )
    assert cmp["correct_difference_p_value"] == pytest.approx(p)


def test_context_length_analysis_without_declared_variants_is_empty():
    table = _context_table(np.random.default_rng(0), n_instructions=3)
    out = S.context_length_analysis(table, {}, n_resamples=50)
    assert out["cells"] == [] and out["comparisons"] == [] and out["n_bases"] == 0
    one = S.context_length_analysis(table, {"X-2k": ("X", 2048)}, n_resamples=50)
    assert len(one["cells"]) == 1 and one["comparisons"] == []


@pytest.mark.parametrize("seed", [5, 6])
def test_batched_bootstraps_equal_one_metric_at_a_time(seed):
    # The report bootstraps every metric (and every pair) in one pass over shared cluster draws.
    # With scores missing here and there, metrics skip different reviews; each must still get
    # exactly the interval (and p-value) it gets alone.
    table, base = random_table(seed, n_reviews=70, nan_share=0.15)
    rng = np.random.default_rng(seed)
    scores = {"a": base, "b": base + rng.normal(0, 1, base.shape), "c": rng.normal(size=base.shape)}
    scores["c"][rng.random(base.shape) < 0.2] = np.nan
    kw = {"n_resamples": 300, "seed": 3, "min_clusters": 2}
    batched = S.metric_correlations(table, scores, **kw)
    for name, s in scores.items():
        alone = S.metric_correlation(table, s, **kw)
        assert batched[name]["ci_low"] == pytest.approx(alone["ci_low"], abs=1e-12)
        assert batched[name]["ci_high"] == pytest.approx(alone["ci_high"], abs=1e-12)
    rows = S.paired_bootstrap_tests(table, scores, **kw)
    assert [(r["metric_a"], r["metric_b"]) for r in rows] == [("a", "b"), ("a", "c"), ("b", "c")]
    for row in rows:
        # Reference: the pair's per-review differences bootstrapped on their own.
        a, b = scores[row["metric_a"]].copy(), scores[row["metric_b"]].copy()
        missing = np.isnan(a) | np.isnan(b)
        a[missing], b[missing] = np.nan, np.nan
        ta, tb = S.per_review_tau(table, a), S.per_review_tau(table, b)
        _, ia, ib = np.intersect1d(ta.review, tb.review, return_indices=True)
        diff = ta.tau[ia] - tb.tau[ib]
        lo, hi, p = plain_bootstrap_t(diff, ta.cluster[ia], 300, 3)
        assert row["difference"] == pytest.approx(diff.mean(), abs=1e-12)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
        assert row["p_value"] == pytest.approx(p)
