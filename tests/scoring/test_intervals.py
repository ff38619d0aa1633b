"""The studentized cluster bootstrap every mean of the report is given with
(``scoring.reports.statistics.intervals``), against plain loops and statsmodels."""

import math

import numpy as np
import pytest
import statsmodels.api as sm

from scoring.reports.statistics import intervals, resampling
from tests.scoring.test_statistics import plain_bootstrap_t


def _clustered(seed, n_clusters, icc=0.3, skew=False):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 6, size=n_clusters)
    clusters = np.repeat([f"patient:{k:03d}" for k in range(n_clusters)], sizes)
    effect = np.repeat(rng.normal(0, math.sqrt(icc), n_clusters), sizes)
    noise = rng.normal(0, math.sqrt(1 - icc), clusters.shape[0])
    values = effect + noise
    if skew:
        values = (values > 0.9).astype(float)  # a share near 0.2: skewed cluster means
    return values, clusters


def test_the_interval_and_p_value_equal_a_plain_loop():
    values, clusters = _clustered(1, 14)
    values[[2, 7]] = np.nan  # ignored, as everywhere
    got = intervals.cluster_mean(values + 0.3, clusters, n_resamples=400, seed=7, min_clusters=2)
    ok = ~np.isnan(values)
    lo, hi, p = plain_bootstrap_t(values[ok] + 0.3, clusters[ok], 400, 7)
    assert got.estimate == pytest.approx(np.nanmean(values + 0.3))
    assert (got.ci_low, got.ci_high) == pytest.approx((lo, hi), abs=1e-12)
    assert got.p_value == pytest.approx(p)
    assert got.method == intervals.INTERVAL_METHOD


def test_the_standard_error_is_statsmodels_cluster_robust_one():
    values, clusters = _clustered(2, 25)
    got = intervals.cluster_mean(values, clusters, n_resamples=50)
    codes = np.unique(clusters, return_inverse=True)[1]
    fit = sm.OLS(values, np.ones((values.shape[0], 1))).fit(
        cov_type="cluster", cov_kwds={"groups": codes}
    )
    assert got.se == pytest.approx(float(fit.bse[0]), rel=1e-10)
    assert got.estimate == pytest.approx(float(fit.params[0]))


def test_columns_share_the_draws_and_equal_one_column_at_a_time():
    values, clusters = _clustered(3, 20)
    other = values + np.random.default_rng(0).normal(0, 1, values.shape)
    other[:5] = np.nan
    both = intervals.cluster_means(
        np.column_stack([values, other]), clusters, n_resamples=300, seed=2
    )
    for column, row in zip((values, other), both, strict=True):
        alone = intervals.cluster_mean(column, clusters, n_resamples=300, seed=2)
        assert (row.ci_low, row.ci_high, row.p_value) == pytest.approx(
            (alone.ci_low, alone.ci_high, alone.p_value), abs=1e-12
        )


def test_the_interval_excludes_the_null_exactly_when_the_p_value_says_so():
    for seed in range(12):
        values, clusters = _clustered(seed, 12)
        r = intervals.cluster_mean(values + 0.25, clusters, n_resamples=999, seed=seed)
        excluded = r.ci_low > 0 or r.ci_high < 0
        assert excluded == (r.p_value <= 0.05), seed


def test_no_interval_below_the_fewest_clusters_and_bounds_hold():
    values, clusters = _clustered(4, 6, skew=True)
    r = intervals.cluster_mean(values, clusters, n_resamples=200)
    assert math.isnan(r.ci_low) and math.isnan(r.p_value)
    assert r.interval_note == "no interval: 6 clusters (fewer than 10)"
    lo, hi = intervals.cluster_ci(values, clusters, 200, 0, 0.95, 2, bounds=(0.0, 1.0))
    assert 0.0 <= lo <= hi <= 1.0
    assert intervals.cluster_ci(np.array([]), np.array([])) == pytest.approx(
        (math.nan, math.nan), nan_ok=True
    )


def test_it_covers_at_ten_clusters_where_the_percentile_interval_runs_short():
    """400 studies of 10 patients (within-patient correlation 0.3, 1-5 values each), the
    same resamples for both methods: the percentile interval misses the truth (0) about one
    time in ten, the studentized one about one in twenty (2 standard errors: +-2.2 points)."""
    rng = np.random.default_rng(11)
    reps, g = 400, 10
    sizes = rng.integers(1, 6, size=(reps, g)).astype(float)
    effect = rng.normal(0, math.sqrt(0.3), (reps, g))
    # The sum of n values with a shared effect: n * effect + N(0, 0.7 n).
    sums = sizes * effect + rng.normal(0, 1, (reps, g)) * np.sqrt(0.7 * sizes)
    draws = resampling._cluster_counts(g, 999, 3)
    studentized = intervals.studentized_totals(sums, sizes, draws)
    covered = (studentized.low <= 0) & (studentized.high >= 0)
    boot = (sums @ draws.T) / (sizes @ draws.T)
    lo, hi = np.quantile(boot, [0.025, 0.975], axis=-1)
    percentile = (lo <= 0) & (hi >= 0)
    assert covered.mean() >= 0.93
    assert percentile.mean() <= 0.92
    assert covered.mean() - percentile.mean() >= 0.03


def test_resamples_without_spread_are_left_out_not_taken_as_infinitely_far():
    """A share at ten patients, seven of whom had every judgement correct: about 3% of the
    resamples draw only those seven, a mean of 1 with no spread. Counted as t = infinity
    they pulled the lower bound to 0; they are undefined, and left out (a plain loop)."""
    values = np.r_[np.ones(7 * 3), [1, 0, 0], [0, 1, 1, 0], [1, 0]].astype(float)
    clusters = np.r_[np.repeat(np.arange(7), 3), [7] * 3, [8] * 4, [9] * 2]
    got = intervals.cluster_mean(values, clusters, n_resamples=2000, seed=1, bounds=(0, 1))
    lo, hi, p = plain_bootstrap_t(values, clusters, 2000, 1)
    assert (got.ci_low, got.ci_high) == pytest.approx((lo, min(hi, 1.0)))
    assert got.ci_low > 0.5
