"""Resampling: the cluster bootstrap every interval and bootstrap p-value is drawn from.

The unit resampled is a cluster (an instruction, or a patient when instructions share
patients): the reviews and response pairs of one cluster are not independent of each other.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .table import Array, _as_float, _check_bootstrap_args

DEFAULT_RESAMPLES = 10_000
# Below this many clusters a percentile interval is not shown: with a handful of clusters the
# bootstrap distribution has a few distinct values and its quantiles claim a precision the data
# do not have (one cluster gives a zero-width interval). Ten follows the usual advice for
# cluster-robust inference (Cameron & Miller 2015 treat under ~20-50 as "few clusters"); a report
# may ask for more, never fewer than 2.
MIN_CLUSTERS = 10


@functools.lru_cache(maxsize=2)
def _cluster_counts(n_clusters: int, n_resamples: int, seed: int) -> Array:
    """``(n_resamples, n_clusters)`` matrix: how often each cluster is drawn in each resample.

    Each resample draws ``n_clusters`` cluster indices uniformly with replacement
    (``rng.integers``); the draws are tallied with a single flat ``np.bincount``. Cached (the
    result is read-only) so several statistics bootstrapped with the same seed over the same
    clusters share the draws, which also makes them paired.
    """
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_clusters, size=(n_resamples, n_clusters))
    draws += (np.arange(n_resamples, dtype=draws.dtype) * n_clusters)[:, None]
    counts = np.bincount(draws.ravel(), minlength=n_resamples * n_clusters)
    counts = counts.reshape(n_resamples, n_clusters).astype(float)
    counts.flags.writeable = False
    return counts


def _bootstrap_means(values: Array, clusters: Array, n_resamples: int, seed: int) -> Array:
    """Bootstrap distribution ``(n_resamples,)`` of the cluster-resampled mean of ``values``.

    ``values`` may also be 2-D ``(n_items, k)``: then ``k`` means are resampled jointly with
    the same cluster draws, giving ``(n_resamples, k)``.
    """
    values = np.asarray(values, dtype=float)
    ids, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    inverse = inverse.reshape(-1)
    n_clusters = ids.shape[0]
    counts = np.bincount(inverse, minlength=n_clusters).astype(float)
    sums: Array
    if values.ndim == 1:
        sums = np.bincount(inverse, weights=values, minlength=n_clusters)
    else:
        sums = np.zeros((n_clusters, values.shape[1]))
        np.add.at(sums, inverse, values)
    draws = _cluster_counts(n_clusters, int(n_resamples), int(seed))
    denom = draws @ counts
    means: Array = (draws @ sums) / (denom if values.ndim == 1 else denom[:, None])
    return means


def _bootstrap_means_columns(values: Array, clusters: Array, n_resamples: int, seed: int) -> Array:
    """Like :func:`_bootstrap_means` for the columns of ``values`` (``(n, k)``, nan where a
    column has no value for a row) at once: ``(n_resamples, k)``. Every column is resampled
    with the same cluster draws (over the clusters of all rows, in key order); a column's mean
    in a resample counts only its own values. One pass over the draws serves every column,
    where a matrix-vector product per column would read the draws ``k`` times."""
    values = np.asarray(values, dtype=float)
    ids, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    inverse = inverse.reshape(-1)
    n_clusters = ids.shape[0]
    present = ~np.isnan(values)
    sums = np.zeros((n_clusters, values.shape[1]))
    counts = np.zeros((n_clusters, values.shape[1]))
    np.add.at(sums, inverse, np.where(present, values, 0.0))
    np.add.at(counts, inverse, present.astype(float))
    draws = _cluster_counts(n_clusters, int(n_resamples), int(seed))
    with np.errstate(invalid="ignore", divide="ignore"):
        means: Array = (draws @ sums) / (draws @ counts)
    return means


def _percentile_interval(
    distribution: Array,
    confidence: float,
    n_clusters: int | None = None,
    min_clusters: int = MIN_CLUSTERS,
) -> tuple[float, float]:
    """The percentile interval of a bootstrap distribution; (nan, nan) when ``n_clusters`` is
    below ``min_clusters`` (too few clusters for an interval to mean anything)."""
    if n_clusters is not None and n_clusters < min_clusters:
        return math.nan, math.nan
    alpha = 1.0 - confidence
    lo, hi = np.quantile(distribution, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    return float(lo), float(hi)


def n_clusters_of(clusters: Array) -> int:
    return int(np.unique(np.asarray(clusters)).shape[0])


def interval_note(n_clusters: int, min_clusters: int = MIN_CLUSTERS) -> str:
    """Why an interval is missing, for the page and the exports ("" when it is shown)."""
    if n_clusters < min_clusters:
        plural = "s" if n_clusters != 1 else ""
        return f"no interval: {n_clusters} cluster{plural} (fewer than {min_clusters})"
    return ""


def cluster_bootstrap_ci(
    values: Array,
    clusters: Array,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> tuple[float, float]:
    """Percentile confidence interval of the mean of ``values``, resampling whole clusters.

    Each resample ``b`` draws ``C`` clusters (``C`` = number of distinct clusters) uniformly
    with replacement; ``k_bc`` is how often cluster ``c`` is drawn. With ``S_c`` the sum and
    ``N_c`` the number of values in cluster ``c``::

        mean_b = sum_c k_bc S_c / sum_c k_bc N_c

    i.e. every value counts once per draw of its cluster. The interval is the
    ``(1 - confidence) / 2`` and ``1 - (1 - confidence) / 2`` quantiles of ``mean_b``.
    The count matrix ``k`` is drawn with ``np.random.default_rng(seed)`` over the clusters in
    sorted order of their keys, so the same seed and the same keys give the same interval
    whatever the order of the rows. Entries with a nan value are ignored; no values, or fewer
    than ``min_clusters`` clusters -> (nan, nan).
    """
    _check_bootstrap_args(n_resamples, confidence)
    values = _as_float(values)
    clusters = np.asarray(clusters)
    if values.shape != clusters.shape:
        raise ValueError("values and clusters must have the same shape")
    ok = ~np.isnan(values)
    if not ok.any():
        return math.nan, math.nan
    n = n_clusters_of(clusters[ok])
    if n < min_clusters:
        return math.nan, math.nan
    dist = _bootstrap_means(values[ok], clusters[ok], n_resamples, seed)
    return _percentile_interval(dist, confidence)


def p_value_floor(n_resamples: int) -> float:
    """The smallest two-sided p-value a resampling test of ``n_resamples`` can report."""
    return 2.0 / (int(n_resamples) + 1.0)


def _bootstrap_p_value(estimate: float, dist: Array) -> float:
    """Two-sided, from the bootstrap distribution of an estimate::

        p = min(1, 2 (k + 1) / (B + 1)),   k = resampled values on the other side of 0

    (the other side is ``<= 0`` for a positive estimate, ``>= 0`` for a negative one; an
    estimate of exactly 0 gives 1). The ``+ 1`` counts the observed sample among the
    resamples (Davison & Hinkley 1997; Phipson & Smyth 2010), so the p-value is never below
    ``2 / (B + 1)``: a bootstrap cannot show more certainty than it has resamples, and "p = 0"
    never appears. ``p_at_floor`` tells when that bound is what is reported.
    """
    b = int(np.asarray(dist).shape[0])
    if estimate > 0:
        k = int(np.count_nonzero(dist <= 0.0))
    elif estimate < 0:
        k = int(np.count_nonzero(dist >= 0.0))
    else:
        return 1.0
    return min(1.0, 2.0 * (k + 1) / (b + 1))


def p_at_floor(p: float, n_resamples: int) -> bool:
    return bool(np.isfinite(p)) and p <= p_value_floor(n_resamples) + 1e-15
