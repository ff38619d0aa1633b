"""Prediction-powered estimates (scoring.reports.statistics.ppi) against ppi_py, and the power
calculator's arithmetic (scoring.reports.statistics.power) on cases worked by hand."""

from __future__ import annotations

import math

import numpy as np
import ppi_py
import pytest
from ppi_py.ppi import _calc_lam_glm
from scipy import stats as sps

from scoring.reports.statistics import JudgementTable
from scoring.reports.statistics.power import labelled_needed, power_analysis, ppi_variance
from scoring.reports.statistics.ppi import (
    Predictions,
    crossppi_mean,
    estimate_targets,
    optimal_lambda,
    ppi_mean,
    ppi_mean_clustered,
    ppi_means_clustered,
    target_arrays,
    unit_data,
)

MODELS = ("alpha", "beta", "gamma")


def fixed_data(seed=3, n=40, big_n=200, noise=0.3):
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=n + big_n)
    y = (truth[:n] + rng.normal(scale=0.5, size=n) > 0).astype(float)
    yhat = 0.5 + 0.2 * truth + rng.normal(scale=noise, size=n + big_n)
    return y, yhat[:n], yhat[n:]


def crossfit_by_hand(y, f_lab, c_lab, f_unl, c_unl, confidence=0.95, folds=5, fixed=None):
    """The cross-fitted prediction-powered mean and its t interval, written out: reviewed
    clusters dealt into folds in sorted order; fold j's lambda is ppi_py's tuning for a mean,
    cov(Y, Yhat) / ((1 + n/N) var(Yhat)), on the other folds' reviewed instructions; each
    fold's estimate is ppi_py's point estimate at its lambda, weighted by its size. The
    variance sums each side's clusters (scaled by G/(G-1)); Student's t at the reviewed
    clusters' G - 1 degrees of freedom. ``fixed``: that lambda for every fold."""
    y, f_lab, f_unl = (np.asarray(v, dtype=float) for v in (y, f_lab, f_unl))
    c_lab, c_unl = np.asarray(c_lab), np.asarray(c_unl)
    n, big_n = len(y), len(f_unl)
    codes = sorted(set(c_lab.tolist()))
    k = min(folds, len(codes))
    fold = np.array([codes.index(c) % k for c in c_lab])
    lam = np.zeros(n)
    estimate = 0.0
    for j in range(k):
        out = fold != j
        cov = np.cov(y[out], f_lab[out], bias=True)[0, 1]
        lam_j = cov / ((1 + n / big_n) * np.var(f_lab[out])) if fixed is None else fixed
        lam[fold == j] = lam_j
        point = ppi_py.ppi_mean_pointestimate(y[fold == j], f_lab[fold == j], f_unl, lam=lam_j)
        estimate += (fold == j).sum() / n * float(np.ravel(point)[0])
    r = y - lam * f_lab
    lab = {c: 0.0 for c in set(c_lab.tolist()) | set(c_unl.tolist())}
    unl = dict(lab)
    for c, v in zip(c_lab.tolist(), r - r.mean(), strict=True):
        lab[c] += v / n
    for c, v in zip(c_unl.tolist(), f_unl - f_unl.mean(), strict=True):
        unl[c] += lam.mean() * v / big_n
    g_lab, g_unl = len(set(c_lab.tolist())), len(set(c_unl.tolist()))
    v_lab = g_lab / (g_lab - 1) * sum(v * v for v in lab.values())
    v_unl = g_unl / (g_unl - 1) * sum(v * v for v in unl.values())
    cov = math.sqrt(g_lab / (g_lab - 1) * g_unl / (g_unl - 1)) * sum(lab[c] * unl[c] for c in lab)
    se = math.sqrt(v_lab + v_unl + 2 * cov)
    q = sps.t.ppf(1 - (1 - confidence) / 2, g_lab - 1)
    return estimate, estimate - q * se, estimate + q * se, lam


def key_codes(labels):
    """Cluster codes as the estimates number them: in the sorted order of the keys."""
    return np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1)


KEY60 = key_codes([f"p{i}" for i in range(60)])


def study(seed=0, n_inst=60, reviewed=25, overlap=2, quality=1.0, shared_patients=False):
    """A small study: 3 models, ``n_inst`` instructions, the first ``reviewed`` reviewed by
    ``overlap`` clinicians; the predictor is the latent quality plus noise (``quality`` = 0:
    pure noise)."""
    rng = np.random.default_rng(seed)
    strength = np.array([0.8, 0.0, -0.8])
    latent = strength[None, :] + rng.normal(size=(n_inst, 3))
    rows = {k: [] for k in ("review", "instruction", "clinician", "model", "rank", "correct")}
    review = 0
    for i in range(reviewed):
        for c in range(overlap):
            seen = latent[i] + rng.normal(scale=0.6, size=3)
            ranks = sps.rankdata(-np.round(seen, 0), method="min")
            for k in range(3):
                rows["review"].append(review)
                rows["instruction"].append(i)
                rows["clinician"].append(c)
                rows["model"].append(MODELS[k])
                rows["rank"].append(float(ranks[k]))
                rows["correct"].append(float(seen[k] > 0))
            review += 1
    size = len(rows["review"])
    patient = (lambda i: f"p{i // 2}") if shared_patients else (lambda i: f"p{i}")
    table = JudgementTable(
        review=np.array(rows["review"]),
        instruction=np.array(rows["instruction"]),
        clinician=np.array(rows["clinician"]),
        model=np.array(rows["model"], dtype=object),
        response=np.array(rows["instruction"]) * 3
        + np.array([MODELS.index(m) for m in rows["model"]]),
        rank=np.array(rows["rank"]),
        correct=np.array(rows["correct"]),
        position=np.zeros(size, dtype=int),
        category=np.array(["c"] * size, dtype=object),
        specialty=np.array(["s"] * size, dtype=object),
        cluster=np.array([patient(i) for i in rows["instruction"]]),
    )
    inst = np.repeat(np.arange(n_inst), 3)
    model = np.tile(np.array(MODELS, dtype=object), n_inst)
    value = quality * latent.ravel() + rng.normal(scale=0.7, size=n_inst * 3)
    predictions = Predictions(
        instruction=inst,
        cluster=np.array([patient(i) for i in inst]),
        model=model,
        value=value,
    )
    return table, predictions, latent


# --- the mean ------------------------------------------------------------------------------------
def test_optimal_lambda_is_ppi_pys_power_tuning_without_the_clip():
    y, yhat, yu = fixed_data()
    grads = (y - y.mean())[:, None]
    ours = optimal_lambda(y, yhat, yu)
    library = _calc_lam_glm(grads, (yhat - 0.3)[:, None], (yu - 0.3)[:, None], np.eye(1))
    assert ours == pytest.approx(library, rel=1e-12)
    # Scores on another scale: the library would clip lam at 1, we rescale.
    assert optimal_lambda(y, yhat / 10, yu / 10) == pytest.approx(10 * ours, rel=1e-12)


def test_ppi_mean_equals_ppi_py_when_the_tuned_lambda_needs_no_clip():
    y, yhat, yu = fixed_data()
    est = ppi_mean(y, yhat, yu, confidence=0.9)
    assert 0 < est.lam < 1
    lo, hi = ppi_py.ppi_mean_ci(y, yhat, yu, alpha=0.1)  # the library's own tuning
    assert (est.ci_low, est.ci_high) == pytest.approx((lo[0], hi[0]), rel=1e-10)
    point = ppi_py.ppi_mean_pointestimate(y, yhat, yu)
    assert est.estimate == pytest.approx(float(np.ravel(point)[0]), rel=1e-10)
    c_lo, c_hi = ppi_py.classical_mean_ci(y, alpha=0.1)
    assert (est.classical_ci_low, est.classical_ci_high) == pytest.approx((c_lo, c_hi))
    assert est.classical == pytest.approx(y.mean())
    # Narrower than clinicians alone, and worth more labelled units than it has.
    assert est.ci_high - est.ci_low < est.classical_ci_high - est.classical_ci_low
    assert est.effective_n == pytest.approx(
        40 * ((c_hi - c_lo) / (est.ci_high - est.ci_low)) ** 2, rel=1e-9
    )


def test_ppi_mean_at_any_scale_equals_ppi_py_at_the_same_lambda():
    y, yhat, yu = fixed_data()
    est = ppi_mean(y, -40 * yhat, -40 * yu)  # a predicted rank runs the other way
    assert est.lam < 0
    lo, hi = ppi_py.ppi_mean_ci(y, -40 * yhat, -40 * yu, alpha=0.05, lam=est.lam)
    assert (est.ci_low, est.ci_high) == pytest.approx((lo[0], hi[0]), rel=1e-10)
    # Rescaling the predictor changes nothing: lam absorbs it.
    plain = ppi_mean(y, yhat, yu)
    assert (est.ci_low, est.ci_high) == pytest.approx((plain.ci_low, plain.ci_high), rel=1e-9)


def test_a_useless_predictor_costs_next_to_nothing():
    rng = np.random.default_rng(1)
    y = (rng.random(80) < 0.4).astype(float)
    noise = rng.normal(size=80 + 400)
    est = ppi_mean(y, noise[:80], noise[80:])
    width = est.ci_high - est.ci_low
    classical = est.classical_ci_high - est.classical_ci_low
    assert width == pytest.approx(classical, rel=0.05)


def test_crossppi_mean_is_ppi_pys():
    rng = np.random.default_rng(2)
    y, yhat, _ = fixed_data()
    folds = np.column_stack([yhat.mean() + rng.normal(scale=0.2, size=150) for _ in range(5)])
    est = crossppi_mean(y, yhat, folds, confidence=0.9)
    lo, hi = ppi_py.crossppi_mean_ci(y, yhat, folds, alpha=0.1)
    assert (est.ci_low, est.ci_high) == pytest.approx((np.ravel(lo)[0], np.ravel(hi)[0]), rel=1e-10)
    assert est.estimate == pytest.approx(
        float(np.ravel(ppi_py.crossppi_mean_pointestimate(y, yhat, folds))[0])
    )


def test_too_few_reviews_give_no_interval():
    est = ppi_mean(np.array([1.0, 0.0]), np.array([0.5, 0.5]), np.array([0.2, 0.4, 0.6]))
    assert math.isnan(est.ci_low) and est.n == 2


# --- from judgements to units ------------------------------------------------------------------
def test_share_correct_is_ppi_py_on_per_instruction_means():
    table, predictions, _ = study()
    out = estimate_targets(table, predictions)
    assert out["n_units"] == 60 and out["n_labelled_units"] == 25 and out["reviews"] == 50
    beta = next(r for r in out["rows"] if r["target"] == "correct" and r["model"] == "beta")
    # By hand: each reviewed instruction's mean over its two reviews; every prediction as is.
    mine = np.asarray(table.model) == "beta"
    y = np.array(
        [np.asarray(table.correct)[mine & (np.asarray(table.instruction) == i)].mean()
         for i in range(25)]
    )  # fmt: skip
    f = np.asarray(predictions.value)[np.asarray(predictions.model) == "beta"]
    est, lo, hi, lam = crossfit_by_hand(y, f[:25], KEY60[:25], f[25:], KEY60[25:])
    assert beta["estimate"] == pytest.approx(est, rel=1e-10)
    assert (beta["ci_low"], beta["ci_high"]) == pytest.approx((lo, hi), rel=1e-10)
    assert beta["lam"] == pytest.approx(lam.mean())
    assert beta["classical"] == pytest.approx(y.mean())
    assert beta["n"] == 25 and beta["n_unlabelled"] == 35
    assert beta["effective_reviews"] == pytest.approx(beta["effective_n"] * 2)


def test_mean_rank_uses_the_predictors_ranks_within_each_instruction():
    table, predictions, _ = study(seed=4)
    out = estimate_targets(table, predictions)
    row = next(r for r in out["rows"] if r["target"] == "rank" and r["model"] == "gamma")
    value = np.asarray(predictions.value).reshape(60, 3)
    predicted_rank = np.array([sps.rankdata(-v) for v in value])[:, 2]
    mine = np.asarray(table.model) == "gamma"
    y = np.array(
        [np.asarray(table.rank)[mine & (np.asarray(table.instruction) == i)].mean()
         for i in range(25)]
    )  # fmt: skip
    est, lo, hi, _ = crossfit_by_hand(
        y, predicted_rank[:25], KEY60[:25], predicted_rank[25:], KEY60[25:]
    )
    assert (row["estimate"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (est, lo, hi), rel=1e-10
    )
    assert row["lam"] > 0


def test_win_rate_uses_the_predictors_order_of_the_pair():
    table, predictions, _ = study(seed=5)
    out = estimate_targets(table, predictions)
    row = next(
        r
        for r in out["rows"]
        if r["target"] == "win" and (r["model"], r["versus"]) == ("alpha", "gamma")
    )
    value = np.asarray(predictions.value).reshape(60, 3)
    f = (value[:, 0] > value[:, 2]).astype(float) + 0.5 * (value[:, 0] == value[:, 2])
    rank = np.asarray(table.rank).reshape(50, 3)
    credit = (rank[:, 0] < rank[:, 2]) + 0.5 * (rank[:, 0] == rank[:, 2])
    y = credit.reshape(25, 2).mean(axis=1)
    est, lo, hi, _ = crossfit_by_hand(y, f[:25], KEY60[:25], f[25:], KEY60[25:])
    assert (row["estimate"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (est, lo, hi), rel=1e-10
    )
    # One row per unordered pair: 3 models, 3 pairs.
    assert sum(r["target"] == "win" for r in out["rows"]) == 3


def test_units_are_patients_when_instructions_share_records():
    table, predictions, _ = study(shared_patients=True)
    data = unit_data(table, predictions)
    assert data.n_units == 30
    # The power calculator's units: 25 reviewed instructions touch 13 patients (0..12).
    arrays = target_arrays(data, "correct")
    assert arrays.y.shape == (13, 3) and arrays.yhat_unlabelled.shape == (17, 3)
    # The estimates use every instruction; patient 12 has one reviewed and one unreviewed
    # instruction, so its cluster straddles the two sides.
    out = estimate_targets(table, predictions)
    beta = next(r for r in out["rows"] if r["target"] == "correct" and r["model"] == "beta")
    assert beta["n"] == 25 and beta["n_unlabelled"] == 35
    y = np.asarray(table.correct).reshape(25, 2, 3)[:, :, 1].mean(axis=1)
    f = np.asarray(predictions.value).reshape(60, 3)[:, 1]
    codes = key_codes([f"p{i // 2}" for i in range(60)])
    est, lo, hi, _ = crossfit_by_hand(y, f[:25], codes[:25], f[25:], codes[25:])
    assert (beta["estimate"], beta["ci_low"], beta["ci_high"]) == pytest.approx(
        (est, lo, hi), rel=1e-10
    )


def test_clustered_mean_with_one_instruction_per_cluster_is_ppi_pys():
    y, yhat, yu = fixed_data()
    n, big_n = len(y), len(yu)
    z = {"tuning": "same labels", "interval": "z"}
    est = ppi_mean_clustered(y, yhat, np.arange(n), yu, n + np.arange(big_n), 0.9, **z)
    lo, hi = ppi_py.ppi_mean_ci(y, yhat, yu, alpha=0.1, lam=est.lam)
    assert (est.ci_low, est.ci_high) == pytest.approx((lo[0], hi[0]), rel=1e-10)
    # Its lam minimises the variance: no narrower interval at the library's, at 0 or at 1.
    for lam in (optimal_lambda(y, yhat, yu), 0.0, 1.0):
        other = ppi_mean_clustered(
            y, yhat, np.arange(n), yu, n + np.arange(big_n), lam=lam, interval="z"
        )
        assert est.se <= other.se + 1e-15
    c_lo, c_hi = ppi_py.classical_mean_ci(y, alpha=0.1)
    assert (est.classical_ci_low, est.classical_ci_high) == pytest.approx((c_lo, c_hi))
    # The default: lambda cross-fitted, Student's t (checked by hand, with ppi_py's estimates).
    default = ppi_mean_clustered(y, yhat, np.arange(n), yu, n + np.arange(big_n), 0.9)
    by_hand = crossfit_by_hand(y, yhat, np.arange(n), yu, n + np.arange(big_n), 0.9)
    assert (default.estimate, default.ci_low, default.ci_high) == pytest.approx(
        by_hand[:3], rel=1e-10
    )
    # Cross-fitted: crossppi_mean_ci's estimator.
    folds = np.column_stack([yu + k * 0.01 for k in range(3)])
    cross = ppi_mean_clustered(
        y,
        yhat,
        np.arange(n),
        folds.mean(axis=1),
        n + np.arange(big_n),
        0.9,
        cross_fitted=True,
        interval="z",
    )
    lo, hi = ppi_py.crossppi_mean_ci(y, yhat, folds, alpha=0.1)
    assert (cross.ci_low, cross.ci_high) == pytest.approx(
        (np.ravel(lo)[0], np.ravel(hi)[0]), rel=1e-10
    )


def test_clustered_variance_worked_by_hand():
    # Three reviewed instructions (patients 0, 1, 2) and two unreviewed (patients 0 and 1):
    # patients 0 and 1 straddle the two sides. lam = 1, y = (1, 0, 1), f = (.8, .2, .5) on the
    # reviewed, (.6, .4) on the others; psi_c = a_c + b_c with
    # a_c = sum over c's reviewed of (y - ybar) / 3 and
    # b_c = sum over c's unreviewed of (f - .5) / 2 - sum over c's reviewed of (f - .5) / 3.
    y, f_lab, f_unl = np.array([1.0, 0.0, 1.0]), np.array([0.8, 0.2, 0.5]), np.array([0.6, 0.4])
    too_few = ppi_mean_clustered(y[:2], f_lab[:2], [0, 1], f_unl, [0, 1], lam=1.0)
    assert too_few.n == 2 and math.isnan(too_few.se)  # below MIN_LABELLED: no interval
    est = ppi_mean_clustered(y, f_lab, [0, 1, 2], f_unl, [0, 1], lam=1.0, interval="z")
    ybar, fbar = 2 / 3, 0.5
    a = np.array([(1 - ybar) / 3, (0 - ybar) / 3, (1 - ybar) / 3])
    b = np.array([(0.6 - 0.5) / 2 - (0.8 - fbar) / 3, (0.4 - 0.5) / 2 - (0.2 - fbar) / 3, 0.0])
    assert est.se == pytest.approx(math.sqrt(((a + b) ** 2).sum()))
    assert est.estimate == pytest.approx(0.5 + ybar - fbar)


@pytest.mark.parametrize(
    "options",
    [{}, {"tuning": "same labels", "interval": "z"}, {"lam": 1.0}, {"cross_fitted": True}],
)
def test_many_clustered_means_are_each_rows_clustered_mean(options):
    # Simulated studies go through the batched function; the report through the single one:
    # the same estimate, interval and lambda row by row, whatever the tuning.
    rng = np.random.default_rng(3)
    y = rng.random((4, 2, 25))
    f_lab = y + rng.random((4, 2, 25))
    f_unl = rng.random((4, 2, 30))
    c_lab, c_unl = rng.integers(0, 12, 25), rng.integers(0, 20, 30)
    many = ppi_means_clustered(y, f_lab, c_lab, f_unl, c_unl, 0.9, **options)
    for index in np.ndindex(4, 2):
        one = ppi_mean_clustered(y[index], f_lab[index], c_lab, f_unl[index], c_unl, 0.9, **options)
        got = many.row(index).as_dict()
        for key, value in one.as_dict().items():
            assert got[key] == (pytest.approx(value) if isinstance(value, float) else value)


def test_cross_fitted_predictor_goes_through_crossppi():
    table, predictions, latent = study(seed=6)
    rng = np.random.default_rng(0)
    k = 3
    folds = latent.ravel()[:, None] + rng.normal(scale=0.5, size=(180, k))
    fold = np.repeat(np.arange(60) % k, 3)
    fitted = Predictions(
        instruction=predictions.instruction,
        cluster=predictions.cluster,
        model=predictions.model,
        value=predictions.value,
        folds=folds,
        fold=fold,
    )
    out = estimate_targets(table, fitted)
    assert out["cross_fitted"]
    row = next(r for r in out["rows"] if r["target"] == "rank" and r["model"] == "alpha")
    assert row["method"].startswith("cross-prediction")
    # By hand: out-of-fold ranks for reviewed instructions, each fold model's for the rest.
    values = folds.reshape(60, 3, k)
    ranks = np.stack([[sps.rankdata(-values[i, :, j]) for i in range(60)] for j in range(k)], -1)
    oof = ranks[np.arange(60), 0, np.arange(60) % k]
    mine = np.asarray(table.model) == "alpha"
    y = np.array(
        [np.asarray(table.rank)[mine & (np.asarray(table.instruction) == i)].mean()
         for i in range(25)]
    )  # fmt: skip
    # ppi_py's cross-prediction estimate, with the report's Student's t interval.
    point = ppi_py.crossppi_mean_pointestimate(y, oof[:25], ranks[25:, 0, :])
    est, lo, hi, _ = crossfit_by_hand(
        y, oof[:25], KEY60[:25], ranks[25:, 0, :].mean(axis=1), KEY60[25:], fixed=1.0
    )
    assert row["estimate"] == pytest.approx(float(np.ravel(point)[0]), rel=1e-10)
    assert (row["estimate"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (est, lo, hi), rel=1e-10
    )


def test_a_good_predictor_is_worth_more_reviews_than_a_useless_one():
    good = estimate_targets(*study(seed=7, quality=3.0)[:2])
    useless = estimate_targets(*study(seed=7, quality=0.0)[:2])
    assert good["effective_reviews_correct"] > 1.3 * good["reviews"]
    assert useless["effective_reviews_correct"] == pytest.approx(useless["reviews"], rel=0.15)


# --- the power calculator ------------------------------------------------------------------------
def test_clinicians_only_needs_the_textbook_385_for_a_coin_within_5_points():
    # (1.96 * 0.5 / 0.05)^2 = 384.15 -> 385 labelled units.
    se = 0.05 / sps.norm.ppf(0.975)
    assert labelled_needed(
        var_y=0.25, cov=0.0, var_f=1.0, n_total=1000, se_target=se, with_predictor=False
    ) == 385  # fmt: skip
    # A predictor that tells nothing (cov 0) gives lam 0: the same 385.
    assert labelled_needed(
        var_y=0.25, cov=0.0, var_f=1.0, n_total=1000, se_target=se, with_predictor=True
    ) == 385  # fmt: skip


def test_ppi_variance_worked_by_hand():
    # n = 100 of 1000, var(Y) = .25, cov = .2, var(Yhat) = .25 (correlation .8):
    # lam = .2 / ((1 + 100/900) * .25) = .72; rectifier .25 - 2*.72*.2 + .72^2*.25 = .0916,
    # /100 = .000916; imputed .72^2 * .25 / 900 = .000144; total .00106.
    assert float(ppi_variance(100, 1000, 0.25, 0.2, 0.25)) == pytest.approx(0.00106, rel=1e-9)
    # Everything reviewed: the clinicians' variance.
    assert float(ppi_variance(1000, 1000, 0.25, 0.2, 0.25)) == pytest.approx(0.25 / 1000)


def test_the_predictor_needs_the_fewest_units_that_reach_the_target():
    se = 0.05 / sps.norm.ppf(0.975)
    n = labelled_needed(
        var_y=0.25, cov=0.2, var_f=0.25, n_total=1000, se_target=se, with_predictor=True
    )
    assert n is not None and n < 385
    assert (
        ppi_variance(n, 1000, 0.25, 0.2, 0.25) <= se**2 < ppi_variance(n - 1, 1000, 0.25, 0.2, 0.25)
    )
    # By hand at n = 184 (N = 816): lam = .8 / (1 + 184/816) = .6528; rectifier
    # (.25 - 2*.6528*.2 + .6528^2*.25) / 184 = .0005186; imputed .6528^2*.25/816 = .0001306;
    # total .000649 <= (.05/1.96)^2 = .000651, and n = 183 gives .000652 > it. Far more than
    # (1 - .8^2) * 385 = 139: the predictions' own noise over the unreviewed units counts too.
    assert n == 184
    # A study too small for the target even with the predictor.
    assert labelled_needed(
        var_y=0.25, cov=0.2, var_f=0.25, n_total=200, se_target=se, with_predictor=True
    ) is None  # fmt: skip


def test_power_analysis_plans_every_target_from_the_study_so_far():
    table, predictions, latent = study(seed=8, n_inst=120, reviewed=30, quality=2.0)
    metric = {"m1": latent.ravel() + 0.3, "m2": np.random.default_rng(0).normal(size=360)}
    rows_of = np.asarray(table.response)
    plan = power_analysis(
        table,
        predictions,
        table_scores={k: v[rows_of] for k, v in metric.items()},
        prediction_scores=metric,
        metric_a="m1",
        metric_b="m2",
    )
    by = {t["target"]: t for t in plan["targets"]}
    assert set(by) == {"top_two", "margin", "metric_tau"}
    margin = by["margin"]
    # By hand for the margin target: the slowest model's var(Y) / (0.05 / 1.96)^2.
    data = unit_data(table, predictions)
    y = target_arrays(data, "correct").y
    expected = max(math.ceil(np.var(y[:, k]) / (0.05 / sps.norm.ppf(0.975)) ** 2) for k in range(3))
    assert margin["classical_units"] == expected
    assert margin["classical_more_reviews"] == math.ceil((expected - 30) * 2)
    assert margin["ppi_units"] is None or margin["ppi_units"] <= expected
    tau = by["metric_tau"]
    assert tau["current"] > 0  # m1 tracks the clinicians, m2 is noise
    assert tau["labelled_units"] == 30


# --- Bradley-Terry -----------------------------------------------------------------------------
def _single_games(seed, n=60, big_n=300, m=3):
    """Units of one game each between two of ``m`` models, binary outcomes: the case where the
    units' estimating equation is ppi_py's logistic regression."""
    rng = np.random.default_rng(seed)
    strength = np.linspace(1.0, -1.0, m)[: m - 1]
    d = m - 1

    def games(k):
        x = np.zeros((k, d))
        for row in range(k):
            i, j = rng.choice(m, size=2, replace=False)
            if i < d:
                x[row, i] += 1
            if j < d:
                x[row, j] -= 1
        p = 1 / (1 + np.exp(-(x @ strength)))
        return x, (rng.random(k) < p).astype(float), np.clip(p + rng.normal(0, 0.2, k), 0, 1)

    x, y, yhat = games(n)
    xu, _, yhat_u = games(big_n)
    return x, y, yhat, xu, yhat_u


@pytest.mark.parametrize("m", [2, 3])
def test_bradley_terry_with_one_game_per_unit_is_ppi_pys_logistic_regression(m):
    from scoring.reports.statistics.ppi import ppi_logistic_units

    x, y, yhat, xu, yhat_u = _single_games(m, m=m)
    ones, ones_u = np.ones((x.shape[0], 1)), np.ones((xu.shape[0], 1))
    fit = ppi_logistic_units(
        x[:, None, :], y[:, None], yhat[:, None], ones, xu[:, None, :], yhat_u[:, None], ones_u
    )
    point = ppi_py.ppi_logistic_pointestimate(x, y, yhat, xu, yhat_u, lam=fit.lam)
    assert fit.theta == pytest.approx(point, abs=1e-6)
    lo, hi = ppi_py.ppi_logistic_ci(x, y, yhat, xu, yhat_u, alpha=0.05, lam=fit.lam)
    z = sps.norm.ppf(0.975)
    se = np.sqrt(np.diag(fit.cov))
    assert fit.theta - z * se == pytest.approx(lo, abs=1e-5)
    assert fit.theta + z * se == pytest.approx(hi, abs=1e-5)
    # The tuning is the library's formula, unclipped, at the lam = 1 fit.
    from ppi_py.ppi import _logistic_get_stats

    at_one = ppi_py.ppi_logistic_pointestimate(x, y, yhat, xu, yhat_u, lam=1)
    stats = _logistic_get_stats(
        at_one, x, y, yhat, xu, yhat_u, np.ones(len(y)), np.ones(len(yhat_u))
    )
    assert fit.lam == pytest.approx(_calc_lam_glm(*stats), rel=1e-4)
    # Clinicians only: the plain logistic fit of the labelled games.
    classical = ppi_py.ppi_logistic_pointestimate(x, y, yhat, xu, yhat_u, lam=0)
    assert fit.classical_theta == pytest.approx(classical, abs=1e-6)


def test_bradley_terry_rows_are_centred_strengths_ordered_as_the_truth():
    table, predictions, _ = study(seed=9, n_inst=120, reviewed=60, quality=2.0)
    out = estimate_targets(table, predictions)
    bt = {r["model"]: r for r in out["rows"] if r["target"] == "bt"}
    assert set(bt) == set(MODELS)
    assert sum(r["estimate"] for r in bt.values()) == pytest.approx(0, abs=1e-9)
    assert bt["alpha"]["estimate"] > bt["beta"]["estimate"] > bt["gamma"]["estimate"]
    for r in bt.values():
        assert r["ci_low"] < r["estimate"] < r["ci_high"]
        assert r["ci_high"] - r["ci_low"] < r["classical_ci_high"] - r["classical_ci_low"]


def test_a_target_beyond_the_study_falls_back_to_the_clinicians_count():
    table, predictions, _ = study(seed=10, n_inst=30, reviewed=25, quality=2.0)
    plan = power_analysis(table, predictions, margin=0.01, unit_name="instruction")
    margin = next(t for t in plan["targets"] if t["target"] == "margin")
    assert margin["classical_units"] > 30 and margin["classical_beyond_study"]
    assert margin["ppi_units"] == margin["classical_units"] and margin["ppi_beyond_study"]
    assert plan["unit"] == "instruction"


def test_no_bradley_terry_rows_when_a_model_never_loses():
    table, predictions, _ = study(seed=11)
    rank = np.asarray(table.rank).copy()
    rank[np.asarray(table.model) == "alpha"] = 0.0  # alpha ranked first in every review
    never_loses = JudgementTable(
        **{**{f: getattr(table, f) for f in table.__dataclass_fields__}, "rank": rank}
    )
    out = estimate_targets(never_loses, predictions)
    assert not [r for r in out["rows"] if r["target"] == "bt"]
    assert [r for r in out["rows"] if r["target"] == "correct"]  # the rest is still there


def test_no_prediction_powered_interval_from_fewer_reviewed_clusters_than_the_report_allows():
    # An outside review: "95%" intervals covered 63% of the time from 3 reviewed patients, and a
    # single reviewed patient gave a zero-width one; every other section says n/a below 10.
    table, preds, _ = study()
    full = estimate_targets(table, preds, 0.95, min_clusters=2)
    assert all(math.isfinite(r["ci_low"]) for r in full["rows"] if r["target"] == "correct")
    strict = estimate_targets(table, preds, 0.95, min_clusters=full["n_labelled_units"] + 1)
    assert all(
        math.isnan(r["ci_low"]) and math.isnan(r["effective_reviews"]) for r in strict["rows"]
    )
    assert "fewer than" in strict["interval_note"]
    assert [r["estimate"] for r in strict["rows"]] == [r["estimate"] for r in full["rows"]]


def test_the_default_tuning_is_unbiased_where_tuning_on_the_same_labels_is_not():
    """Every unit an independent draw of (Y, Yhat) from four equally likely pairs; four
    reviewed, two not. Enumerating all 4^6 studies gives each estimator's exact expectation:
    the cross-fitted lambda's equals E[Y] (no lambda multiplies the labels it was tuned on);
    PPI++'s tuning on the very labels misses it."""
    support = np.array([[1.0, 0.9], [0.0, 0.6], [1.0, 0.2], [0.0, 0.1]])
    truth = support[:, 0].mean()
    n, big_n = 4, 2
    expected = {"cross-fit": 0.0, "same labels": 0.0}
    for combo in np.ndindex(*(4,) * (n + big_n)):
        draw = support[list(combo)]
        y, f_lab, f_unl = draw[:n, 0], draw[:n, 1], draw[n:, 1]
        for tuning in expected:
            est = ppi_mean_clustered(
                y, f_lab, np.arange(n), f_unl, n + np.arange(big_n), tuning=tuning
            )
            expected[tuning] += est.estimate / 4 ** (n + big_n)
    assert expected["cross-fit"] == pytest.approx(truth, abs=1e-12)
    assert abs(expected["same labels"] - truth) > 1e-3
