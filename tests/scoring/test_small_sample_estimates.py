"""Adaptive (active-inference) estimates at small sizes: a fixed lambda below the size the
tuning needs, CR2 intervals with Bell & McCaffrey's degrees of freedom, checked against
plain matrix algebra and by exact enumeration."""

import itertools

import numpy as np
import pytest
from scipy import linalg
from scipy import stats as sps

from scoring.reports.statistics.active import (
    ACTIVE_TUNE_MIN,
    active_contrasts,
    active_fixed_contrasts,
    active_moments,
)
from scoring.reports.statistics.adaptive_design import ranking_status
from scoring.reports.statistics.intervals import cr2_t_totals


def _cr2_by_matrices(values, clusters, confidence=0.95):
    """CR2 for the mean of ``values`` as the intercept of least squares, written in matrices
    (Bell & McCaffrey 2002; Pustejovsky & Tipton 2018): A_c = (I - H_cc)^(-1/2); the degrees
    of freedom from p_c = (I - H)_c^T A_c X_c (X^T X)^-1 under independent errors,
    nu = (sum_c p_c^T p_c)^2 / sum_cd (p_c^T p_d)^2."""
    y = np.asarray(values, dtype=float)
    n = y.shape[0]
    x = np.ones((n, 1))
    bread = np.linalg.inv(x.T @ x)
    beta = bread @ x.T @ y
    e = y - x @ beta
    hat = x @ bread @ x.T
    m = np.eye(n) - hat
    meat = np.zeros((1, 1))
    p = []
    for c in np.unique(clusters):
        rows = np.flatnonzero(clusters == c)
        a = np.real(linalg.sqrtm(np.linalg.inv(np.eye(rows.size) - hat[np.ix_(rows, rows)])))
        u = x[rows].T @ a @ e[rows]
        meat += np.outer(u, u)
        p.append((m[rows, :].T @ a @ x[rows] @ bread)[:, 0])
    se = float(np.sqrt(bread @ meat @ bread)[0, 0])
    p = np.array(p)
    gram = p @ p.T
    df = np.trace(gram) ** 2 / (gram**2).sum()
    q = sps.t.ppf(1 - (1 - confidence) / 2, df)
    return float(beta[0]), se, df, float(beta[0]) - q * se, float(beta[0]) + q * se


def test_cr2_with_bell_mccaffrey_equals_the_matrix_formulas():
    rng = np.random.default_rng(4)
    sizes = rng.integers(1, 5, size=9)
    clusters = np.repeat(np.arange(9), sizes)
    values = rng.normal(size=clusters.size) + np.repeat(rng.normal(size=9), sizes)
    sums = np.bincount(clusters, weights=values)
    counts = np.bincount(clusters).astype(float)
    got = cr2_t_totals(sums, counts)
    est, se, df, lo, hi = _cr2_by_matrices(values, clusters)
    assert (float(got.estimate), float(got.se), float(got.df)) == pytest.approx((est, se, df))
    assert (float(got.low), float(got.high)) == pytest.approx((lo, hi))
    # Equal clusters: G - 1 degrees of freedom.
    equal = cr2_t_totals(np.arange(6.0), np.full(6, 3.0))
    assert float(equal.df) == pytest.approx(5.0)


def test_fixed_lambda_intervals_are_cr2_over_patients_of_each_units_term():
    rng = np.random.default_rng(2)
    n, k = 40, 3
    yhat = rng.random((n, k))
    y = (rng.random((n, k)) < yhat).astype(float)
    pi = np.clip(0.2 + 0.5 * yhat.mean(1), 0.1, 1.0)
    xi = rng.random(n) < pi
    patients = rng.integers(0, 15, size=n)
    contrasts = np.array([[1.0, 0, 0], [1.0, -1.0, 0]])
    got = active_fixed_contrasts(yhat, y, xi, pi, contrasts, clusters=patients)
    terms = yhat + (np.where(xi[:, None], y, 0.0) - yhat) * np.where(xi, 1 / pi, 0.0)[:, None]
    for p, c in enumerate(contrasts):
        est, se, df, lo, hi = _cr2_by_matrices(terms @ c, patients)
        assert (got.estimate[p], got.se[p], got.df[p]) == pytest.approx((est, se, df))
        assert (got.lower[p], got.upper[p]) == pytest.approx((lo, hi))
    assert np.all(got.lam == 1.0)


def _branches(mu_row, pi):
    yield 1.0 - pi, False, np.zeros(len(mu_row))
    for verdicts in itertools.product([0.0, 1.0], repeat=len(mu_row)):
        v = np.array(verdicts)
        yield pi * float(np.prod(np.where(v == 1, mu_row, 1 - mu_row))), True, v


def test_small_studies_are_unbiased_where_tuning_on_the_same_labels_is_not():
    """Five instructions, two models, each reviewed with a known probability; every outcome
    enumerated. The estimate the admin's page shows at this size (lambda fixed) has exactly
    the truth as its expectation; lambda and gamma tuned on the same labels do not."""
    mu = np.array([[0.9, 0.4], [0.6, 0.7], [0.8, 0.2], [0.3, 0.5], [0.7, 0.6]])
    yhat = np.array([[0.8, 0.5], [0.5, 0.6], [0.9, 0.1], [0.4, 0.4], [0.6, 0.7]])
    pi = np.array([0.5, 0.7, 0.4, 0.6, 0.5])
    truth = mu.mean(0)
    shown, tuned, total = np.zeros(2), np.zeros(2), 0.0
    for combo in itertools.product(*(list(_branches(mu[i], pi[i])) for i in range(5))):
        p = float(np.prod([b[0] for b in combo]))
        if p == 0:
            continue
        xi = np.array([b[1] for b in combo])
        y = np.vstack([b[2] for b in combo])
        total += p
        status = ranking_status(yhat, y, xi, pi)
        assert np.all(status.shares.lam == 1.0)  # 5 reviewed at most: below ACTIVE_TUNE_MIN
        shown += p * status.shares.estimate
        moments = active_moments(yhat, y, xi, pi)
        tuned += p * active_contrasts(moments, np.eye(2)).estimate
    assert total == pytest.approx(1.0)
    assert shown == pytest.approx(truth, abs=1e-12)
    assert np.abs(tuned - truth).max() > 1e-3


def test_the_tuned_estimate_returns_once_enough_patients_are_reviewed():
    rng = np.random.default_rng(3)
    n = ACTIVE_TUNE_MIN + 50
    truth = rng.random((n, 2))
    y = (rng.random((n, 2)) < truth).astype(float)
    yhat = np.clip(truth + rng.normal(0, 0.4, truth.shape), 0, 1)  # a noisy predictor
    xi = np.ones(n, dtype=bool)
    xi[:30] = False
    small = ranking_status(yhat[:60], y[:60], xi[:60], np.full(60, 0.9))
    large = ranking_status(yhat, y, xi, np.full(n, 0.9))
    assert np.all(small.shares.lam == 1.0) and small.shares.df is not None
    assert np.all(np.isfinite(small.shares.df))
    assert np.all(large.shares.lam < 1.0)  # tuned: the noisy predictor weighs less
    assert large.shares.df is None
