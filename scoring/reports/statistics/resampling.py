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


def _percentile_interval(distribution: Array, confidence: float) -> tuple[float, float]:
    alpha = 1.0 - confidence
    lo, hi = np.quantile(distribution, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    return float(lo), float(hi)


def cluster_bootstrap_ci(
    values: Array,
    clusters: Array,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float]:
    """Percentile confidence interval of the mean of ``values``, resampling whole clusters.

    Each resample ``b`` draws ``C`` clusters (``C`` = number of distinct clusters) uniformly
    with replacement; ``k_bc`` is how often cluster ``c`` is drawn. With ``S_c`` the sum and
    ``N_c`` the number of values in cluster ``c``::

        mean_b = sum_c k_bc S_c / sum_c k_bc N_c

    i.e. every value counts once per draw of its cluster. The interval is the
    ``(1 - confidence) / 2`` and ``1 - (1 - confidence) / 2`` quantiles of ``mean_b``.
    The count matrix ``k`` is drawn with ``np.random.default_rng(seed)``, so the same seed
    gives the same interval. Entries with a nan value are ignored; no values -> (nan, nan).
    """
    _check_bootstrap_args(n_resamples, confidence)
    values = _as_float(values)
    clusters = np.asarray(clusters)
    if values.shape != clusters.shape:
        raise ValueError("values and clusters must have the same shape")
    ok = ~np.isnan(values)
    if not ok.any():
        return math.nan, math.nan
    dist = _bootstrap_means(values[ok], clusters[ok], n_resamples, seed)
    return _percentile_interval(dist, confidence)


def _bootstrap_p_value(estimate: float, dist: Array) -> float:
    """Two-sided: ``min(1, 2 * share of the bootstrap distribution on the other side of 0)``."""
    if estimate > 0:
        p = 2.0 * float(np.mean(dist <= 0.0))
    elif estimate < 0:
        p = 2.0 * float(np.mean(dist >= 0.0))
    else:
        p = 1.0
    return min(1.0, p)
