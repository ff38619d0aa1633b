"""Intervals for a mean over clusters that hold at ten clusters: the studentized cluster bootstrap.

Every mean the report gives an interval for (a metric's mean per-review tau, a model's share
judged correct or mean rank, the difference between two metrics' taus on the same reviews, the
clinicians' agreement with each other, the pairwise accuracy...) is a *ratio mean* over
clusters: with ``S_c`` the sum and ``N_c`` the number of values in cluster ``c``::

    m = sum_c S_c / sum_c N_c

The percentile cluster bootstrap (``resampling.cluster_bootstrap_ci``) covers such a mean
0.89-0.93 of the time at 10-15 clusters: its spread is the plug-in spread, which is short by
about ``(G - 1) / G``, and its quantiles are the normal's where ``G - 1`` degrees of freedom
call for Student's. Chosen by simulation (``manage.py bench_coverage``; BENCHMARKS.md,
"Coverage") among the percentile and BCa cluster bootstraps, a wild cluster bootstrap (Webb's
six-point weights), cluster-robust ``t`` intervals (CR1 with ``G - 1`` degrees of freedom, CR2
with Bell & McCaffrey's) and the **studentized cluster bootstrap**, the last is the one whose
coverage stayed within Monte Carlo error of 95% for taus, shares and paired differences at 10,
15, 30 and 60 clusters and within-cluster correlations up to 0.3: the others fell to 92-93.5%
for shares of a model near a third correct at ten clusters, where a share's cluster means are
skewed and only a bootstrap of the studentized statistic follows the skew.

The method (Davison & Hinkley 1997, section 5.2.1; Cameron, Gelbach & Miller 2008 for
clusters): in each resample ``b`` of whole clusters (``k_bc`` draws of cluster ``c``)::

    m_b  = sum_c k_bc S_c / sum_c k_bc N_c
    se_b = sqrt(sum_c k_bc (S_c - m_b N_c)^2) / sum_c k_bc N_c     (cluster-robust, CR0)
    t_b  = (m_b - m) / se_b

and the interval is ``[m - t_(1 - a/2) se, m - t_(a/2) se]`` with ``t_(q)`` the quantiles of
``t_b`` (over the resamples where it is defined: one whose drawn clusters all share one mean
has ``se_b = 0``) and ``se`` the sample's own CR1 standard error (``G / (G - 1)`` times CR0's
variance; the factor cancels between ``se`` and ``se_b``, so it changes the standard error
shown, never the interval). The bounds are clipped to the statistic's range when one is
given (a share lies in [0, 1]). The two-sided p-value for ``mean = null`` inverts the same
intervals::

    t = (m - null) / se,   p = min(1, 2 (1 + #{t_b on the far side of t}) / (B + 1))

so an interval excludes ``null`` exactly when ``p <= 1 - confidence`` (to the resolution of the
resamples), and ``p`` is never below ``2 / (B + 1)``. The resamples are the report's shared
draws (``resampling._cluster_counts``, clusters in the sorted order of their keys): the same seed
gives the same intervals whatever the order of the rows, and two statistics over the same
clusters are bootstrapped on the same resamples (paired).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from .resampling import DEFAULT_RESAMPLES, MIN_CLUSTERS, _cluster_counts, interval_note
from .table import Array, _as_float, _check_bootstrap_args

INTERVAL_METHOD = "studentized cluster bootstrap"
INTERVAL_METHOD_LONG = (
    "studentized cluster bootstrap (bootstrap-t over whole clusters, cluster-robust standard "
    "errors)"
)

Bounds = tuple[float, float] | None


@dataclass(frozen=True, eq=False)
class TotalsInterval:
    """Studentized intervals of ratio means, one per leading index of the cluster totals."""

    estimate: Array
    low: Array
    high: Array
    se: Array  # CR1 cluster-robust standard error
    scale: Array  # CR0's: the scale the resamples' statistics are studentized on
    t: Array  # (..., B) the resamples' studentized statistics (nan: undefined, left out)
    n_clusters: Array  # clusters with at least one value
    n_defined: Array  # resamples with a defined statistic

    def p_value(self, null: float = 0.0) -> Array:
        """Two-sided bootstrap-t p-values of ``mean = null`` (see the module docstring)."""
        b = self.n_defined
        with np.errstate(divide="ignore", invalid="ignore"):
            t_obs = (self.estimate - null) / self.scale
        above = np.count_nonzero(self.t >= t_obs[..., None], axis=-1)
        below = np.count_nonzero(self.t <= t_obs[..., None], axis=-1)
        k = np.where(t_obs > 0, above, below)
        p = np.minimum(1.0, 2.0 * (k + 1) / (b + 1))
        defined = np.isfinite(t_obs) | ((self.scale == 0) & (self.estimate != null))
        out: Array = np.where(self.estimate == null, 1.0, np.where(defined, p, np.nan))
        return out


def studentized_totals(
    sums: Array,
    counts: Array,
    draws: Array,
    confidence: float = 0.95,
    *,
    bounds: Bounds = None,
) -> TotalsInterval:
    """The studentized cluster-bootstrap interval of ``sum(sums) / sum(counts)``.

    ``sums`` and ``counts`` are ``(..., G)`` cluster totals (a cluster with count 0 has no
    value and takes no part); ``draws`` ``(B, G)`` how often each cluster is drawn in each
    resample (``resampling._cluster_counts``). Vectorised over the leading axes, which share
    the draws (a simulation's replicates, a report's metrics)."""
    s = np.asarray(sums, dtype=float)
    n = np.asarray(counts, dtype=float)
    k = np.asarray(draws, dtype=float)
    total = n.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = s.sum(-1) / total
        e = s - m[..., None] * n
        g = np.count_nonzero(n > 0, axis=-1)
        se = np.sqrt(np.where(g > 1, g / np.maximum(g - 1, 1), np.nan) * (e**2).sum(-1)) / total
        sb, nb = s @ k.T, n @ k.T
        mb = sb / nb
        spread = (s * s) @ k.T - 2.0 * mb * ((s * n) @ k.T) + mb**2 * ((n * n) @ k.T)
        seb = np.sqrt(np.maximum(spread, 0.0)) / nb
        # Relative to the sample's CR0 standard error, the scale se_b is on.
        cr0 = np.sqrt((e**2).sum(-1)) / total
        t = (mb - m[..., None]) / seb
    # A resample whose drawn clusters all have the same mean has no spread (se_b = 0): its
    # studentized statistic is undefined, and it is left out, as the sample itself would be
    # (an all-correct cluster is common for a share at ten patients; counted as infinitely
    # far, those resamples widened the interval of a share to [0, 1] in 1-2% of studies).
    t = np.where(seb > 0, t, np.nan)
    alpha = 1.0 - confidence
    defined = np.count_nonzero(~np.isnan(t), axis=-1)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row with no defined resample
        t_lo, t_hi = np.nanquantile(t, [alpha / 2.0, 1.0 - alpha / 2.0], axis=-1)
    with np.errstate(invalid="ignore"):
        low = m - t_hi * cr0
        high = m - t_lo * cr0
    # Every value the same (one cluster, or all clusters alike): no spread to studentize by;
    # the interval is the point, as the percentile bootstrap's is (and shown only from
    # ``min_clusters`` clusters on).
    flat = (defined == 0) & (cr0 == 0)
    low, high = np.where(flat, m, low), np.where(flat, m, high)
    if bounds is not None:
        low = np.clip(low, bounds[0], bounds[1])
        high = np.clip(high, bounds[0], bounds[1])
    return TotalsInterval(m, low, high, se, cr0, t, g, defined)


@dataclass(frozen=True, eq=False)
class ClusterMean:
    """A mean over clusters with its studentized cluster-bootstrap interval and p-value."""

    estimate: float
    ci_low: float
    ci_high: float
    se: float
    p_value: float  # two-sided, mean = null
    p_at_floor: bool
    n_clusters: int
    interval_note: str
    method: str = INTERVAL_METHOD

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _totals(values: Array, clusters: Array) -> tuple[Array, Array, int]:
    """Per-cluster sums and counts of the columns of ``values`` (``(n, k)``, nan = no value),
    clusters in the sorted order of their keys."""
    ids, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    inverse = inverse.reshape(-1)
    g = int(ids.shape[0])
    present = ~np.isnan(values)
    sums = np.zeros((values.shape[1], g))
    counts = np.zeros((values.shape[1], g))
    for j in range(values.shape[1]):
        ok = present[:, j]
        sums[j] = np.bincount(inverse[ok], weights=values[ok, j], minlength=g)
        counts[j] = np.bincount(inverse[ok], minlength=g)
    return sums, counts, g


def cluster_means(
    values: Array,
    clusters: Array,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
    *,
    bounds: Bounds = None,
    null: float = 0.0,
) -> list[ClusterMean]:
    """:func:`cluster_mean` for every column of ``values`` (``(n, k)``; nan where a column has
    no value for a row), on one set of resamples of the clusters of all rows: paired when two
    columns are about the same clusters. A column whose values span fewer than
    ``min_clusters`` clusters gets its mean and no interval, with the reason."""
    _check_bootstrap_args(n_resamples, confidence)
    vals = np.asarray(values, dtype=float)
    if vals.ndim != 2:
        raise ValueError("values must be a (rows, columns) matrix")
    keys = np.asarray(clusters)
    if keys.shape != (vals.shape[0],):
        raise ValueError("values and clusters must have one row each")
    out: list[ClusterMean] = []
    if vals.shape[0] == 0:
        return [
            ClusterMean(math.nan, math.nan, math.nan, math.nan, math.nan, False, 0, "")
            for _ in range(vals.shape[1])
        ]
    sums, counts, g = _totals(vals, keys)
    draws = _cluster_counts(g, int(n_resamples), int(seed))
    res = studentized_totals(sums, counts, draws, confidence, bounds=bounds)
    p = res.p_value(null)
    for j in range(vals.shape[1]):
        floor = 2.0 / (float(res.n_defined[j]) + 1.0)
        n_c = int(res.n_clusters[j])
        if n_c == 0:
            out.append(ClusterMean(math.nan, math.nan, math.nan, math.nan, math.nan, False, 0, ""))
            continue
        shown = n_c >= min_clusters
        pj = float(p[j]) if shown else math.nan
        out.append(
            ClusterMean(
                estimate=float(res.estimate[j]),
                ci_low=float(res.low[j]) if shown else math.nan,
                ci_high=float(res.high[j]) if shown else math.nan,
                se=float(res.se[j]) if n_c >= 2 else math.nan,
                p_value=pj,
                p_at_floor=bool(math.isfinite(pj) and pj <= floor + 1e-15),
                n_clusters=n_c,
                interval_note=interval_note(n_c, min_clusters),
            )
        )
    return out


def cluster_mean(
    values: Array,
    clusters: Array,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
    *,
    bounds: Bounds = None,
    null: float = 0.0,
) -> ClusterMean:
    """The mean of ``values`` (nan ignored) over their clusters, with the studentized
    cluster-bootstrap interval, its CR1 standard error and the two-sided p-value of
    ``mean = null``; no interval nor p-value below ``min_clusters`` clusters."""
    vals = _as_float(values)
    keys = np.asarray(clusters)
    if vals.shape != keys.shape:
        raise ValueError("values and clusters must have the same shape")
    return cluster_means(
        vals[:, None], keys, n_resamples, seed, confidence, min_clusters, bounds=bounds, null=null
    )[0]


def cluster_ci(
    values: Array,
    clusters: Array,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
    *,
    bounds: Bounds = None,
) -> tuple[float, float]:
    """The studentized interval alone, called as ``resampling.cluster_bootstrap_ci`` is:
    ``(nan, nan)`` with no values or fewer than ``min_clusters`` clusters."""
    res = cluster_mean(values, clusters, n_resamples, seed, confidence, min_clusters, bounds=bounds)
    return res.ci_low, res.ci_high


@dataclass(frozen=True, eq=False)
class TotalsT:
    """Cluster-robust ``t`` intervals of ratio means, one per leading index."""

    estimate: Array
    low: Array
    high: Array
    se: Array  # CR2
    df: Array  # Bell & McCaffrey's


def cr2_t_totals(sums: Array, counts: Array, confidence: float = 0.95) -> TotalsT:
    """The CR2 ("bias-reduced linearisation") interval of ``sum(sums) / sum(counts)`` with
    Bell & McCaffrey's (2002) degrees of freedom, vectorised over leading axes.

    For a mean over clusters (the intercept of a least-squares fit) the leverage of cluster
    ``c`` is ``h_c = N_c / n`` and CR2's variance is ``sum_c E_c^2 / (1 - h_c) / n^2`` with
    ``E_c = S_c - m N_c``; its Satterthwaite degrees of freedom under independent items are
    ``(sum_c w_c P_cc)^2 / sum_cd w_c w_d P_cd^2`` with ``w_c = 1 / (1 - h_c)`` and
    ``P = diag(N) - N N^T / n`` (``G - 1`` when the clusters are of equal size). Used where the
    bootstrap-t is not (``active``: weighted terms of which most are exactly the prediction,
    whose resamples' standard errors are too often near zero)."""
    s = np.asarray(sums, dtype=float)
    n = np.asarray(counts, dtype=float)
    total = n.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = s.sum(-1) / total
        e = s - m[..., None] * n
        h = n / total[..., None]
        w = np.where(h < 1.0, 1.0 / (1.0 - h), 0.0)
        se = np.sqrt((w * e**2).sum(-1)) / total
        pcc = n - n**2 / total[..., None]
        num = (w * pcc).sum(-1) ** 2
        cross = ((w * n**2).sum(-1) ** 2 - (w**2 * n**4).sum(-1)) / total**2
        den = (w**2 * pcc**2).sum(-1) + cross
        df = num / den
        q = sps.t.ppf(1.0 - (1.0 - confidence) / 2.0, df)
    return TotalsT(m, m - q * se, m + q * se, se, df)
