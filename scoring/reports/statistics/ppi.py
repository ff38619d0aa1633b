"""Prediction-powered estimates: clinicians' judgements on the reviewed instructions plus a
predictor's on every instruction of the study.

Prediction-powered inference (Angelopoulos et al., Science 2023; PPI++, Angelopoulos, Duchi and
Zrnic 2023) estimates a mean ``theta = E[Y]`` from ``n`` labelled units (the clinicians' ``Y``
and the predictor's ``Yhat``) and ``N`` unlabelled ones (``Yhat`` only)::

    theta_hat = mean_N(lam * Yhat_unlabelled) + mean_n(Y - lam * Yhat)

The second term (the "rectifier") removes whatever bias the predictor has, so the interval is
valid however good or bad the predictions are; the better they track ``Y``, the narrower it is.
``lam`` is chosen to minimise the variance (PPI++'s power tuning; ``ppi_py`` computes it as
``cov(Y, Yhat) / ((1 + n/N) var(Yhat))``), *unclipped* here: a metric's scores live on their
own scale, a BLEU of 0.3 may mean "correct" and a predicted rank runs the other way, and
``lam`` is what rescales them; ``lam = 0`` is the clinicians-only estimate, so a useless
predictor costs almost nothing.

Here the labelled units are the reviewed instructions (``Y``: the mean over their reviews), the
unlabelled ones every other instruction of the study: the two sets are disjoint, as ``ppi_py``
assumes. Instructions of one patient are not independent, so the variance is a sum over the
report's resampling clusters of each cluster's contribution to both means
(:func:`ppi_mean_clustered`); with one instruction per cluster it is ``ppi_py``'s own.

Three estimands per model, each a mean over instructions (``ppi_py``'s ``ppi_mean_ci`` when
clusters are instructions): the share judged correct (``Yhat``: the predictor's score), the
mean rank (``Yhat``: the response's rank by the predictor among the instruction's responses)
and, per pair of models, the win rate (``Yhat``: 1, 1/2 or 0 as the predictor orders the pair).
A predictor learned from the same clinicians (the learned metric) is used by cross-prediction
(``crossppi_mean_ci``): each reviewed instruction is predicted by the fold model that never saw
its patient, every other one by the mean of the fold models.

Bradley-Terry strengths solve the rectified logistic estimating equation the same way
(:func:`ppi_logistic_units`). ``effective_n`` is how many reviewed instructions the classical
interval would need to be as narrow as the prediction-powered one
(``n * se_classical^2 / se_ppi^2``); the report turns it into clinician reviews at the study's
reviews per reviewed instruction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from .correlation import _review_pairs
from .resampling import MIN_CLUSTERS, interval_note
from .table import Array, JudgementTable, _as_float

# Fewer labelled units than this: no interval (a variance from 2 points says nothing).
MIN_LABELLED = 3
# A Bradley-Terry log-strength beyond this has run off to infinity (a model that never won or
# never lost; the leaderboard's fit adds pseudo-wins, an unbiased estimating equation cannot).
MAX_LOG_STRENGTH = 20.0


@dataclass(frozen=True, eq=False)
class Predictions:
    """Every response of the study, reviewed or not, with the predictor's value.

    ``instruction`` matches ``JudgementTable.instruction``; ``cluster`` is the response's
    resampling unit (the same keys as the table's ``cluster_keys``); ``value`` is higher =
    better, nan where the predictor has no value. ``folds`` (optional, ``(rows, K)``) holds a
    cross-fitted predictor's value by each of its K fold models; ``fold`` (optional) the fold
    whose model never saw the row's patient (-1 where none is assigned).
    """

    instruction: Array
    cluster: Array
    model: Array
    value: Array
    folds: Array | None = None
    fold: Array | None = None

    def __post_init__(self) -> None:
        n = np.asarray(self.instruction).shape[0]
        for name in ("cluster", "model", "value"):
            if np.asarray(getattr(self, name)).shape != (n,):
                raise ValueError(f"Predictions.{name} needs one entry per response")
        if (self.folds is None) != (self.fold is None):
            raise ValueError("give both folds and fold, or neither")
        if self.folds is not None and np.asarray(self.folds).shape[0] != n:
            raise ValueError("Predictions.folds needs one row per response")


@dataclass(frozen=True, eq=False)
class MeanEstimate:
    """One mean, prediction-powered and clinicians-only, on the same labelled units."""

    estimate: float
    ci_low: float
    ci_high: float
    se: float
    classical: float
    classical_ci_low: float
    classical_ci_high: float
    classical_se: float
    lam: float
    n: int  # labelled units
    n_unlabelled: int
    effective_n: float  # labelled units the classical interval would need for the same width
    method: str

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be strictly between 0 and 1")
    return float(sps.norm.ppf(1.0 - (1.0 - confidence) / 2.0))


def optimal_lambda(y: Array, yhat: Array, yhat_unlabelled: Array) -> float:
    """PPI++'s variance-minimising ``lam`` for a mean, unclipped: ``ppi_py``'s
    ``_calc_lam_glm`` (for the mean: identity Hessian) without its clip to [0, 1]::

        lam = cov_n(Y, Yhat) / ((1 + n/N) * var(Yhat on labelled and unlabelled units))

    (``cov_n`` divides by n, ``var`` by n + N - 1, as the library does). 0 when the
    predictions do not vary."""
    y, yhat, yu = (np.asarray(a, dtype=float).reshape(-1) for a in (y, yhat, yhat_unlabelled))
    n, big_n = y.shape[0], yu.shape[0]
    if n < 2 or big_n < 1:
        return 0.0
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    var = float(np.var(np.concatenate([yhat, yu]), ddof=1))
    if not var > 0:
        return 0.0
    return cov / ((1.0 + n / big_n) * var)


def _nan_estimate(n: int, big_n: int, method: str) -> MeanEstimate:
    nan = math.nan
    return MeanEstimate(nan, nan, nan, nan, nan, nan, nan, nan, nan, n, big_n, nan, method)


def _classical(y: Array, confidence: float) -> tuple[float, float, float, float]:
    from ppi_py import classical_mean_ci

    lo, hi = classical_mean_ci(y, alpha=1.0 - confidence)
    return float(y.mean()), float(lo), float(hi), float(y.std() / math.sqrt(y.shape[0]))


def ppi_mean(
    y: Array, yhat: Array, yhat_unlabelled: Array, confidence: float = 0.95
) -> MeanEstimate:
    """The library's prediction-powered mean for independent units (what
    :func:`ppi_mean_clustered` reduces to with one instruction per cluster; kept as the
    reference it is tested against): ``ppi_py.ppi_mean_ci`` at the unclipped optimal ``lam``,
    beside the classical CLT interval (``ppi_py.classical_mean_ci``) on the same units."""
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    y, yhat, yu = (np.asarray(a, dtype=float).reshape(-1) for a in (y, yhat, yhat_unlabelled))
    n, big_n = y.shape[0], yu.shape[0]
    method = "PPI++ mean (power-tuned lambda, unclipped)"
    if n < MIN_LABELLED or big_n < 1:
        return _nan_estimate(n, big_n, method)
    z = _z(confidence)
    lam = optimal_lambda(y, yhat, yu)
    estimate = float(np.ravel(ppi_mean_pointestimate(y, yhat, yu, lam=lam))[0])
    lo, hi = (
        float(np.ravel(v)[0]) for v in ppi_mean_ci(y, yhat, yu, alpha=1 - confidence, lam=lam)
    )
    se = (hi - lo) / (2.0 * z)
    c_est, c_lo, c_hi, c_se = _classical(y, confidence)
    return MeanEstimate(
        estimate, lo, hi, se, c_est, c_lo, c_hi, c_se, lam, n, big_n,
        _effective_n(n, c_se, se), method,
    )  # fmt: skip


def crossppi_mean(
    y: Array, yhat: Array, yhat_unlabelled: Array, confidence: float = 0.95
) -> MeanEstimate:
    """Cross-prediction-powered mean (``ppi_py.crossppi_mean_ci``): ``yhat`` the out-of-fold
    predictions of the labelled units, ``yhat_unlabelled`` ``(N, K)`` every fold model's."""
    from ppi_py import crossppi_mean_ci, crossppi_mean_pointestimate

    y, yhat = (np.asarray(a, dtype=float).reshape(-1) for a in (y, yhat))
    yu = np.asarray(yhat_unlabelled, dtype=float)
    n, big_n = y.shape[0], yu.shape[0]
    method = "cross-prediction-powered mean (fold models)"
    if n < MIN_LABELLED or big_n < 1 or yu.ndim != 2:
        return _nan_estimate(n, big_n, method)
    z = _z(confidence)
    estimate = float(np.ravel(crossppi_mean_pointestimate(y, yhat, yu))[0])
    lo, hi = (float(np.ravel(v)[0]) for v in crossppi_mean_ci(y, yhat, yu, alpha=1 - confidence))
    se = (hi - lo) / (2.0 * z)
    c_est, c_lo, c_hi, c_se = _classical(y, confidence)
    return MeanEstimate(
        estimate, lo, hi, se, c_est, c_lo, c_hi, c_se, 1.0, n, big_n,
        _effective_n(n, c_se, se), method,
    )  # fmt: skip


def _effective_n(n: int, classical_se: float, se: float) -> float:
    if not (se > 0 and math.isfinite(classical_se)):
        return math.nan
    return n * (classical_se / se) ** 2


# Folds of the cross-fitted tuning: each fold's lambda is tuned on the other folds' reviews.
TUNING_FOLDS = 5
TUNING = ("cross-fit", "same labels")


def _t_quantile(confidence: float, df: float) -> float:
    return float(sps.t.ppf(1.0 - (1.0 - confidence) / 2.0, df)) if df > 0 else math.nan


def _fold_lambdas(y: Array, f_lab: Array, c_lab: Array, n_unlabelled: int, folds: int) -> Array:
    """Per reviewed instruction (last axis; leading axes are separate studies or columns), the
    lambda tuned without its fold.

    Folds are dealt over the reviewed clusters in the sorted order of their codes (cluster
    ``k`` of that order in fold ``k mod folds``): fixed by the design, never by the outcomes.
    Fold ``j``'s lambda is PPI++'s power tuning for a mean, unclipped, computed on the other
    folds' reviewed instructions alone::

        lam_j = cov(Y, Yhat) / ((1 + n/N) var(Yhat))     over reviewed instructions not in j

    (``ppi_py``'s ``_calc_lam_glm`` pools the predictions' variance over the labelled and
    unlabelled units; here it is the training folds' reviewed instructions', so that the
    lambda is a function of the other folds alone), so it is independent of fold ``j``'s
    labels and of every unreviewed prediction."""
    codes = np.unique(c_lab)
    fold_of_code = np.arange(codes.shape[0]) % folds
    fold = fold_of_code[np.searchsorted(codes, c_lab)]
    lam = np.zeros(y.shape)
    ratio = y.shape[-1] / n_unlabelled
    for j in range(folds):
        train = fold != j
        yt, ft = y[..., train], f_lab[..., train]
        if yt.shape[-1] < 2:
            continue
        yc = yt - yt.mean(-1, keepdims=True)
        fc = ft - ft.mean(-1, keepdims=True)
        cov = (yc * fc).mean(-1)
        var = (fc * fc).mean(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam_j = np.where(var > 0, cov / ((1.0 + ratio) * var), 0.0)
        lam[..., ~train] = lam_j[..., None]
    return lam


def ppi_mean_clustered(
    y: Array,
    f_lab: Array,
    cluster_lab: Array,
    f_unl: Array,
    cluster_unl: Array,
    confidence: float = 0.95,
    *,
    lam: float | None = None,
    cross_fitted: bool = False,
    tuning: str = "cross-fit",
    interval: str = "t",
) -> MeanEstimate:
    """The prediction-powered mean over instructions with a cluster-robust variance.

    ``y``/``f_lab``: the reviewed instructions' outcome and prediction; ``f_unl``: the others'
    predictions; ``cluster_*``: each instruction's cluster (integer codes shared by both sides:
    a patient's reviewed and unreviewed instructions are one cluster). With one ``lam`` the
    estimate is ``lam mean(f_unl) + mean(y - lam f_lab)``; its influence per cluster ``c``::

        psi_c = sum_{reviewed i in c} ((y_i - ybar) - lam (f_i - fbar_lab)) / n
              + lam sum_{unreviewed i in c} (f_i - fbar_unl) / N

    ``lam`` given: that lambda, and the estimate is **unbiased** (for a fixed lambda, whatever
    the predictor). ``lam`` None, ``tuning``:

    - ``"cross-fit"`` (the default): reviewed instructions are dealt into ``TUNING_FOLDS``
      folds by cluster (:func:`_fold_lambdas`), each fold's lambda tuned on the other folds'
      reviews only, and ``estimate = mean_i(y_i - lam_(i) f_i) + mean_i(lam_(i)) mean(f_unl)``
      (the folds' estimates weighted by their reviewed instructions): still **unbiased**, since
      no lambda saw the labels it multiplies. Tuning on the same labels biased the estimate
      (0.007 at 18 reviewed instructions, about 4 Monte Carlo standard errors) and its
      interval covered 0.89-0.92;
    - ``"same labels"``: PPI++'s tuning on the very labels, the lambda minimising this
      variance, ``-sum_c a_c b_c / sum_c b_c^2`` with ``a_c`` the reviewed side's centred
      outcomes and ``b_c`` the predictions' terms above (not ``ppi_py``'s ``_calc_lam_glm``,
      which pools the predictions' variance over both sides, ``cov / ((1 + n/N) var)``; the two
      agree when that variance is the same on both sides): unbiased only asymptotically.

    ``interval``: ``"z"`` is ``ppi_py.ppi_mean_ci``'s normal interval (exactly it when every
    cluster is one instruction: its ``std`` divides by n, as here); ``"t"`` (the default) scales
    each side's variance by ``G/(G-1)`` over its clusters and takes Student's quantile at the
    reviewed clusters' ``G_lab - 1`` degrees of freedom (:func:`_two_sided_t`): with ten to
    fifteen reviewed clusters the normal interval covered 0.85-0.93, this one 0.94-0.96
    (``bench_coverage``).
    When a patient's instructions fall on both sides, the covariance between the two means is
    counted, not assumed away. ``cross_fitted``: ``f_lab`` out-of-fold, ``f_unl`` the fold
    models' mean, ``lam = 1`` (``ppi_py.crossppi_mean_ci``'s estimator).
    """
    res = ppi_means_clustered(
        np.asarray(y, dtype=float).reshape(1, -1),
        np.asarray(f_lab, dtype=float).reshape(1, -1),
        cluster_lab,
        np.asarray(f_unl, dtype=float).reshape(1, -1),
        cluster_unl,
        confidence,
        lam=lam,
        cross_fitted=cross_fitted,
        tuning=tuning,
        interval=interval,
    )
    return res.row(0)


@dataclass(frozen=True, eq=False)
class MeanEstimates:
    """:class:`MeanEstimate`'s fields as arrays, one per leading index (``n``, ``n_unlabelled``
    and ``method`` shared)."""

    estimate: Array
    ci_low: Array
    ci_high: Array
    se: Array
    classical: Array
    classical_ci_low: Array
    classical_ci_high: Array
    classical_se: Array
    lam: Array
    n: int
    n_unlabelled: int
    effective_n: Array
    method: str

    def row(self, index: int | tuple[int, ...]) -> MeanEstimate:
        def at(a: Array) -> float:
            return float(a[index])

        return MeanEstimate(
            at(self.estimate), at(self.ci_low), at(self.ci_high), at(self.se),
            at(self.classical), at(self.classical_ci_low), at(self.classical_ci_high),
            at(self.classical_se), at(self.lam), self.n, self.n_unlabelled,
            at(self.effective_n), self.method,
        )  # fmt: skip


def _members(codes: Array, g: int) -> Array:
    """``(units, g)`` one-hot matrix of each unit's cluster: ``values @ members`` sums by cluster
    over the last axis, for every leading index at once."""
    out: Array = np.zeros((codes.shape[0], g))
    out[np.arange(codes.shape[0]), codes] = 1.0
    return out


def ppi_means_clustered(
    y: Array,
    f_lab: Array,
    cluster_lab: Array,
    f_unl: Array,
    cluster_unl: Array,
    confidence: float = 0.95,
    *,
    lam: float | None = None,
    cross_fitted: bool = False,
    tuning: str = "cross-fit",
    interval: str = "t",
) -> MeanEstimates:
    """:func:`ppi_mean_clustered` for every leading index of ``y`` and ``f_lab`` (``(..., n)``)
    and ``f_unl`` (``(..., N)``), the clusters (and so the folds) shared: many columns of a
    report, or many simulated studies, in one numpy pass. :func:`ppi_mean_clustered` is this
    function on a single row."""
    y, f_lab, f_unl = (np.asarray(a, dtype=float) for a in (y, f_lab, f_unl))
    c_lab = np.asarray(cluster_lab, dtype=np.int64).reshape(-1)
    c_unl = np.asarray(cluster_unl, dtype=np.int64).reshape(-1)
    n, big_n = y.shape[-1], f_unl.shape[-1]
    lead = y.shape[:-1]
    if tuning not in TUNING or interval not in ("t", "z"):
        raise ValueError(f"tuning is one of {TUNING}, interval 't' or 'z'")
    if cross_fitted:
        method = "cross-prediction-powered mean (fold models), cluster-robust"
    elif lam is not None:
        method = f"prediction-powered mean (fixed lambda {lam:g}), cluster-robust"
    elif tuning == "cross-fit":
        method = (
            "PPI++ mean (lambda cross-fitted over folds of patients, unclipped), cluster-robust"
        )
    else:
        method = "PPI++ mean (power-tuned lambda, unclipped), cluster-robust"
    method += ", Student's t" if interval == "t" else ""
    if n < MIN_LABELLED or big_n < 1:
        nan = np.full(lead, math.nan)
        return MeanEstimates(nan, nan, nan, nan, nan, nan, nan, nan, nan, n, big_n, nan, method)
    g = int(max(c_lab.max(initial=-1), c_unl.max(initial=-1))) + 1
    m_lab, m_unl = _members(c_lab, g), _members(c_unl, g)
    ybar, fbar_lab = y.mean(-1, keepdims=True), f_lab.mean(-1, keepdims=True)
    a = ((y - ybar) / n) @ m_lab
    b_unl = ((f_unl - f_unl.mean(-1, keepdims=True)) / big_n) @ m_unl
    b = b_unl - ((f_lab - fbar_lab) / n) @ m_lab
    lam_i: Array
    if cross_fitted:
        lam_i = np.ones(y.shape)
    elif lam is not None:
        lam_i = np.full(y.shape, float(lam))
    elif tuning == "cross-fit":
        lam_i = _fold_lambdas(y, f_lab, c_lab, big_n, min(TUNING_FOLDS, np.unique(c_lab).size))
    else:
        bb = (b * b).sum(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            one = np.where(bb > 0, -(a * b).sum(-1) / bb, 0.0)
        lam_i = np.broadcast_to(one[..., None], y.shape)
    lam_bar = lam_i.mean(-1)
    r = y - lam_i * f_lab
    estimate = r.mean(-1) + lam_bar * f_unl.mean(-1)
    # The two sides' influences per cluster: reviewed (centred rectifier) and unreviewed.
    lab_side = ((r - r.mean(-1, keepdims=True)) / n) @ m_lab
    unl_side = lam_bar[..., None] * b_unl
    g_lab, g_unl = np.unique(c_lab).shape[0], np.unique(c_unl).shape[0]
    if interval == "z":
        q = c_q = _z(confidence)
        se = np.sqrt(((lab_side + unl_side) ** 2).sum(-1))
        c_se = np.sqrt((a**2).sum(-1))
    else:
        se, df = _two_sided_t(lab_side, unl_side, g_lab, g_unl)
        c_se, c_df = _two_sided_t(a, np.zeros(a.shape), g_lab, 1)
        q, c_q = _t_quantile(confidence, df), _t_quantile(confidence, c_df)
    c_est = y.mean(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        effective = np.where((se > 0) & np.isfinite(c_se), n * (c_se / se) ** 2, math.nan)
    return MeanEstimates(
        estimate, estimate - q * se, estimate + q * se, se,
        c_est, c_est - c_q * c_se, c_est + c_q * c_se, c_se,
        lam_bar, n, big_n, effective, method,
    )  # fmt: skip


def _two_sided_t(lab: Array, unl: Array, g_lab: int, g_unl: int) -> tuple[Array, float]:
    """Standard error and degrees of freedom of a sum of a reviewed and an unreviewed side's
    means, from their influences per cluster. Each side's variance is scaled by ``G/(G-1)``
    over its own clusters (their covariance, from clusters on both sides, by the root of both
    factors); the degrees of freedom are the reviewed clusters' ``G_lab - 1``: the
    Welch-Satterthwaite value, which credits the unreviewed side's many clusters, still
    covered 93.3-94.5% at 10-15 reviewed patients, ``G_lab - 1`` 94.5-95.6% at 2-5% more
    width (``bench_coverage``)."""
    k_lab = g_lab / (g_lab - 1) if g_lab > 1 else math.nan
    k_unl = g_unl / (g_unl - 1) if g_unl > 1 else 1.0
    v_lab = k_lab * (lab**2).sum(-1)
    v_unl = k_unl * (unl**2).sum(-1)
    cov = math.sqrt(k_lab * k_unl) * (lab * unl).sum(-1)
    se: Array = np.sqrt(np.maximum(v_lab + v_unl + 2.0 * cov, 0.0))
    return se, float(max(g_lab - 1, 1))


# --- from judgements and predictions to units ----------------------------------------------------
@dataclass(frozen=True, eq=False)
class UnitData:
    """Per-instruction outcomes and predictions, and each instruction's unit.

    Arrays are ``(instructions, models)`` (pairs: ``(instructions, models, models)``); nan where
    an instruction has no review (``y_*``) or no prediction (``f_*``, before imputation).
    """

    models: list[str]
    instructions: Array  # instruction ids, sorted
    unit: Array  # each instruction's unit code (0..n_units-1)
    n_units: int
    reviewed: Array  # bool per instruction
    reviews: int  # reviews in the table
    y_correct: Array
    y_rank: Array
    y_win: Array
    f_correct: Array
    f_rank: Array
    f_win: Array
    # Cross-fitted predictor: (instructions, models, K) per fold model, and each instruction's
    # out-of-fold fold (-1: none). None for a fixed predictor.
    fold_values: Array | None = None
    fold_of: Array | None = None


def _rank_within(values: Array) -> Array:
    """Per row, the rank of each column (1 = highest value, ties averaged); nan stays nan."""
    out = np.full(values.shape, np.nan)
    for i, row in enumerate(values):
        ok = ~np.isnan(row)
        if ok.any():
            out[i, ok] = sps.rankdata(-row[ok], method="average")
    return out


def _pair_credit(values: Array) -> Array:
    """``credit[..., i, j]``: 1 when column i is above column j, 1/2 when tied, 0 below; nan
    where either is missing."""
    a, b = values[..., :, None], values[..., None, :]
    with np.errstate(invalid="ignore"):
        credit: Array = (a > b).astype(float) + 0.5 * (a == b)
    credit[np.isnan(a) | np.isnan(b)] = np.nan
    return credit


def unit_data(table: JudgementTable, predictions: Predictions) -> UnitData:
    """Clinicians' outcomes per reviewed instruction and the predictor's on every instruction.

    Instructions judged by clinicians but absent from ``predictions`` are added as instructions
    with no prediction (imputed, see :func:`estimate_targets`)."""
    p_inst = np.asarray(predictions.instruction).astype(np.int64)
    t_inst = np.asarray(table.instruction).astype(np.int64)
    models = sorted(
        set(np.asarray(predictions.model).astype(str)) | set(np.asarray(table.model).astype(str))
    )
    instructions = np.unique(np.concatenate([p_inst, t_inst]))
    m, g = len(models), instructions.shape[0]
    model_of = {name: k for k, name in enumerate(models)}
    # Each instruction's unit: the predictions' cluster key, else the table's.
    key_of: dict[int, str] = {}
    for i, c in zip(
        t_inst.tolist(), np.asarray(table.cluster_keys).astype(str).tolist(), strict=True
    ):
        key_of.setdefault(int(i), c)
    for i, c in zip(
        p_inst.tolist(), np.asarray(predictions.cluster).astype(str).tolist(), strict=True
    ):
        key_of[int(i)] = c
    unit_keys, unit = np.unique(
        np.array([key_of[int(i)] for i in instructions]), return_inverse=True
    )
    inst_idx = np.searchsorted(instructions, p_inst)
    mod_idx = np.array(
        [model_of[str(v)] for v in np.asarray(predictions.model).astype(str)], dtype=np.intp
    )

    f = np.full((g, m), np.nan)
    f[inst_idx, mod_idx] = _as_float(predictions.value)
    fold_values = fold_of = None
    if predictions.folds is not None and predictions.fold is not None:
        folds = np.asarray(predictions.folds, dtype=float)
        fold_values = np.full((g, m, folds.shape[1]), np.nan)
        fold_values[inst_idx, mod_idx] = folds
        fold_of = np.full(g, -1, dtype=np.int64)
        fold_of[inst_idx] = np.asarray(predictions.fold, dtype=np.int64)

    # Clinicians: per instruction and model, the mean over reviews of correct and of rank.
    t_idx = np.searchsorted(instructions, t_inst)
    t_mod = np.array([model_of[str(v)] for v in np.asarray(table.model).astype(str)], dtype=np.intp)
    y_correct = _cell_mean(t_idx, t_mod, _as_float(table.correct), g, m)
    y_rank = _cell_mean(t_idx, t_mod, _as_float(table.rank), g, m)
    # Wins: every pair of responses of two models within one review, averaged over reviews.
    rank = _as_float(table.rank)
    a, b, _, _, _ = _review_pairs(table, None)
    keep = (t_mod[a] != t_mod[b]) & ~np.isnan(rank[a]) & ~np.isnan(rank[b])
    a, b = a[keep], b[keep]
    credit = (rank[a] < rank[b]).astype(float) + 0.5 * (rank[a] == rank[b])
    flat_ab = (t_idx[a] * m + t_mod[a]) * m + t_mod[b]
    flat_ba = (t_idx[a] * m + t_mod[b]) * m + t_mod[a]
    size = g * m * m
    sums = np.bincount(flat_ab, weights=credit, minlength=size)
    sums += np.bincount(flat_ba, weights=1.0 - credit, minlength=size)
    counts = np.bincount(flat_ab, minlength=size) + np.bincount(flat_ba, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        y_win = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan).reshape(g, m, m)
    reviewed = np.zeros(g, dtype=bool)
    reviewed[t_idx] = True
    return UnitData(
        models=models,
        instructions=instructions,
        unit=unit.reshape(-1).astype(np.int64),
        n_units=int(unit_keys.shape[0]),
        reviewed=reviewed,
        reviews=int(np.unique(np.asarray(table.review)).shape[0]),
        y_correct=y_correct,
        y_rank=y_rank,
        y_win=y_win,
        f_correct=f,
        f_rank=_rank_within(f),
        f_win=_pair_credit(f),
        fold_values=fold_values,
        fold_of=fold_of,
    )


def _cell_mean(rows: Array, cols: Array, values: Array, g: int, m: int) -> Array:
    ok = ~np.isnan(values)
    flat = rows[ok] * m + cols[ok]
    sums = np.bincount(flat, weights=values[ok], minlength=g * m)
    counts = np.bincount(flat, minlength=g * m)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan).reshape(g, m)


def _impute(values: Array) -> Array:
    """A missing prediction becomes the mean prediction of its column (its model, or pair) over
    all instructions: any fixed rule keeps the estimate valid, and this one adds no noise."""
    out = np.array(values, dtype=float, copy=True)
    flat = out.reshape(out.shape[0], -1)
    with np.errstate(invalid="ignore"), np.testing.suppress_warnings() as sup:
        sup.filter(RuntimeWarning)
        fill = np.nanmean(flat, axis=0)
    fill = np.where(np.isnan(fill), 0.0, fill)
    missing = np.isnan(flat)
    flat[missing] = np.broadcast_to(fill, flat.shape)[missing]
    return flat.reshape(out.shape)


def _unit_mean(values: Array, unit: Array, mask: Array, n_units: int) -> Array:
    """Per unit, the mean of ``values`` (``(instructions, ...)``) over its instructions in
    ``mask``, ignoring nan; nan where none."""
    flat = values.reshape(values.shape[0], -1)
    rows = mask[:, None] & ~np.isnan(flat)
    out = np.full((n_units, flat.shape[1]), np.nan)
    for k in range(flat.shape[1]):
        ok = rows[:, k]
        s = np.bincount(unit[ok], weights=flat[ok, k], minlength=n_units)
        c = np.bincount(unit[ok], minlength=n_units)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, k] = np.where(c > 0, s / np.maximum(c, 1), np.nan)
    return out.reshape((n_units, *values.shape[1:]))


@dataclass(frozen=True, eq=False)
class TargetArrays:
    """One estimand's labelled ``y``/``yhat`` and unlabelled ``yhat`` per unit, columns = the
    estimand's entries (models, or model pairs). ``yhat_folds`` (cross-fitted predictors):
    the unlabelled units' predictions by each fold model, ``(units, columns, K)``."""

    y: Array
    yhat: Array
    yhat_unlabelled: Array
    yhat_folds: Array | None


def target_arrays(data: UnitData, target: str) -> TargetArrays:
    """The per-unit arrays of one estimand ("correct", "rank" or "win"), for the power
    calculator's plan: a unit with any reviewed instruction is labelled."""
    y_all = {"correct": data.y_correct, "rank": data.y_rank, "win": data.y_win}[target]
    labelled_units = np.zeros(data.n_units, dtype=bool)
    labelled_units[data.unit[data.reviewed]] = True
    if data.fold_values is not None and data.fold_of is not None:
        # Out-of-fold predictions for reviewed instructions; the fold models' for the rest.
        k = data.fold_values.shape[-1]
        own = np.where(data.fold_of >= 0, data.fold_of, 0)
        oof = np.take_along_axis(data.fold_values, own[:, None, None], axis=2)[..., 0]
        oof[data.fold_of < 0] = np.nan
        fold_values = data.fold_values
        if target == "correct":
            fold_values = _calibrate_folds(data)
            oof = np.take_along_axis(fold_values, own[:, None, None], axis=2)[..., 0]
            oof[data.fold_of < 0] = np.nan
        per_fold = [_derive(fold_values[..., j], target) for j in range(k)]
        f_lab = _impute(_derive(oof, target))
        folds = np.stack([_impute(p) for p in per_fold], axis=-1)
        yhat_lab = _unit_mean(f_lab, data.unit, data.reviewed, data.n_units)[labelled_units]
        unl = [
            _unit_mean(folds[..., j], data.unit, ~data.reviewed, data.n_units)[~labelled_units]
            for j in range(k)
        ]
        yhat_folds: Array | None = np.stack(unl, axis=-1)
        yhat_unl = yhat_folds.mean(axis=-1) if yhat_folds is not None else np.zeros(0)
    else:
        f = _impute({"correct": data.f_correct, "rank": data.f_rank, "win": data.f_win}[target])
        yhat_lab = _unit_mean(f, data.unit, data.reviewed, data.n_units)[labelled_units]
        yhat_unl = _unit_mean(f, data.unit, ~data.reviewed, data.n_units)[~labelled_units]
        yhat_folds = None
    y = _unit_mean(y_all, data.unit, data.reviewed, data.n_units)[labelled_units]
    return TargetArrays(y, yhat_lab, yhat_unl, yhat_folds)


def _calibrate_folds(data: UnitData) -> Array:
    """A cross-fitted score on the scale of "correct": fold model j's scores mapped by a
    least-squares line (per model) fitted on the reviewed instructions outside fold j, the
    reviews its model was trained on. Cross-prediction takes the predictions as they are
    (lam = 1), so a ranking score must first be put on the outcome's scale, and only with
    data the fold's own units never touched."""
    assert data.fold_values is not None and data.fold_of is not None
    out = np.full(data.fold_values.shape, np.nan)
    for j in range(data.fold_values.shape[-1]):
        train = data.reviewed & (data.fold_of != j) & (data.fold_of >= 0)
        for k in range(len(data.models)):
            x, y = data.fold_values[train, k, j], data.y_correct[train, k]
            ok = ~np.isnan(x) & ~np.isnan(y)
            if ok.sum() >= 2 and np.var(x[ok]) > 0:
                slope, intercept = np.polyfit(x[ok], y[ok], 1)
            else:
                slope, intercept = 0.0, float(np.mean(y[ok])) if ok.any() else 0.0
            out[:, k, j] = intercept + slope * data.fold_values[:, k, j]
    return out


def _derive(values: Array, target: str) -> Array:
    if target == "correct":
        return values
    if target == "rank":
        return _rank_within(values)
    return _pair_credit(values)


@dataclass(frozen=True, eq=False)
class InstructionArrays:
    """One estimand per instruction: the reviewed instructions' ``y`` and ``f``, the others'
    ``f``, and both sides' cluster codes; columns = the estimand's entries."""

    y: Array
    f_lab: Array
    f_unl: Array
    cluster_lab: Array
    cluster_unl: Array
    cross_fitted: bool


def instruction_arrays(data: UnitData, target: str) -> InstructionArrays:
    """Per instruction, an estimand's outcome (reviewed ones) and prediction (all): "correct",
    "rank" or "win". A cross-fitted predictor gives reviewed instructions their out-of-fold
    prediction and the others the mean of the fold models' (each derived, then averaged)."""
    y_all = {"correct": data.y_correct, "rank": data.y_rank, "win": data.y_win}[target]
    reviewed = data.reviewed
    if data.fold_values is not None and data.fold_of is not None:
        k = data.fold_values.shape[-1]
        values = _calibrate_folds(data) if target == "correct" else data.fold_values
        own = np.where(data.fold_of >= 0, data.fold_of, 0)
        oof = np.take_along_axis(values, own[:, None, None], axis=2)[..., 0]
        oof[data.fold_of < 0] = np.nan
        f_lab = _impute(_derive(oof, target))[reviewed]
        per_fold = np.stack([_impute(_derive(values[..., j], target)) for j in range(k)], -1)
        f_unl = per_fold.mean(axis=-1)[~reviewed]
    else:
        f = _impute({"correct": data.f_correct, "rank": data.f_rank, "win": data.f_win}[target])
        f_lab, f_unl = f[reviewed], f[~reviewed]
    return InstructionArrays(
        y_all[reviewed],
        f_lab,
        f_unl,
        data.unit[reviewed],
        data.unit[~reviewed],
        data.fold_values is not None,
    )


def _column(arrays: InstructionArrays, index: tuple[int, ...], confidence: float) -> MeanEstimate:
    at: Any = (slice(None), *index)  # every instruction, this column
    y = arrays.y[at]
    ok = ~np.isnan(y)
    return ppi_mean_clustered(
        y[ok],
        arrays.f_lab[at][ok],
        arrays.cluster_lab[ok],
        arrays.f_unl[at],
        arrays.cluster_unl,
        confidence,
        cross_fitted=arrays.cross_fitted,
    )


def estimate_targets(
    table: JudgementTable,
    predictions: Predictions,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """Every prediction-powered estimate of the report: per model the share correct, the mean
    rank and the Bradley-Terry strength, per pair of models the win rate; each beside the
    clinicians-only estimate on the same reviewed instructions, with its effective number of
    reviewed instructions and of reviews (at the reviews per reviewed instruction so far)."""
    data = unit_data(table, predictions)
    labelled = int(np.unique(data.unit[data.reviewed]).shape[0])
    n_reviewed = int(data.reviewed.sum())
    per_unit = data.reviews / n_reviewed if n_reviewed else math.nan
    out: dict[str, Any] = {
        "models": data.models,
        "n_units": data.n_units,
        "n_labelled_units": labelled,
        "n_instructions": int(data.instructions.shape[0]),
        "n_reviewed_instructions": int(data.reviewed.sum()),
        "reviews": data.reviews,
        "reviews_per_unit": per_unit,
        "cross_fitted": data.fold_values is not None,
        "confidence": confidence,
    }
    rows = []
    for target in ("correct", "rank"):
        arrays = instruction_arrays(data, target)
        for k, model in enumerate(data.models):
            est = _column(arrays, (k,), confidence)
            rows.append(_row(target, model, None, est, per_unit))
    for model, est in bradley_terry_targets(data, confidence):
        rows.append(_row("bt", model, None, est, per_unit))
    arrays = instruction_arrays(data, "win")
    for i, a in enumerate(data.models):
        for j, b in enumerate(data.models):
            if i < j:  # the win rate of b over a is 1 minus this one
                rows.append(_row("win", a, b, _column(arrays, (i, j), confidence), per_unit))
    if labelled < min_clusters:
        # As everywhere in the report: no interval (nor a "worth N reviews") from fewer reviewed
        # clusters than that; an outside review found 63% coverage of "95%" intervals from 3
        # reviewed patients, and a zero-width one from a single patient.
        blank = ("ci_low", "ci_high", "se", "classical_ci_low", "classical_ci_high",
                 "classical_se", "width_ratio", "effective_n", "effective_reviews")  # fmt: skip
        for row in rows:
            row.update(dict.fromkeys(blank, math.nan))
    out["interval_note"] = interval_note(labelled, min_clusters)
    out["rows"] = rows
    ratios = [
        r["effective_reviews"] / data.reviews
        for r in rows
        if r["target"] == "correct" and data.reviews and math.isfinite(r["effective_reviews"])
    ]
    # The summary line: what the predictor was worth for the share correct, the median model.
    out["effective_reviews_correct"] = (
        float(np.median(ratios)) * data.reviews if ratios else math.nan
    )
    return out


def _row(
    target: str, model: str, other: str | None, est: MeanEstimate, per_unit: float
) -> dict[str, Any]:
    return {
        "target": target,
        "model": model,
        "versus": other,
        **est.as_dict(),
        "width_ratio": (est.ci_high - est.ci_low) / (est.classical_ci_high - est.classical_ci_low)
        if est.classical_ci_high > est.classical_ci_low
        else math.nan,
        "effective_reviews": est.effective_n * per_unit,
    }


# --- Bradley-Terry strengths ----------------------------------------------------------------------
# ``ppi_py`` has logistic regression (``ppi_logistic_ci``) but for independent rows with binary
# labels; a Bradley-Terry fit has several games per unit (every pair of models in every review of
# an instruction), half wins for ties, and a design without a reference. So the same rectified
# estimating equation is solved here with each unit's gradient summed over its games, and the
# library's sandwich variance taken over units. With one game per unit and binary labels it is
# the library's estimator exactly (tested).


@dataclass(frozen=True, eq=False)
class LogisticUnits:
    """A prediction-powered logistic fit over units: parameters, covariance, ``lam``, and the
    clinicians-only fit on the labelled units beside it."""

    theta: Array
    cov: Array
    lam: float
    classical_theta: Array
    classical_cov: Array
    n: int
    n_unlabelled: int


def _expit(z: Array) -> Array:
    out: Array = 0.5 * (1.0 + np.tanh(0.5 * z))
    return out


def _unit_grads(x: Array, y: Array, w: Array, theta: Array) -> Array:
    """Per unit: ``sum_g w_g x_g (sigma(x_g . theta) - y_g)`` (``ppi_py``'s sign)."""
    mu = _expit(x @ theta)
    resid = np.where(w > 0, mu - np.nan_to_num(y), 0.0) * w
    out: Array = np.einsum("ugd,ug->ud", x, resid)
    return out


def _unit_hessian(x: Array, w: Array, theta: Array) -> Array:
    """Sum over units and games of ``w sigma (1 - sigma) x x^T``, ``(d, d)``."""
    mu = _expit(x @ theta)
    out: Array = np.einsum("ugd,ug,uge->de", x, w * mu * (1.0 - mu), x)
    return out


def _solve(
    x_lab: Array, y: Array, yhat: Array, w_lab: Array, x_unl: Array, yhat_unl: Array,
    w_unl: Array, lam: float, labelled_only: bool = False,
) -> Array:  # fmt: skip
    """Root of the rectified estimating equation by Newton steps with the pooled Hessian::

    lam / N sum_unl ghat_u(theta) + 1 / n sum_lab (g_u(theta) - lam ghat_u(theta)) = 0
    """
    n, big_n, d = x_lab.shape[0], x_unl.shape[0], x_lab.shape[-1]
    theta = np.zeros(d)
    for _ in range(100):
        g = _unit_grads(x_lab, y, w_lab, theta).sum(axis=0) / n
        if not labelled_only:
            g += lam * (
                _unit_grads(x_unl, yhat_unl, w_unl, theta).sum(axis=0) / big_n
                - _unit_grads(x_lab, yhat, w_lab, theta).sum(axis=0) / n
            )
        h = _unit_hessian(x_lab, w_lab, theta) / n
        if not labelled_only:
            h = (_unit_hessian(x_lab, w_lab, theta) + _unit_hessian(x_unl, w_unl, theta)) / (
                n + big_n
            )
        step = np.linalg.solve(h + 1e-12 * np.eye(d), g)
        theta = theta - step
        if np.max(np.abs(step)) < 1e-12:
            break
    return theta


def ppi_logistic_units(
    x_lab: Array,
    y: Array,
    yhat: Array,
    w_lab: Array,
    x_unl: Array,
    yhat_unl: Array,
    w_unl: Array,
    lam: float | None = None,
    cluster_lab: Array | None = None,
    cluster_unl: Array | None = None,
) -> LogisticUnits:
    """Prediction-powered logistic regression (no intercept) over units of weighted games.

    ``x_*``: ``(units, games, d)`` designs; ``y``/``yhat``: ``(units, games)`` outcomes in
    [0, 1]; ``w_*``: each game's weight (0: no game). ``lam`` None: PPI++'s optimum (the
    library's ``_calc_lam_glm`` formula at the ``lam = 1`` fit, unclipped). Covariance as
    ``ppi_py.ppi_logistic_ci``: ``H^-1 (n/N Var(lam ghat_unl) + Var(g - lam ghat)) H^-1 / n``
    with ``H`` the pooled Hessian per unit; the clinicians-only fit uses the labelled units
    alone (``H^-1 Var(g) H^-1 / n``). ``cluster_*`` (integer codes shared by both sides):
    units of one cluster are not independent, so the two variances become one sum over
    clusters of the units' centred contributions (each side scaled by its ``n / (n - 1)`` as
    ``np.cov`` does): the library's formula when no cluster spans two units.
    """
    n, big_n = x_lab.shape[0], x_unl.shape[0]
    args = (x_lab, y, yhat, w_lab, x_unl, yhat_unl, w_unl)

    def stats(theta: Array) -> tuple[Array, Array, Array, Array]:
        grads = _unit_grads(x_lab, y, w_lab, theta)
        grads_hat = _unit_grads(x_lab, yhat, w_lab, theta)
        grads_hat_unl = _unit_grads(x_unl, yhat_unl, w_unl, theta)
        hessian = (_unit_hessian(x_lab, w_lab, theta) + _unit_hessian(x_unl, w_unl, theta)) / (
            n + big_n
        )
        return grads, grads_hat, grads_hat_unl, np.linalg.inv(hessian)

    if lam is None:
        grads, grads_hat, grads_hat_unl, inv_h = stats(_solve(*args, lam=1.0))
        gc, hc = grads - grads.mean(axis=0), grads_hat - grads_hat.mean(axis=0)
        cov_grads = (gc.T @ hc + hc.T @ gc) / n
        var_hat = np.atleast_2d(np.cov(np.concatenate([grads_hat, grads_hat_unl]).T))
        denom = 2.0 * (1.0 + n / big_n) * np.trace(inv_h @ var_hat @ inv_h)
        lam = float(np.trace(inv_h @ cov_grads @ inv_h) / denom) if denom > 0 else 0.0
    theta = _solve(*args, lam=lam)
    grads, grads_hat, grads_hat_unl, inv_h = stats(theta)
    c_lab = np.arange(n) if cluster_lab is None else np.asarray(cluster_lab, dtype=np.int64)
    c_unl = n + np.arange(big_n) if cluster_unl is None else np.asarray(cluster_unl, dtype=np.int64)
    meat = _cluster_meat(grads - lam * grads_hat, c_lab, lam * grads_hat_unl, c_unl)
    cov = inv_h @ meat @ inv_h
    c_theta = _solve(*args, lam=0.0, labelled_only=True)
    c_grads = _unit_grads(x_lab, y, w_lab, c_theta)
    c_inv = np.linalg.inv(_unit_hessian(x_lab, w_lab, c_theta) / n)
    c_meat = _cluster_meat(c_grads, c_lab, np.zeros((0, c_grads.shape[1])), c_unl[:0])
    c_cov = c_inv @ c_meat @ c_inv
    return LogisticUnits(theta, cov, float(lam), c_theta, c_cov, n, big_n)


def _cluster_meat(lab: Array, c_lab: Array, unl: Array, c_unl: Array) -> Array:
    """``sum_c psi_c psi_c^T`` with ``psi_c`` the sum over the cluster's labelled rows of
    ``(lab - mean) / n`` and over its unlabelled rows of ``(unl - mean) / N``, each side scaled
    by ``sqrt(rows / (rows - 1))``."""
    d = lab.shape[1]
    g = int(max(c_lab.max(initial=-1), c_unl.max(initial=-1))) + 1
    psi = np.zeros((g, d))
    for rows, codes in ((lab, c_lab), (unl, c_unl)):
        k = rows.shape[0]
        if k < 2:
            continue
        scaled = (rows - rows.mean(axis=0)) / k * math.sqrt(k / (k - 1))
        np.add.at(psi, codes, scaled)
    out: Array = psi.T @ psi
    return out


def bradley_terry_targets(
    data: UnitData, confidence: float = 0.95
) -> list[tuple[str, MeanEstimate]]:
    """Bradley-Terry log-strengths per model (mean zero over models), prediction-powered.

    Games: every pair of models on every instruction, the clinicians' credit (1, 1/2, 0; the
    mean over the instruction's reviews) on reviewed instructions, the predictor's on the
    others (and, for the rectifier, on the reviewed ones); an instruction's gradient sums its
    games, and instructions of one cluster (patient) are one unit of the variance. The last
    model is the fit's reference; the strengths are then centred, with their covariance. Not
    for a cross-fitted predictor."""
    m = len(data.models)
    if m < 2 or data.fold_values is not None:
        return []
    pairs = [(i, j) for i in range(m) for j in range(i + 1, m)]
    d = m - 1
    design = np.zeros((len(pairs), d))
    for g, (i, j) in enumerate(pairs):
        if i < d:
            design[g, i] += 1.0
        if j < d:
            design[g, j] -= 1.0
    ii = np.array([p[0] for p in pairs])
    jj = np.array([p[1] for p in pairs])
    y_inst = data.y_win[:, ii, jj][data.reviewed]
    f_inst = _impute(data.f_win)[:, ii, jj]
    f_lab, f_unl = f_inst[data.reviewed], f_inst[~data.reviewed]
    n, big_n = y_inst.shape[0], f_unl.shape[0]
    if n < MIN_LABELLED or big_n < 1:
        return []
    w_lab = (~np.isnan(y_inst)).astype(float)
    try:
        fit = ppi_logistic_units(
            np.broadcast_to(design, (n, *design.shape)),
            np.nan_to_num(y_inst),
            f_lab,
            w_lab,
            np.broadcast_to(design, (big_n, *design.shape)),
            f_unl,
            np.ones(f_unl.shape),
            cluster_lab=data.unit[data.reviewed],
            cluster_unl=data.unit[~data.reviewed],
        )
    except np.linalg.LinAlgError:
        return []  # a model that never won or never lost: no finite strengths
    if not all(
        np.all(np.isfinite(v)) and np.max(np.abs(v), initial=0.0) < MAX_LOG_STRENGTH
        for v in (fit.theta, fit.classical_theta, fit.cov, fit.classical_cov)
    ):
        return []
    z = _z(confidence)
    lift = (np.eye(m) - 1.0 / m) @ np.vstack([np.eye(d), np.zeros((1, d))])
    strength, c_strength = lift @ fit.theta, lift @ fit.classical_theta
    se = np.sqrt(np.clip(np.diag(lift @ fit.cov @ lift.T), 0.0, None))
    c_se = np.sqrt(np.clip(np.diag(lift @ fit.classical_cov @ lift.T), 0.0, None))
    method = "prediction-powered Bradley-Terry (rectified logistic equation), cluster-robust"
    return [
        (
            model,
            MeanEstimate(
                float(strength[k]),
                float(strength[k] - z * se[k]),
                float(strength[k] + z * se[k]),
                float(se[k]),
                float(c_strength[k]),
                float(c_strength[k] - z * c_se[k]),
                float(c_strength[k] + z * c_se[k]),
                float(c_se[k]),
                fit.lam,
                n,
                big_n,
                _effective_n(n, float(c_se[k]), float(se[k])),
                method,
            ),  # fmt: skip
        )
        for k, model in enumerate(data.models)
    ]
