"""Means from clinicians' labels, with or without a predictor, under uniform or adaptive designs.

Three estimators of a mean (a model's share correct, or the gap between two models' shares),
each vectorised over leading axes (replicates, models) with the units on the last axis:

- ``classical_mean_ci``: the clinicians' labels alone (the CLT interval; ``ppi_py``'s
  ``classical_mean_ci``);
- ``ppi_mean_ci``: prediction-powered inference (Angelopoulos et al., Science 2023) with the
  power-tuning of PPI++ (Angelopoulos, Duchi & Zrnic 2023): labels on a uniform sample, a
  predictor everywhere; identical to ``ppi_py.ppi_mean_ci`` (tested), written out here so that
  500 simulated studies take one numpy call instead of 500 library calls;
- ``active_mean_ci``: active inference (Zrnic & Candès, ICML 2024): every unit ``i`` gets a
  label with a known probability ``pi_i`` (``xi_i = 1`` when drawn), and

      theta = mean_i [ lam * f_i + (y_i - lam * f_i) * xi_i / pi_i ]

  is unbiased whatever the predictor ``f`` and whatever the probabilities, as long as each
  ``pi_i`` was fixed before ``xi_i`` was drawn (it may depend on earlier waves' labels: the
  terms are then martingale differences and the CLT interval still holds). ``ppi_py`` has no
  estimator for a design with unequal, known probabilities, hence this one; with equal
  probabilities it is PPI on a Bernoulli sample.

``lam`` (power tuning) is chosen from the data to minimise the variance, clipped to [0, 1] as
``ppi_py`` does: 0 gives back the classical (or Horvitz-Thompson) estimate, so a useless
predictor costs almost nothing. Tuned on the very labels it weighs, it is unbiased only
asymptotically: with a few dozen reviewed patients the active estimate tuned so was biased
(0.007 at 18 reviewed instructions) and its normal interval covered 0.84-0.93. Below
``ACTIVE_TUNE_MIN`` reviewed patients the estimates therefore use a fixed ``lam = 1`` (and no
``gamma``: :func:`active_fixed_contrasts`), **unbiased for a fixed lambda** whatever the
predictor, with a CR2 interval over patients at Bell & McCaffrey's degrees of freedom
(``intervals.cr2_t_totals``), which covered 94-96% from 10 to 200 reviewed patients in
``bench_coverage``; the tuned estimate is **unbiased asymptotically**, and is kept for larger
studies. A useless predictor then costs width (``var(y - f)`` where ``lam = 0`` would have
``var(y)``): the price of an interval that holds at ten patients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats as sps

from .intervals import cr2_t_totals

Array = NDArray[np.float64]

# Fewer reviewed patients than this: a fixed lambda (1) instead of one tuned on the labels.
# Chosen by simulation (bench_coverage): tuned, the intervals still covered 92.8-94.1% at 200
# reviewed patients; fixed, 94-96% at every size from 10 to 200.
ACTIVE_TUNE_MIN = 400


@dataclass(frozen=True)
class MeanCI:
    """Estimates and two-sided intervals, one per leading index."""

    estimate: Array
    lower: Array
    upper: Array
    se: Array
    lam: Array  # the power-tuning weight used (0 for the classical estimate)
    df: Array | None = None  # Student's degrees of freedom; None: the normal interval

    @property
    def width(self) -> Array:
        return self.upper - self.lower

    def covers(self, truth: Any) -> NDArray[np.bool_]:
        return np.asarray((self.lower <= truth) & (truth <= self.upper), dtype=bool)


def _z(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")
    return float(sps.norm.ppf(1.0 - alpha / 2.0))


def _ci(estimate: Array, se: Array, lam: Array, alpha: float) -> MeanCI:
    half = _z(alpha) * se
    return MeanCI(estimate, estimate - half, estimate + half, se, lam)


def classical_mean_ci(y: Any, *, alpha: float = 0.05) -> MeanCI:
    """The CLT interval of the mean of ``y`` (last axis), as ``ppi_py.classical_mean_ci``."""
    y = np.asarray(y, dtype=float)
    n = y.shape[-1]
    se = y.std(axis=-1) / np.sqrt(n)
    return _ci(y.mean(axis=-1), se, np.zeros_like(se), alpha)


def ppi_lambda(y: Array, yhat: Array, yhat_unlabeled: Array) -> Array:
    """PPI++'s power-tuning weight for a mean, as ``ppi_py`` computes it (``_calc_lam_glm``
    with ``clip=True``): cov(y, f) / ((1 + n/N) var(f)), f's variance over both samples."""
    n = y.shape[-1]
    big_n = yhat_unlabeled.shape[-1]
    if big_n == 0:
        return np.zeros(y.shape[:-1])
    cov = ((y - y.mean(-1, keepdims=True)) * (yhat - yhat.mean(-1, keepdims=True))).mean(-1)
    pooled = np.concatenate([yhat, yhat_unlabeled], axis=-1)
    var = pooled.var(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(var > 0, cov / ((1.0 + n / big_n) * var), 0.0)
    return np.clip(lam, 0.0, 1.0)


def ppi_mean_ci(
    y: Any, yhat: Any, yhat_unlabeled: Any, *, alpha: float = 0.05, lam: float | None = None
) -> MeanCI:
    """Prediction-powered interval of the mean: labels ``y`` with predictions ``yhat`` on the
    same units (a uniform sample), predictions ``yhat_unlabeled`` on the other units.
    ``lam=None`` tunes the weight (PPI++); ``lam=1`` is plain PPI; ``lam=0`` is classical."""
    y = np.asarray(y, dtype=float)
    yhat = np.asarray(yhat, dtype=float)
    yhat_unlabeled = np.asarray(yhat_unlabeled, dtype=float)
    n = y.shape[-1]
    big_n = yhat_unlabeled.shape[-1]
    if lam is None:
        lam_arr = ppi_lambda(y, yhat, yhat_unlabeled)
    else:
        lam_arr = np.full(y.shape[:-1], float(lam))
    lam_k = lam_arr[..., None]
    rectifier = y - lam_k * yhat
    if big_n:
        imputed_mean = (lam_k * yhat_unlabeled).mean(-1)
        imputed_var = (lam_k * yhat_unlabeled).var(-1) / big_n
    else:
        imputed_mean = np.zeros(y.shape[:-1])
        imputed_var = np.zeros(y.shape[:-1])
    estimate = imputed_mean + rectifier.mean(-1)
    se = np.sqrt(imputed_var + rectifier.var(-1) / n)
    return _ci(estimate, se, lam_arr, alpha)


@dataclass(frozen=True)
class ActiveMoments:
    """What every linear contrast of the models' active estimates needs, from one pass.

    Per unit and model, with ``w = xi / pi``: ``A = f (1 - w)``, ``O = 1 - w`` and
    ``B = y w``. The term of a contrast ``c`` (weights over models) with the predictor
    ``g = lam c.f + gamma`` is ``g + (c.y - g) w = lam c.A + gamma O + c.B``: its mean and
    variance follow from the means and (co)variances of ``A``, ``O`` and ``B``."""

    mean_a: Array  # (…, K)
    mean_b: Array  # (…, K)
    mean_o: Array  # (…,)
    cov_aa: Array  # (…, K, K)
    cov_ab: Array  # (…, K, K)
    cov_bb: Array  # (…, K, K)
    cov_oa: Array  # (…, K)
    cov_ob: Array  # (…, K)
    var_o: Array  # (…,)
    m: Array  # (…,) units


def active_moments(
    yhat: Any, y: Any, xi: Any, pi: Any, *, mask: Any = None, clusters: Any = None
) -> ActiveMoments:
    """Moments over the units (axis -2) of ``yhat`` and ``y`` (…, N, K), ``y`` read only
    where ``xi``; ``xi``, ``pi`` and ``mask`` (the units to average over) are (…, N).

    ``clusters`` (N,), a label per unit shared by every leading axis (the patient of each
    instruction): the covariances are then of cluster sums, so units of one patient count as
    one draw (cluster-robust, as every other section of the report); one unit per cluster is
    exactly the unclustered figure."""
    yhat = np.asarray(yhat, dtype=float)
    xi = np.asarray(xi, dtype=bool)
    pi = np.asarray(pi, dtype=float)
    if np.any(xi & ~(pi > 0)):
        raise ValueError("a labelled unit needs a positive sampling probability")
    weight = np.where(xi, 1.0 / np.where(pi > 0, pi, 1.0), 0.0)
    m_arr = np.broadcast_to(
        np.ones(xi.shape) if mask is None else np.asarray(mask, dtype=float), xi.shape
    )
    m = m_arr.sum(-1)
    mw = m_arr / m[..., None]  # averaging weights (…, N)
    o = 1.0 - weight
    a = yhat * o[..., None]
    b = np.where(xi[..., None], np.asarray(y, dtype=float), 0.0) * weight[..., None]
    am, bm = (a * mw[..., None]).sum(-2), (b * mw[..., None]).sum(-2)
    om = (o * mw).sum(-1)
    a0, b0, o0 = a - am[..., None, :], b - bm[..., None, :], o - om[..., None]
    if clusters is not None:
        return _clustered(am, bm, om, a0, b0, o0, m_arr, m, clusters)
    a0w = np.swapaxes(a0 * mw[..., None], -1, -2)  # (…, K, N)
    o0w = o0 * mw
    return ActiveMoments(
        mean_a=am,
        mean_b=bm,
        mean_o=om,
        cov_aa=a0w @ a0,
        cov_ab=a0w @ b0,
        cov_bb=np.swapaxes(b0 * mw[..., None], -1, -2) @ b0,
        cov_oa=np.einsum("...n,...nk->...k", o0w, a0),
        cov_ob=np.einsum("...n,...nk->...k", o0w, b0),
        var_o=(o0w * o0).sum(-1),
        m=m,
    )


def _clustered(
    am: Array,
    bm: Array,
    om: Array,
    a0: Array,
    b0: Array,
    o0: Array,
    m_arr: Array,
    m: Array,
    clusters: Any,
) -> ActiveMoments:
    """The moments' covariances from cluster sums of the centred terms: Var(mean) is
    ``sum_c S_c S_c' / m**2``, kept here as ``/ m`` (``active_contrasts`` divides by ``m``)."""
    _, codes = np.unique(np.asarray(clusters), return_inverse=True)
    if codes.shape != (m_arr.shape[-1],):
        raise ValueError("clusters must give one label per unit")
    members = np.eye(int(codes.max()) + 1 if codes.size else 0)[codes].T  # (G, N)
    sa = members @ (a0 * m_arr[..., None])  # (…, G, K)
    sb = members @ (b0 * m_arr[..., None])
    so = np.einsum("gn,...n->...g", members, o0 * m_arr)  # (…, G)
    scale = 1.0 / m
    return ActiveMoments(
        mean_a=am,
        mean_b=bm,
        mean_o=om,
        cov_aa=(np.swapaxes(sa, -1, -2) @ sa) * scale[..., None, None],
        cov_ab=(np.swapaxes(sa, -1, -2) @ sb) * scale[..., None, None],
        cov_bb=(np.swapaxes(sb, -1, -2) @ sb) * scale[..., None, None],
        cov_oa=np.einsum("...g,...gk->...k", so, sa) * scale[..., None],
        cov_ob=np.einsum("...g,...gk->...k", so, sb) * scale[..., None],
        var_o=(so * so).sum(-1) * scale,
        m=m,
    )


def active_contrasts(
    moments: ActiveMoments,
    contrasts: Any,
    *,
    alpha: float = 0.05,
    lam: float | None = None,
) -> MeanCI:
    """Active-inference intervals of ``contrasts`` (…, P, K) of the models' means.

    With ``lam=None`` each contrast's predictor is ``lam c.f + gamma``, the pair chosen to make
    the terms least variable (a regression estimator: ``gamma`` removes the variance a
    Horvitz-Thompson sum carries from its random number of labels; ``lam`` in [0, 1] as in
    PPI++). A fixed ``lam`` uses ``lam c.f`` alone (``gamma = 0``): exactly unbiased."""
    c = np.asarray(contrasts, dtype=float)

    def quad(cov: Array) -> Array:
        return np.asarray(np.einsum("...pk,...kl,...pl->...p", c, cov, c), dtype=float)

    def lin(v: Array) -> Array:
        return np.asarray(np.einsum("...pk,...k->...p", c, v), dtype=float)

    var_a, cov_ab, var_b = quad(moments.cov_aa), quad(moments.cov_ab), quad(moments.cov_bb)
    cov_oa, cov_ob = lin(moments.cov_oa), lin(moments.cov_ob)
    var_o = np.broadcast_to(moments.var_o[..., None], var_a.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        if lam is None:
            det = var_a * var_o - cov_oa**2
            joint = np.where(det > 1e-12, (-cov_ab * var_o + cov_oa * cov_ob) / det, 0.0)
            alone = np.where(var_a > 0, -cov_ab / var_a, 0.0)
            lam_arr = np.clip(np.where(var_o > 1e-12, joint, alone), 0.0, 1.0)
            gamma = np.where(var_o > 1e-12, -(cov_ob + lam_arr * cov_oa) / var_o, 0.0)
        else:
            lam_arr = np.full(var_a.shape, float(lam))
            gamma = np.zeros(var_a.shape)
    estimate = (
        lam_arr * lin(moments.mean_a) + gamma * moments.mean_o[..., None] + lin(moments.mean_b)
    )
    var = (
        lam_arr**2 * var_a
        + gamma**2 * var_o
        + var_b
        + 2 * lam_arr * gamma * cov_oa
        + 2 * lam_arr * cov_ab
        + 2 * gamma * cov_ob
    )
    se = np.sqrt(np.maximum(var, 0.0) / moments.m[..., None])
    return _ci(estimate, se, lam_arr, alpha)


def active_mean_ci(
    yhat: Any,
    y: Any,
    xi: Any,
    pi: Any,
    *,
    alpha: float = 0.05,
    lam: float | None = None,
    mask: Any = None,
    clusters: Any = None,
) -> MeanCI:
    """Active inference's interval of the mean of ``y`` over the units (last axis) where
    ``mask`` (default: all), cluster-robust over ``clusters`` when given.

    ``pi`` are the probabilities each unit had of being labelled, known when it was drawn;
    ``xi`` whether it was. The variance is the terms' sample variance over ``m`` units,
    divided by ``m`` (the martingale CLT when the probabilities came from earlier waves)."""
    yhat = np.asarray(yhat, dtype=float)
    shape = yhat.shape
    moments = active_moments(
        yhat[..., None],
        np.asarray(y, dtype=float)[..., None],
        np.broadcast_to(np.asarray(xi, dtype=bool), shape),
        np.broadcast_to(np.asarray(pi, dtype=float), shape),
        mask=None if mask is None else np.broadcast_to(np.asarray(mask, dtype=float), shape),
        clusters=clusters,
    )
    ci = active_contrasts(moments, np.ones((1, 1)), alpha=alpha, lam=lam)
    return MeanCI(*(np.asarray(v[..., 0], dtype=float) for v in _fields(ci)))


def _fields(ci: MeanCI) -> tuple[Array, Array, Array, Array, Array]:
    return ci.estimate, ci.lower, ci.upper, ci.se, ci.lam


def active_fixed_contrasts(
    yhat: Any,
    y: Any,
    xi: Any,
    pi: Any,
    contrasts: Any,
    *,
    lam: float = 1.0,
    alpha: float = 0.05,
    mask: Any = None,
    clusters: Any = None,
) -> MeanCI:
    """Active-inference intervals of ``contrasts`` (…, P, K) at a fixed ``lam`` (no
    ``gamma``): the mean over the units where ``mask`` (default all) of each unit's term
    ``c.(lam f + (y - lam f) xi / pi)`` (:func:`active_terms`), **unbiased** whatever the
    predictor and the probabilities. The interval is CR2 over ``clusters`` (N,) (each unit its
    own without) with Bell & McCaffrey's degrees of freedom, carried in ``df``."""
    yhat = np.asarray(yhat, dtype=float)
    c = np.asarray(contrasts, dtype=float)
    xi_b = np.broadcast_to(np.asarray(xi, dtype=bool), yhat.shape[:-1])
    pi_b = np.broadcast_to(np.asarray(pi, dtype=float), yhat.shape[:-1])
    terms = active_terms(yhat, y, xi_b[..., None], pi_b[..., None], lam)  # (…, N, K)
    per_contrast = np.einsum("...nk,...pk->...pn", terms, c)  # (…, P, N)
    weight = np.broadcast_to(
        np.ones(xi_b.shape) if mask is None else np.asarray(mask, dtype=float), xi_b.shape
    )
    n_units = xi_b.shape[-1]
    labels = np.arange(n_units) if clusters is None else np.asarray(clusters)
    _, codes = np.unique(labels, return_inverse=True)
    members = np.eye(int(codes.max()) + 1 if codes.size else 0)[codes.reshape(-1)]  # (N, G)
    sums = (per_contrast * weight[..., None, :]) @ members  # (…, P, G)
    counts = np.broadcast_to((weight @ members)[..., None, :], sums.shape)
    res = cr2_t_totals(sums, counts, 1.0 - alpha)
    lam_arr = np.full(res.estimate.shape, float(lam))
    return MeanCI(res.estimate, res.low, res.high, res.se, lam_arr, res.df)


def active_terms(yhat: Any, y: Any, xi: Any, pi: Any, lam: float) -> Array:
    """Each unit's term ``lam f + (y - lam f) xi / pi`` (``y`` read only where ``xi``): their
    mean is the estimate with a fixed ``lam``, unbiased whatever the design."""
    xi = np.asarray(xi, dtype=bool)
    pi = np.asarray(pi, dtype=float)
    weight = np.where(xi, 1.0 / np.where(pi > 0, pi, 1.0), 0.0)
    f = np.asarray(yhat, dtype=float)
    y0 = np.where(xi, np.asarray(y, dtype=float), 0.0)
    return np.asarray(lam * f + (y0 - lam * f) * weight, dtype=float)
