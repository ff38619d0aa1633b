"""Statistics relating automated metric scores to clinicians' rankings.

Pure numpy/scipy; no Django imports, so the module can be used from management commands,
notebooks and tests alike.

Data model
----------
A :class:`JudgementTable` is a "long table": one row per (review, response) judgement, where a
*review* is one clinician ranking all responses to one instruction. Ranks follow the convention
``1 = best``; ties are equal ranks. Metric scores are arrays aligned with the table rows
(``higher = better``), with ``nan`` for missing values. A collection of metrics is a
``dict[str, np.ndarray]``.

Uncertainty is quantified with a *cluster bootstrap over instructions*: the instruction is the
unit that is resampled, because the reviews (and response pairs) of one instruction are not
independent of each other.

Kendall's tau-b
---------------
For paired observations ``(x_i, y_i)`` with ``n0 = n (n - 1) / 2`` pairs::

    tau_b = (P - Q) / sqrt((n0 - T_x) (n0 - T_y))

where ``P``/``Q`` count concordant/discordant pairs and ``T_x``/``T_y`` count pairs tied in
``x``/``y``. Equivalently ``sum_{i<j} sgn(x_i - x_j) sgn(y_i - y_j)`` divided by the square root
of the product of the numbers of pairs untied in ``x`` and in ``y``. This is the statistic of
``scipy.stats.kendalltau(x, y, variant="b")``; the per-review taus are computed with a vectorized
implementation of exactly that formula (``engine="numpy"``, the default, which the test-suite
checks against scipy review by review) or by calling scipy once per review (``engine="scipy"``).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np
from scipy import stats as sps

__all__ = [
    "JudgementTable",
    "ReviewTaus",
    "bench_inputs",
    "BradleyTerryFit",
    "bradley_terry",
    "bradley_terry_fit",
    "context_length_analysis",
    "leaderboard_fit",
    "mcnemar_exact",
    "breakdown",
    "cluster_bootstrap_ci",
    "human_ceiling",
    "krippendorff_alpha_ordinal",
    "leaderboard",
    "metric_correlation",
    "metric_correlations",
    "paired_bootstrap_test",
    "pairwise_accuracy",
    "per_review_tau",
    "position_bias",
    "system_level_tau",
    "wilson_interval",
    "win_rate_matrix",
]

DEFAULT_RESAMPLES = 10_000

Scores = np.ndarray
Engine = Literal["numpy", "scipy"]


# ---------------------------------------------------------------------------------------------
# Data model
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class JudgementTable:
    """One row per (review, response) judgement; all fields are 1-D arrays of equal length."""

    review: np.ndarray  # int ids of reviews (one clinician x one instruction)
    instruction: np.ndarray  # int ids (the bootstrap cluster)
    clinician: np.ndarray  # int ids
    model: np.ndarray  # str model names (object/unicode array)
    response: np.ndarray  # int response ids
    rank: np.ndarray  # float/int, 1 = best, ties allowed (equal ranks)
    correct: np.ndarray  # bool (or nan-able float) correct yes/no
    position: np.ndarray  # int, 0-based position the response was shown in
    category: np.ndarray  # str instruction category
    specialty: np.ndarray  # str author specialty

    def __post_init__(self) -> None:
        lengths = set()
        for f in fields(self):
            arr = np.asarray(getattr(self, f.name))
            if arr.ndim != 1:
                raise ValueError(f"JudgementTable.{f.name} must be 1-D, got shape {arr.shape}")
            object.__setattr__(self, f.name, arr)
            lengths.add(arr.shape[0])
        if len(lengths) > 1:
            raise ValueError(f"JudgementTable fields have different lengths: {sorted(lengths)}")

    def __len__(self) -> int:
        return int(self.review.shape[0])

    def subset(self, mask: np.ndarray) -> JudgementTable:
        """Rows where the boolean ``mask`` is true, as a new table."""
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != (len(self),):
            raise ValueError("subset() needs a boolean mask with one entry per row")
        return JudgementTable(**{f.name: getattr(self, f.name)[mask] for f in fields(self)})


@dataclass(frozen=True, eq=False)
class ReviewTaus:
    """Per-review Kendall tau-b; iterates as ``(review_ids, instruction_ids, taus)``."""

    review: np.ndarray
    instruction: np.ndarray
    tau: np.ndarray
    skipped: int
    skipped_reviews: np.ndarray

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter((self.review, self.instruction, self.tau))

    def __len__(self) -> int:
        return int(self.tau.shape[0])


# ---------------------------------------------------------------------------------------------
# Internal helpers
# ---------------------------------------------------------------------------------------------


def _as_float(values: Any) -> np.ndarray:
    """Float copy of ``values``; ``None`` entries of object arrays become nan."""
    arr = np.asarray(values)
    if arr.dtype == object:
        arr = np.array([np.nan if v is None else v for v in arr], dtype=float)
    return arr.astype(float, copy=True)


def _check_scores(table: JudgementTable, scores: Any) -> np.ndarray:
    arr = _as_float(scores)
    if arr.shape != (len(table),):
        raise ValueError(
            f"scores must have one value per table row ({len(table)}), got {arr.shape}"
        )
    return arr


def _check_bootstrap_args(n_resamples: int, confidence: float) -> None:
    if int(n_resamples) < 1:
        raise ValueError("n_resamples must be >= 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be strictly between 0 and 1")


def _group_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group row indices by key.

    Returns ``(ids, rows)`` where ``ids`` are the sorted unique keys and ``rows`` is a
    ``(n_groups, max_group_size)`` matrix of row indices, padded with ``-1``.
    """
    keys = np.asarray(keys)
    if keys.shape[0] == 0:
        return keys[:0], np.zeros((0, 0), dtype=np.intp)
    ids, inverse = np.unique(keys, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse, minlength=ids.shape[0])
    starts = np.cumsum(counts) - counts
    grouped = inverse[order]
    within = np.arange(order.shape[0]) - starts[grouped]
    rows = np.full((ids.shape[0], int(counts.max())), -1, dtype=np.intp)
    rows[grouped, within] = order
    return ids, rows


def _take(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values[rows]`` as float with nan where ``rows`` is the ``-1`` padding."""
    values = np.asarray(values, dtype=float)
    if values.shape[0] == 0:
        return np.full(rows.shape, np.nan)
    return np.where(rows >= 0, values[rows], np.nan)


_CHUNK_ELEMENTS = 4_000_000


def _tau_b_padded(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kendall tau-b for every row of two ``(G, n)`` matrices; nan entries are missing.

    Only positions where both ``x`` and ``y`` are present count. Returns ``(tau, untied_x,
    untied_y)``: ``tau`` is nan where either count of untied pairs is zero (fewer than two
    distinct values on one side), i.e. where tau-b is undefined.
    """
    g, n = x.shape
    tau = np.full(g, np.nan)
    untied_x = np.zeros(g, dtype=np.int64)
    untied_y = np.zeros(g, dtype=np.int64)
    if g == 0 or n < 2:
        return tau, untied_x, untied_y
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    step = max(1, _CHUNK_ELEMENTS // (n * n))
    for start in range(0, g, step):
        xs, ys = x[start : start + step], y[start : start + step]
        present = ~np.isnan(xs) & ~np.isnan(ys)
        pair = present[:, :, None] & present[:, None, :] & upper
        with np.errstate(invalid="ignore"):
            sx = np.where(pair, np.sign(xs[:, :, None] - xs[:, None, :]), 0.0)
            sy = np.where(pair, np.sign(ys[:, :, None] - ys[:, None, :]), 0.0)
        s = (sx * sy).sum(axis=(1, 2))
        ux = np.count_nonzero(sx, axis=(1, 2))
        uy = np.count_nonzero(sy, axis=(1, 2))
        defined = (ux > 0) & (uy > 0)
        denom = np.sqrt(ux.astype(float) * uy.astype(float))
        tau[start : start + step] = np.where(defined, s / np.where(defined, denom, 1.0), np.nan)
        untied_x[start : start + step] = ux
        untied_y[start : start + step] = uy
    return tau, untied_x, untied_y


@functools.lru_cache(maxsize=2)
def _cluster_counts(n_clusters: int, n_resamples: int, seed: int) -> np.ndarray:
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


def _bootstrap_means(
    values: np.ndarray, clusters: np.ndarray, n_resamples: int, seed: int
) -> np.ndarray:
    """Bootstrap distribution ``(n_resamples,)`` of the cluster-resampled mean of ``values``.

    ``values`` may also be 2-D ``(n_items, k)``: then ``k`` means are resampled jointly with
    the same cluster draws, giving ``(n_resamples, k)``.
    """
    values = np.asarray(values, dtype=float)
    ids, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    inverse = inverse.reshape(-1)
    n_clusters = ids.shape[0]
    counts = np.bincount(inverse, minlength=n_clusters).astype(float)
    if values.ndim == 1:
        sums = np.bincount(inverse, weights=values, minlength=n_clusters)
    else:
        sums = np.zeros((n_clusters, values.shape[1]))
        np.add.at(sums, inverse, values)
    draws = _cluster_counts(n_clusters, int(n_resamples), int(seed))
    denom = draws @ counts
    return (draws @ sums) / (denom if values.ndim == 1 else denom[:, None])


def _percentile_interval(distribution: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = 1.0 - confidence
    lo, hi = np.quantile(distribution, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    return float(lo), float(hi)


# ---------------------------------------------------------------------------------------------
# 1. Per-review tau
# ---------------------------------------------------------------------------------------------


def per_review_tau(
    table: JudgementTable, scores: Scores, *, engine: Engine = "numpy"
) -> ReviewTaus:
    """Kendall tau-b between ``-rank`` and the metric scores, separately for every review.

    For review ``r`` with responses ``i`` (rows with both a rank and a non-nan score)::

        tau_r = tau_b(-rank_i, score_i)
              = sum_{i<j} sgn(rank_j - rank_i) sgn(score_i - score_j)
                / sqrt(U_rank * U_score)

    where ``U_rank``/``U_score`` are the numbers of pairs *not* tied in rank/score. ``+1``
    means the metric orders the responses exactly like the clinician.

    A review is skipped (excluded, and counted in ``skipped``) when tau-b is undefined: fewer
    than two responses with a score, fewer than two distinct ranks, or constant scores among
    those responses. Skipped reviews are *not* counted as zero.

    ``engine="scipy"`` calls ``scipy.stats.kendalltau(variant="b")`` per review instead of the
    vectorized formula (same result, slower).
    """
    x_all = -_as_float(table.rank)
    y_all = _check_scores(table, scores)
    review_ids, rows = _group_rows(table.review)
    x = _take(x_all, rows)
    y = _take(y_all, rows)
    tau, _, _ = _tau_b_padded(x, y)
    if engine == "scipy":
        for g in np.flatnonzero(~np.isnan(tau)):
            ok = ~np.isnan(x[g]) & ~np.isnan(y[g])
            tau[g] = sps.kendalltau(x[g, ok], y[g, ok], variant="b").statistic
    elif engine != "numpy":
        raise ValueError(f"unknown engine {engine!r}")
    instruction_ids = np.asarray(table.instruction)[rows[:, 0]] if rows.size else review_ids[:0]
    keep = ~np.isnan(tau)
    return ReviewTaus(
        review=review_ids[keep],
        instruction=instruction_ids[keep],
        tau=tau[keep],
        skipped=int((~keep).sum()),
        skipped_reviews=review_ids[~keep],
    )


# ---------------------------------------------------------------------------------------------
# 2. Cluster bootstrap
# ---------------------------------------------------------------------------------------------


def cluster_bootstrap_ci(
    values: np.ndarray,
    clusters: np.ndarray,
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


# ---------------------------------------------------------------------------------------------
# 3. Metric correlation
# ---------------------------------------------------------------------------------------------


def metric_correlation(
    table: JudgementTable,
    scores: Scores,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Mean per-review Kendall tau-b between a metric and the clinicians' ranks, with CI.

    ``mean_tau = (1 / R) sum_r tau_r`` over the ``R`` non-skipped reviews (see
    :func:`per_review_tau`); ``[ci_low, ci_high]`` is the cluster-bootstrap percentile interval
    over instructions (:func:`cluster_bootstrap_ci`).
    """
    _check_bootstrap_args(n_resamples, confidence)
    taus = per_review_tau(table, scores)
    if len(taus) == 0:
        mean, lo, hi = math.nan, math.nan, math.nan
    else:
        mean = float(taus.tau.mean())
        lo, hi = cluster_bootstrap_ci(taus.tau, taus.instruction, n_resamples, seed, confidence)
    return {
        "mean_tau": mean,
        "ci_low": lo,
        "ci_high": hi,
        "n_reviews": len(taus),
        "n_skipped": taus.skipped,
        "n_instructions": int(np.unique(taus.instruction).shape[0]),
        "confidence": confidence,
        "seed": seed,
        "n_resamples": int(n_resamples),
    }


def metric_correlations(
    table: JudgementTable,
    scores: Mapping[str, Scores],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, dict[str, Any]]:
    """:func:`metric_correlation` for every metric of a ``{name: scores}`` mapping."""
    return {
        name: metric_correlation(table, s, n_resamples, seed, confidence)
        for name, s in scores.items()
    }


# ---------------------------------------------------------------------------------------------
# 4. Pairwise accuracy
# ---------------------------------------------------------------------------------------------


def _review_pairs(
    table: JudgementTable, scores: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every unordered pair of responses in the same review, both ranked (and scored).

    Returns ``(row_a, row_b, group, review_ids, rows)`` with ``group`` indexing ``review_ids``.
    """
    review_ids, rows = _group_rows(table.review)
    n = rows.shape[1]
    rank = _take(_as_float(table.rank), rows)
    present = ~np.isnan(rank)
    if scores is not None:
        present &= ~np.isnan(_take(scores, rows))
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    pair = present[:, :, None] & present[:, None, :] & upper
    group, ia, ib = np.nonzero(pair)
    return rows[group, ia], rows[group, ib], group, review_ids, rows


def pairwise_accuracy(
    table: JudgementTable,
    scores: Scores,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Share of clinician-ordered response pairs that the metric orders the same way.

    Over every review and every pair ``(i, j)`` of its responses with ``rank_i != rank_j``
    (both scored), the credit is::

        c_ij = 1    if sgn(score_i - score_j) == sgn(rank_j - rank_i)   (agrees)
               1/2  if score_i == score_j                               (metric tie)
               0    otherwise

    and ``accuracy = sum c_ij / n_pairs``. Metric ties count as half a correct pair (the
    expected accuracy of breaking the tie at random). Pairs tied by the clinician are not
    counted. The CI is the cluster bootstrap over instructions of the pair credits.
    """
    _check_bootstrap_args(n_resamples, confidence)
    s = _check_scores(table, scores)
    rank = _as_float(table.rank)
    a, b, group, _, _ = _review_pairs(table, s)
    strict = rank[a] != rank[b]
    a, b = a[strict], b[strict]
    agree = np.sign(s[a] - s[b]) == np.sign(rank[b] - rank[a])
    credit = np.where(s[a] == s[b], 0.5, agree.astype(float))
    clusters = np.asarray(table.instruction)[a]
    if credit.size == 0:
        acc, lo, hi = math.nan, math.nan, math.nan
    else:
        acc = float(credit.mean())
        lo, hi = cluster_bootstrap_ci(credit, clusters, n_resamples, seed, confidence)
    return {
        "accuracy": acc,
        "ci_low": lo,
        "ci_high": hi,
        "n_pairs": int(credit.size),
        "n_metric_ties": int((s[a] == s[b]).sum()),
        "n_reviews": int(np.unique(np.asarray(table.review)[a]).shape[0]),
        "n_instructions": int(np.unique(clusters).shape[0]),
        "confidence": confidence,
        "seed": seed,
        "n_resamples": int(n_resamples),
    }


# ---------------------------------------------------------------------------------------------
# 5. System-level tau
# ---------------------------------------------------------------------------------------------


def _group_nanmean(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ids, inverse = np.unique(np.asarray(keys), return_inverse=True)
    inverse = inverse.reshape(-1)
    ok = ~np.isnan(values)
    sums = np.bincount(inverse[ok], weights=values[ok], minlength=ids.shape[0])
    counts = np.bincount(inverse[ok], minlength=ids.shape[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        return ids, np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def system_level_tau(table: JudgementTable, scores: Scores) -> dict[str, Any]:
    """Kendall tau-b between models ordered by clinicians and by the metric.

    Per model ``m``: ``mean_rank_m`` = mean rank over all its ranked rows and
    ``mean_score_m`` = mean of its non-nan scores. Then::

        tau = tau_b(-mean_rank, mean_score)     (over models with both means defined)

    with the p-value of ``scipy.stats.kendalltau``. Fewer than two models -> nan.
    """
    s = _check_scores(table, scores)
    models, mean_rank = _group_nanmean(table.model, _as_float(table.rank))
    _, mean_score = _group_nanmean(table.model, s)
    ok = ~np.isnan(mean_rank) & ~np.isnan(mean_score)
    tau, p = math.nan, math.nan
    if ok.sum() >= 2:
        res = sps.kendalltau(-mean_rank[ok], mean_score[ok], variant="b")
        tau, p = float(res.statistic), float(res.pvalue)
    return {
        "tau": tau,
        "p_value": p,
        "n_models": int(ok.sum()),
        "mean_rank": {str(m): float(v) for m, v in zip(models, mean_rank, strict=True)},
        "mean_score": {str(m): float(v) for m, v in zip(models, mean_score, strict=True)},
    }


# ---------------------------------------------------------------------------------------------
# 6. Paired bootstrap test
# ---------------------------------------------------------------------------------------------


def paired_bootstrap_test(
    table: JudgementTable,
    scores_a: Scores,
    scores_b: Scores,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Is metric A better correlated with the clinicians than metric B?

    Over the reviews ``R_ab`` where both per-review taus are defined::

        d_r = tau_r(A) - tau_r(B),    difference = mean_r d_r

    The difference is cluster-bootstrapped over instructions (both metrics share every
    resample, so the test is paired). Two-sided p-value::

        p = min(1, 2 * share of bootstrap differences on the other side of 0)

    where "the other side" is ``<= 0`` for a positive difference and ``>= 0`` for a negative
    one (``p = 1`` for a difference of exactly 0). Its resolution is ``2 / n_resamples``.
    """
    _check_bootstrap_args(n_resamples, confidence)
    ta = per_review_tau(table, scores_a)
    tb = per_review_tau(table, scores_b)
    common, ia, ib = np.intersect1d(ta.review, tb.review, assume_unique=True, return_indices=True)
    diff = ta.tau[ia] - tb.tau[ib]
    clusters = ta.instruction[ia]
    out: dict[str, Any] = {
        "mean_tau_a": float(ta.tau[ia].mean()) if common.size else math.nan,
        "mean_tau_b": float(tb.tau[ib].mean()) if common.size else math.nan,
        "difference": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "p_value": math.nan,
        "n_reviews": int(common.size),
        "n_instructions": int(np.unique(clusters).shape[0]),
        "confidence": confidence,
        "seed": seed,
        "n_resamples": int(n_resamples),
    }
    if common.size == 0:
        return out
    d = float(diff.mean())
    dist = _bootstrap_means(diff, clusters, n_resamples, seed)
    lo, hi = _percentile_interval(dist, confidence)
    out.update(difference=d, ci_low=lo, ci_high=hi, p_value=_bootstrap_p_value(d, dist))
    return out


def _bootstrap_p_value(estimate: float, dist: np.ndarray) -> float:
    """Two-sided: ``min(1, 2 * share of the bootstrap distribution on the other side of 0)``."""
    if estimate > 0:
        p = 2.0 * float(np.mean(dist <= 0.0))
    elif estimate < 0:
        p = 2.0 * float(np.mean(dist >= 0.0))
    else:
        p = 1.0
    return min(1.0, p)


# ---------------------------------------------------------------------------------------------
# 7. Human ceiling: inter-clinician agreement
# ---------------------------------------------------------------------------------------------


def krippendorff_alpha_ordinal(reliability_data: np.ndarray) -> float:
    """Krippendorff's alpha for ordinal data (Krippendorff 2011, coincidence-matrix form).

    ``reliability_data`` is ``(coders, units)`` with nan for missing values. With ``n_uv`` the
    number of coders giving value ``v`` to unit ``u`` and ``m_u = sum_v n_uv`` (only units with
    ``m_u >= 2`` are pairable)::

        o_ck  = sum_u (n_uc n_uk - [c == k] n_uc) / (m_u - 1)      coincidence matrix
        n_c   = sum_k o_ck,   n = sum_c n_c
        d2_ck = (sum_{g=c..k} n_g - (n_c + n_k) / 2) ** 2          ordinal metric, c <= k
        alpha = 1 - (n - 1) * sum_ck o_ck d2_ck / sum_ck n_c n_k d2_ck

    Values are ordered by their numeric value. Returns nan when there is no pairable unit or
    only one distinct pairable value (expected disagreement 0). Perfect agreement gives 1.
    """
    data = np.asarray(reliability_data, dtype=float)
    if data.ndim != 2:
        raise ValueError("reliability_data must be a (coders, units) matrix")
    present = ~np.isnan(data)
    values = np.unique(data[present])
    n_values, n_units = values.shape[0], data.shape[1]
    if n_values == 0:
        return math.nan
    coder_idx, unit_idx = np.nonzero(present)
    value_idx = np.searchsorted(values, data[coder_idx, unit_idx])
    n_uv = np.bincount(unit_idx * n_values + value_idx, minlength=n_units * n_values)
    n_uv = n_uv.reshape(n_units, n_values).astype(float)
    m_u = n_uv.sum(axis=1)
    n_uv, m_u = n_uv[m_u >= 2], m_u[m_u >= 2]
    if m_u.size == 0:
        return math.nan
    weighted = n_uv / (m_u - 1.0)[:, None]
    o = weighted.T @ n_uv - np.diag(weighted.sum(axis=0))
    n_c = o.sum(axis=1)
    n = n_c.sum()
    cum = np.cumsum(n_c)
    lo = np.minimum.outer(np.arange(n_values), np.arange(n_values))
    hi = np.maximum.outer(np.arange(n_values), np.arange(n_values))
    between = cum[hi] - cum[lo] + n_c[lo]  # sum_{g=lo..hi} n_g
    d2 = (between - (n_c[lo] + n_c[hi]) / 2.0) ** 2
    expected = float((np.outer(n_c, n_c) * d2).sum())
    if expected == 0.0:
        return math.nan
    return 1.0 - (n - 1.0) * float((o * d2).sum()) / expected


def human_ceiling(
    table: JudgementTable,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """How well do clinicians agree with each other? (An upper reference for metrics.)

    For every instruction reviewed by at least two clinicians and every pair of reviews of it
    by different clinicians ``(a, b)``, over the responses ``S`` both ranked::

        tau_ab = tau_b(rank_a[S], rank_b[S])

    skipping pairs with fewer than two distinct ranks on either side. ``mean_tau`` is the mean
    over pairs; the CI is the cluster bootstrap over instructions.

    ``alpha`` is Krippendorff's ordinal alpha (:func:`krippendorff_alpha_ordinal`) with units =
    (instruction, response), coders = clinicians and values = ranks. If a clinician ranked the
    same response twice, the first rank is used.
    """
    _check_bootstrap_args(n_resamples, confidence)
    rank = _as_float(table.rank)
    ranked = ~np.isnan(rank)
    # Every review takes part, including one with no ranked row: its pairs are undefined and
    # are counted as skipped, like any other pair with fewer than two distinct ranks.
    review_ids, rows = _group_rows(np.asarray(table.review))
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    pair_instruction: list[Any] = []
    if review_ids.size:
        real_rows = np.where((rows >= 0) & ranked[np.maximum(rows, 0)], rows, -1)
        first = rows[:, 0]
        rev_instruction = np.asarray(table.instruction)[first]
        rev_clinician = np.asarray(table.clinician)[first]
        inst_ids, inst_rows = _group_rows(rev_instruction)
        responses = np.asarray(table.response)
        for i_group in range(inst_ids.shape[0]):
            revs = inst_rows[i_group][inst_rows[i_group] >= 0]
            if np.unique(rev_clinician[revs]).shape[0] < 2:
                continue
            for ra, rb in itertools.combinations(revs, 2):
                if rev_clinician[ra] == rev_clinician[rb]:
                    continue
                rows_a = real_rows[ra][real_rows[ra] >= 0]
                rows_b = real_rows[rb][real_rows[rb] >= 0]
                _, ia, ib = np.intersect1d(
                    responses[rows_a], responses[rows_b], return_indices=True
                )
                xs.append(rank[rows_a[ia]])
                ys.append(rank[rows_b[ib]])
                pair_instruction.append(inst_ids[i_group])
    n_max = max((x.shape[0] for x in xs), default=0)
    x_pad = np.full((len(xs), n_max), np.nan)
    y_pad = np.full((len(xs), n_max), np.nan)
    for k, (x, y) in enumerate(zip(xs, ys, strict=True)):
        x_pad[k, : x.shape[0]] = x
        y_pad[k, : y.shape[0]] = y
    tau, _, _ = _tau_b_padded(x_pad, y_pad)
    keep = ~np.isnan(tau)
    tau = tau[keep]
    clusters = np.asarray(pair_instruction)[keep] if pair_instruction else np.zeros(0)
    if tau.size:
        mean = float(tau.mean())
        lo, hi = cluster_bootstrap_ci(tau, clusters, n_resamples, seed, confidence)
    else:
        mean, lo, hi = math.nan, math.nan, math.nan

    # Krippendorff's alpha: coders x units matrix of ranks.
    alpha, n_units = math.nan, 0
    if ranked.any():
        sel = np.flatnonzero(ranked)
        unit_keys = np.stack(
            [
                np.unique(np.asarray(table.instruction)[sel], return_inverse=True)[1].ravel(),
                np.unique(np.asarray(table.response)[sel], return_inverse=True)[1].ravel(),
            ],
            axis=1,
        )
        _, unit_idx = np.unique(unit_keys, axis=0, return_inverse=True)
        unit_idx = unit_idx.ravel()
        _, coder_idx = np.unique(np.asarray(table.clinician)[sel], return_inverse=True)
        coder_idx = coder_idx.ravel()
        n_units_all = unit_idx.max() + 1
        data = np.full((coder_idx.max() + 1, n_units_all), np.nan)
        # np.unique's return_index gives the first occurrence of each (coder, unit) cell.
        _, first = np.unique(coder_idx * n_units_all + unit_idx, return_index=True)
        data[coder_idx[first], unit_idx[first]] = rank[sel][first]
        n_units = int(((~np.isnan(data)).sum(axis=0) >= 2).sum())
        alpha = krippendorff_alpha_ordinal(data)
    return {
        "mean_tau": mean,
        "ci_low": lo,
        "ci_high": hi,
        "n_pairs": int(tau.size),
        "n_skipped_pairs": int((~keep).sum()),
        "n_instructions": int(np.unique(clusters).shape[0]),
        "alpha": alpha,
        "n_units": n_units,
        "confidence": confidence,
        "seed": seed,
        "n_resamples": int(n_resamples),
    }


# ---------------------------------------------------------------------------------------------
# 8. Wilson interval
# ---------------------------------------------------------------------------------------------


def wilson_interval(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    With ``p = successes / n`` and ``z`` the ``1 - (1 - confidence) / 2`` normal quantile::

        centre = (p + z^2 / (2n)) / (1 + z^2 / n)
        half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))
        (lo, hi) = (centre - half, centre + half)

    ``n == 0`` -> (nan, nan). Example: 8/10 at 95 % -> (0.490, 0.943).
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError("need 0 <= successes <= n")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be strictly between 0 and 1")
    if n == 0:
        return math.nan, math.nan
    z = float(sps.norm.ppf(1.0 - (1.0 - confidence) / 2.0))
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


# ---------------------------------------------------------------------------------------------
# 9. Leaderboard, Bradley-Terry and win rates
# ---------------------------------------------------------------------------------------------


def _win_counts(table: JudgementTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairwise wins per instruction.

    Returns ``(models, instructions, wins)`` with ``wins[c, i, j]`` = wins of model ``i`` over
    model ``j`` in reviews of instruction ``c`` (strictly better rank = 1, tie = 1/2 each).
    Pairs of responses from the same model are ignored.
    """
    models, model_idx = np.unique(np.asarray(table.model).astype(str), return_inverse=True)
    instructions, inst_idx = np.unique(np.asarray(table.instruction), return_inverse=True)
    model_idx, inst_idx = model_idx.ravel(), inst_idx.ravel()
    n_models, n_inst = models.shape[0], instructions.shape[0]
    rank = _as_float(table.rank)
    a, b, _, _, _ = _review_pairs(table, None)
    differ = model_idx[a] != model_idx[b]
    a, b = a[differ], b[differ]
    credit_ab = (rank[a] < rank[b]) + 0.5 * (rank[a] == rank[b])
    c = inst_idx[a]
    size = n_inst * n_models * n_models
    flat_ab = (c * n_models + model_idx[a]) * n_models + model_idx[b]
    flat_ba = (c * n_models + model_idx[b]) * n_models + model_idx[a]
    wins = np.bincount(flat_ab, weights=credit_ab, minlength=size)
    wins += np.bincount(flat_ba, weights=1.0 - credit_ab, minlength=size)
    return models, instructions, wins.reshape(n_inst, n_models, n_models)


BT_TOL = 1e-10
BT_BOOTSTRAP_TOL = 1e-8
BT_MAX_ITER = 100


@dataclass(frozen=True, eq=False)
class BradleyTerryFit:
    """A Bradley-Terry fit: log-strengths and whether each problem met the tolerance."""

    log_p: np.ndarray  # (..., m) log-strengths, mean zero per problem
    converged: np.ndarray  # (...) bool: the last step moved no log-strength by tol or more
    iterations: int  # Newton iterations run (the slowest problem's)
    max_change: float  # largest log-strength change in the last iteration, over problems
    tol: float

    @property
    def n_not_converged(self) -> int:
        return int(np.size(self.converged) - np.count_nonzero(self.converged))


def _strongly_connected(w: np.ndarray) -> np.ndarray:
    """Per problem: is the directed graph "i beat j at least fractionally" strongly connected?"""
    m = w.shape[-1]
    reach = (w > 0) | np.eye(m, dtype=bool)
    for _ in range(max(1, math.ceil(math.log2(m)))):
        reach = np.matmul(reach.astype(np.int64), reach.astype(np.int64)) > 0
    return reach.all(axis=(-1, -2))


def _bt_loglik(w: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Log-likelihood per problem; ``w`` has a zero diagonal."""
    d = theta[..., :, None] - theta[..., None, :]
    # log P(i beats j) = -log(1 + exp(-(theta_i - theta_j))), stable for any sign.
    return -(w * np.logaddexp(0.0, -d)).sum(axis=(-1, -2))


def bradley_terry_fit(
    wins: np.ndarray,
    prior: float = 0.1,
    tol: float = BT_TOL,
    max_iter: int = BT_MAX_ITER,
    start: np.ndarray | None = None,
) -> BradleyTerryFit:
    """Bradley-Terry log-strengths by Newton's method, to a stated tolerance.

    Model: ``P(i beats j) = p_i / (p_i + p_j)`` with ``theta = log p``. ``wins[..., i, j]`` =
    (fractional) wins of ``i`` over ``j``; leading axes are independent problems (e.g. bootstrap
    resamples). ``prior`` pseudo-wins are added to every off-diagonal cell, i.e. ``prior`` wins
    of ``i`` over ``j`` *and* ``prior`` wins of ``j`` over ``i`` (``2 * prior`` virtual games
    per pair, split evenly); this keeps strengths finite when a model never wins and connects
    the comparison graph. The fit maximizes the log-likelihood::

        L(theta) = sum_{i != j} w_ij log sigma(theta_i - theta_j)

    with ``sigma`` the logistic function. Gradient ``g_i = W_i - sum_j N_ij sigma_ij``
    (``W_i = sum_j w_ij``, ``N_ij = w_ij + w_ji``) and negative Hessian the graph Laplacian
    with edge weights ``N_ij sigma_ij sigma_ji``; each Newton step solves
    ``(Laplacian + 11^T / m) delta = g`` (which keeps ``sum theta = 0``), halving the step
    until the likelihood does not decrease. The fit stops when no log-strength changes by
    ``tol`` or more in an iteration (Newton converges quadratically, so the distance to the
    optimum is then far below ``tol``); problems still moving after ``max_iter`` iterations
    are reported in ``converged`` (for example when ``prior = 0`` and a model never wins,
    where no finite maximum exists). Hunter's (2004) MM algorithm, used before, needs tens of
    thousands of iterations on weakly connected comparison graphs. ``start`` (log-strengths)
    warm-starts every problem, e.g. bootstrap refits from the point estimate; the optimum is
    unique (the likelihood is strictly concave on ``sum theta = 0``), so only speed changes.
    """
    w = np.asarray(wins, dtype=float)
    if prior < 0:
        raise ValueError("prior must be >= 0")
    if tol <= 0 or max_iter < 1:
        raise ValueError("tol must be > 0 and max_iter >= 1")
    m = w.shape[-1]
    batch = w.shape[:-2]
    if m < 2:
        return BradleyTerryFit(
            np.zeros(w.shape[:-1]), np.ones(batch, dtype=bool), 0, 0.0, float(tol)
        )
    off = 1.0 - np.eye(m)
    w = (w * off + prior * off).reshape(-1, m, m)  # zero diagonal from here on
    n = w + np.swapaxes(w, -1, -2)
    total = w.sum(axis=-1)
    theta = np.zeros((w.shape[0], m))
    if start is not None:
        theta += np.asarray(start, dtype=float) - np.mean(start)
    ll = _bt_loglik(w, theta)
    active = np.ones(w.shape[0], dtype=bool)
    last_change = np.zeros(w.shape[0])
    centring = np.full((m, m), 1.0 / m)
    eye = np.eye(m)
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 - read after the loop
        idx = np.flatnonzero(active)
        if idx.size == 0:
            iterations -= 1
            break
        t, wa, na = theta[idx], w[idx], n[idx]
        s = 0.5 * (1.0 + np.tanh(0.5 * (t[:, :, None] - t[:, None, :])))  # sigma, stable
        g = total[idx] - (na * s).sum(axis=-1)
        h = na * s * (1.0 - s)
        # A tiny ridge keeps the system solvable when a strength runs off to infinity (its
        # edge weights underflow to 0); it does not move the optimum, only the step length.
        diag = h.sum(axis=-1)
        ridge = 1e-12 * (1.0 + diag.sum(axis=-1) / m)
        system = eye * (diag + ridge[:, None])[:, :, None] - h + centring
        delta = np.linalg.solve(system, g[..., None])[..., 0]
        base = ll[idx]
        step = np.ones(idx.size)
        cand_ll = _bt_loglik(wa, t + delta)
        for _ in range(40):
            worse = cand_ll < base - 1e-12 * np.abs(base)
            if not worse.any():
                break
            step = np.where(worse, step / 2.0, step)
            cand_ll = np.where(worse, _bt_loglik(wa, t + step[:, None] * delta), cand_ll)
        moved = step[:, None] * delta
        new = t + moved
        theta[idx] = new - new.mean(axis=-1, keepdims=True)
        ll[idx] = cand_ll
        change = np.max(np.abs(moved), axis=-1)
        last_change[idx] = change
        active[idx] = ~(change < tol)
    converged = ~active
    if prior == 0:
        # Without pseudo-wins a finite maximum exists only when every model can be reached from
        # every other by a chain of wins (Ford 1957); otherwise the steps can shrink below tol
        # in floating point while the strengths still drift to infinity.
        converged &= _strongly_connected(w)
    return BradleyTerryFit(
        log_p=theta.reshape(*batch, m),
        converged=converged.reshape(batch),
        iterations=int(iterations),
        max_change=float(last_change.max()) if last_change.size else 0.0,
        tol=float(tol),
    )


def bradley_terry(
    wins: np.ndarray, prior: float = 0.1, tol: float = BT_TOL, max_iter: int = BT_MAX_ITER
) -> np.ndarray:
    """Bradley-Terry log-strengths (mean zero per problem); see :func:`bradley_terry_fit`."""
    return bradley_terry_fit(wins, prior=prior, tol=tol, max_iter=max_iter).log_p


def win_rate_matrix(table: JudgementTable) -> tuple[list[str], np.ndarray]:
    """Head-to-head win rates between models within the same review.

    ``matrix[i, j] = w_ij / (w_ij + w_ji)``, where ``w_ij`` counts the response pairs in the
    same review with model ``i`` ranked strictly better than model ``j`` (ties count 1/2 for
    each side). nan on the diagonal and where two models never met, so
    ``matrix[i, j] + matrix[j, i] == 1`` wherever defined. Models are sorted by name.
    """
    models, _, wins = _win_counts(table)
    w = wins.sum(axis=0)
    n = w + w.T
    with np.errstate(invalid="ignore", divide="ignore"):
        matrix = np.where(n > 0, w / np.where(n > 0, n, 1.0), np.nan)
    np.fill_diagonal(matrix, np.nan)
    return [str(m) for m in models], matrix


def leaderboard(
    table: JudgementTable,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    prior: float = 0.1,
) -> list[dict[str, Any]]:
    """Per-model summary rows; see :func:`leaderboard_fit` (which also says how BT converged)."""
    return leaderboard_fit(table, n_resamples, seed, confidence, prior)[0]


def leaderboard_fit(
    table: JudgementTable,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    prior: float = 0.1,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per-model summary, sorted by Bradley-Terry strength (best first).

    For each model: ``n`` rows; ``share_correct = sum(correct) / n_correct_known`` (rows where
    ``correct`` is nan are ignored) with its Wilson interval; ``mean_rank``; and the
    Bradley-Terry log-strength (:func:`bradley_terry` on the pairwise wins of
    :func:`win_rate_matrix`), normalized to mean zero over models, with a percentile CI from a
    cluster bootstrap over instructions (the per-instruction win matrices are resampled and the
    model refitted for every resample, vectorized over resamples).

    The second value reports the fits: the tolerance, whether the point fit converged, its
    iterations, and how many bootstrap refits did not converge (their strengths still enter
    the interval, as the best estimate reached; the report shows the count).
    """
    _check_bootstrap_args(n_resamples, confidence)
    models, _, wins = _win_counts(table)
    n_models = models.shape[0]
    info: dict[str, Any] = {
        "prior": prior,
        "pseudo_wins": "prior wins in each direction of every pair of models",
        "tol": BT_TOL,
        "bootstrap_tol": BT_BOOTSTRAP_TOL,
        "max_iter": BT_MAX_ITER,
        "converged": True,
        "iterations": 0,
        "bootstrap_not_converged": 0,
        "bootstrap_fits": 0,
    }
    if n_models == 0:
        return [], info
    point = bradley_terry_fit(wins.sum(axis=0), prior=prior)
    strength = point.log_p
    info.update(converged=bool(np.all(point.converged)), iterations=point.iterations)
    if wins.shape[0]:
        draws = _cluster_counts(wins.shape[0], int(n_resamples), int(seed))
        boot_wins = (draws @ wins.reshape(wins.shape[0], -1)).reshape(-1, n_models, n_models)
        boot_fit = bradley_terry_fit(
            boot_wins,
            prior=prior,
            tol=BT_BOOTSTRAP_TOL,
            start=strength if point.converged else None,
        )
        boot = boot_fit.log_p
        info.update(
            bootstrap_not_converged=boot_fit.n_not_converged, bootstrap_fits=int(boot.shape[0])
        )
        alpha = 1.0 - confidence
        bt_lo, bt_hi = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    else:
        bt_lo = bt_hi = np.full(n_models, np.nan)
    comparisons = (wins.sum(axis=0) + wins.sum(axis=0).T).sum(axis=1)

    model_str = np.asarray(table.model).astype(str)
    correct = _as_float(table.correct)
    rank = _as_float(table.rank)
    rows = []
    for k, name in enumerate(models):
        mine = model_str == name
        known = mine & ~np.isnan(correct)
        n_known = int(known.sum())
        succ = float(correct[known].sum())
        lo, hi = wilson_interval(succ, n_known, confidence)
        ranks = rank[mine & ~np.isnan(rank)]
        rows.append(
            {
                "model": str(name),
                "n": int(mine.sum()),
                "n_correct_known": n_known,
                "share_correct": succ / n_known if n_known else math.nan,
                "correct_ci_low": lo,
                "correct_ci_high": hi,
                "mean_rank": float(ranks.mean()) if ranks.size else math.nan,
                "bt_strength": float(strength[k]),
                "bt_ci_low": float(bt_lo[k]),
                "bt_ci_high": float(bt_hi[k]),
                "n_comparisons": float(comparisons[k]),
            }
        )
    rows.sort(key=lambda r: (-r["bt_strength"], r["model"]))
    return rows, info


# ---------------------------------------------------------------------------------------------
# 10. Position bias
# ---------------------------------------------------------------------------------------------


def position_bias(
    table: JudgementTable,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Do clinicians favour responses shown early?

    ``mean_rank[p]`` = mean rank of the responses shown at 0-based position ``p`` (with
    ``count[p]``). The test statistic is per review, like every other statistic here::

        tau_r = tau_b(position_i, rank_i)      over the responses of review r

    (reviews with fewer than two distinct ranks are skipped), ``tau = mean_r tau_r``, with a
    cluster-bootstrap interval over instructions and the two-sided bootstrap p-value of
    :func:`paired_bootstrap_test` (``p = min(1, 2 * share of resampled means on the other side
    of 0)``). Judgements of one review are not independent, so pooling them (as a single
    scipy test over all rows would) overstates the evidence. Positive tau: later positions
    get worse (larger) ranks.
    """
    _check_bootstrap_args(n_resamples, confidence)
    rank = _as_float(table.rank)
    position = _as_float(table.position)
    ok = ~np.isnan(rank) & ~np.isnan(position)
    positions, inverse = np.unique(position[ok], return_inverse=True)
    inverse = inverse.ravel()
    counts = np.bincount(inverse, minlength=positions.shape[0])
    sums = np.bincount(inverse, weights=rank[ok], minlength=positions.shape[0])
    # tau_b(-rank, -position) == tau_b(position, rank): per_review_tau negates the ranks.
    taus = per_review_tau(table, -position)
    out: dict[str, Any] = {
        "positions": [int(v) for v in positions],
        "mean_rank": [float(v) for v in sums / np.maximum(counts, 1)],
        "count": [int(v) for v in counts],
        "tau": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "p_value": math.nan,
        "n": int(ok.sum()),
        "n_reviews": len(taus),
        "n_skipped": taus.skipped,
        "n_instructions": int(np.unique(taus.instruction).shape[0]),
        "method": "per-review tau-b, cluster bootstrap over instructions",
        "confidence": confidence,
        "seed": seed,
        "n_resamples": int(n_resamples),
    }
    if len(taus):
        mean = float(taus.tau.mean())
        dist = _bootstrap_means(taus.tau, taus.instruction, n_resamples, seed)
        lo, hi = _percentile_interval(dist, confidence)
        out.update(tau=mean, ci_low=lo, ci_high=hi, p_value=_bootstrap_p_value(mean, dist))
    return out


# ---------------------------------------------------------------------------------------------
# 11. Breakdown by category / specialty
# ---------------------------------------------------------------------------------------------


def _subset_scores(scores: Any, mask: np.ndarray) -> Any:
    if scores is None:
        return None
    if isinstance(scores, Mapping):
        return {k: np.asarray(v)[mask] for k, v in scores.items()}
    return np.asarray(scores)[mask]


def breakdown(
    table: JudgementTable,
    scores: Scores | Mapping[str, Scores] | None,
    by: str,
    fn: Callable[..., Any],
    **kw: Any,
) -> dict[str, Any]:
    """Apply a statistic separately to every value of ``table.<by>`` (e.g. category).

    ``result[v] = fn(table.subset(table.<by> == v), scores[mask], **kw)``; when ``scores`` is
    None the statistic is called without scores (``fn(subset, **kw)``), which suits
    :func:`human_ceiling`, :func:`leaderboard` and :func:`position_bias`. Keys are sorted.
    """
    if by not in {f.name for f in fields(JudgementTable)}:
        raise ValueError(f"unknown field {by!r}; use e.g. 'category' or 'specialty'")
    column = np.asarray(getattr(table, by))
    if scores is not None:
        if isinstance(scores, Mapping):
            for v in scores.values():
                _check_scores(table, v)
        else:
            _check_scores(table, scores)
    result: dict[str, Any] = {}
    for value in np.unique(column.astype(str)):
        mask = column.astype(str) == value
        sub = table.subset(mask)
        sub_scores = _subset_scores(scores, mask)
        result[str(value)] = fn(sub, **kw) if scores is None else fn(sub, sub_scores, **kw)
    return result


# ---------------------------------------------------------------------------------------------
# 12. Context length: one base model at several context lengths
# ---------------------------------------------------------------------------------------------


def mcnemar_exact(b: int, c: int) -> float:
    """Exact (binomial) two-sided McNemar p-value from the two discordant counts.

    ``b`` = pairs where only the first condition was correct, ``c`` = only the second. Under
    the null each discordant pair goes either way with probability 1/2::

        p = min(1, 2 * P(X <= min(b, c))),   X ~ Binomial(b + c, 1/2)

    (the same as ``statsmodels.stats.contingency_tables.mcnemar(exact=True)``); no discordant
    pair -> 1.
    """
    b, c = int(b), int(c)
    if b < 0 or c < 0:
        raise ValueError("counts must be >= 0")
    if b + c == 0:
        return 1.0
    return float(min(1.0, 2.0 * sps.binom.cdf(min(b, c), b + c, 0.5)))


def context_length_analysis(
    table: JudgementTable,
    variants: Mapping[str, tuple[str, int | None]],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Correct-rate and rank of one base model at different context lengths.

    ``variants`` maps a model name to ``(base model, context length)``; models not in it are
    left out. Per (base, length) cell: judgements, share judged correct with its Wilson interval
    and mean rank. For every base model and every two of its context lengths ``long > short``,
    over the reviews that judged both variants (the same clinician, the same instruction)::

        d_correct_r = correct_r(long) - correct_r(short)          (in {-1, 0, 1})
        d_rank_r    = rank_r(short) - rank_r(long)                 (> 0: long ranked better)

    each averaged over reviews with a cluster-bootstrap interval over instructions, and the
    exact McNemar test (:func:`mcnemar_exact`) on the correct/incorrect pairs, with ``b`` = only
    the long variant correct, ``c`` = only the short one. McNemar counts each review's pair as
    one observation; when several clinicians review an instruction their pairs are not
    independent, which the cluster-bootstrap interval accounts for and McNemar does not.
    """
    _check_bootstrap_args(n_resamples, confidence)
    model = np.asarray(table.model).astype(str)
    rank = _as_float(table.rank)
    correct = _as_float(table.correct)
    declared = {
        str(k): (str(v[0]), None if v[1] is None else int(v[1])) for k, v in variants.items()
    }
    cells: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
    bases: dict[str, dict[int | None, list[str]]] = {}
    for name, (base, length) in sorted(declared.items()):
        bases.setdefault(base, {}).setdefault(length, []).append(name)
    for base in sorted(bases):
        lengths = bases[base]
        for length in sorted(lengths, key=lambda v: (v is None, v or 0)):
            mine = np.isin(model, lengths[length])
            known = mine & ~np.isnan(correct)
            n_known = int(known.sum())
            succ = float(correct[known].sum())
            lo, hi = wilson_interval(succ, n_known, confidence)
            ranks = rank[mine & ~np.isnan(rank)]
            cells.append(
                {
                    "base_model": base,
                    "context_length": length,
                    "models": sorted(lengths[length]),
                    "n": int(mine.sum()),
                    "n_correct_known": n_known,
                    "share_correct": succ / n_known if n_known else math.nan,
                    "correct_ci_low": lo,
                    "correct_ci_high": hi,
                    "mean_rank": float(ranks.mean()) if ranks.size else math.nan,
                }
            )
        known_lengths = sorted(v for v in lengths if v is not None)
        for short, long in itertools.combinations(known_lengths, 2):
            comparisons.append(
                _context_pair(
                    table,
                    model,
                    rank,
                    correct,
                    base,
                    lengths[long],
                    lengths[short],
                    long,
                    short,
                    n_resamples,
                    seed,
                    confidence,
                )  # fmt: skip
            )
    return {
        "cells": cells,
        "comparisons": comparisons,
        "n_bases": len(bases),
        "confidence": confidence,
        "seed": seed,
        "n_resamples": int(n_resamples),
    }


def _context_pair(
    table: JudgementTable,
    model: np.ndarray,
    rank: np.ndarray,
    correct: np.ndarray,
    base: str,
    long_models: list[str],
    short_models: list[str],
    long: int,
    short: int,
    n_resamples: int,
    seed: int,
    confidence: float,
) -> dict[str, Any]:
    review = np.asarray(table.review)
    long_rows = np.flatnonzero(np.isin(model, long_models))
    short_rows = np.flatnonzero(np.isin(model, short_models))
    # One row per review and side (the first, should a review hold two models of one side).
    long_reviews, first_long = np.unique(review[long_rows], return_index=True)
    short_reviews, first_short = np.unique(review[short_rows], return_index=True)
    both, il, is_ = np.intersect1d(long_reviews, short_reviews, return_indices=True)
    rl, rs = long_rows[first_long[il]], short_rows[first_short[is_]]
    instruction = np.asarray(table.instruction)[rl]
    out: dict[str, Any] = {
        "base_model": base,
        "long": long,
        "short": short,
        "n_reviews": int(both.size),
        "n_instructions": int(np.unique(instruction).shape[0]),
    }
    ok_c = ~np.isnan(correct[rl]) & ~np.isnan(correct[rs])
    cl, cs = correct[rl][ok_c] > 0.5, correct[rs][ok_c] > 0.5
    b, c = int((cl & ~cs).sum()), int((~cl & cs).sum())
    d_correct = cl.astype(float) - cs.astype(float)
    out.update(
        n_pairs_correct=int(ok_c.sum()),
        share_correct_long=float(cl.mean()) if cl.size else math.nan,
        share_correct_short=float(cs.mean()) if cs.size else math.nan,
        both_correct=int((cl & cs).sum()),
        only_long_correct=b,
        only_short_correct=c,
        neither_correct=int((~cl & ~cs).sum()),
        mcnemar_p_value=mcnemar_exact(b, c) if cl.size else math.nan,
        **_paired_mean(d_correct, instruction[ok_c], "correct_difference", n_resamples, seed,
                       confidence),
    )  # fmt: skip
    ok_r = ~np.isnan(rank[rl]) & ~np.isnan(rank[rs])
    d_rank = rank[rs][ok_r] - rank[rl][ok_r]
    out.update(
        n_pairs_rank=int(ok_r.sum()),
        **_paired_mean(d_rank, instruction[ok_r], "rank_difference", n_resamples, seed, confidence),
    )
    return out


def _paired_mean(
    d: np.ndarray, clusters: np.ndarray, name: str, n_resamples: int, seed: int, confidence: float
) -> dict[str, float]:
    if d.size == 0:
        return {name: math.nan, f"{name}_ci_low": math.nan, f"{name}_ci_high": math.nan,
                f"{name}_p_value": math.nan}  # fmt: skip
    mean = float(d.mean())
    dist = _bootstrap_means(d, clusters, n_resamples, seed)
    lo, hi = _percentile_interval(dist, confidence)
    return {name: mean, f"{name}_ci_low": lo, f"{name}_ci_high": hi,
            f"{name}_p_value": _bootstrap_p_value(mean, dist)}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Synthetic benchmark data
# ---------------------------------------------------------------------------------------------


def bench_inputs(
    n_instructions: int = 303,
    n_responses: int = 6,
    n_clinicians: int = 3,
    n_metrics: int = 6,
    seed: int = 0,
) -> tuple[JudgementTable, dict[str, np.ndarray]]:
    """Synthetic judgements: every clinician ranks every instruction's ``n_responses``.

    Response ``k`` of each instruction comes from model ``model_k`` whose strength decreases
    with ``k``; a response's latent quality is model strength + instruction noise; every
    clinician ranks by quality + personal noise, rounded so that ties occur. Metric ``j``
    scores are quality + noise of increasing size (metric_0 best), with ~1 % missing (nan).
    """
    rng = np.random.default_rng(seed)
    n_rows = n_instructions * n_clinicians * n_responses
    strength = np.linspace(1.0, -1.0, n_responses)
    quality = strength[None, :] + rng.normal(0.0, 1.0, size=(n_instructions, n_responses))
    inst = np.repeat(np.arange(n_instructions), n_clinicians * n_responses)
    clin = np.tile(np.repeat(np.arange(n_clinicians), n_responses), n_instructions)
    resp_k = np.tile(np.arange(n_responses), n_instructions * n_clinicians)
    q = quality[inst, resp_k]
    perceived = np.round(q + rng.normal(0.0, 0.7, size=n_rows), 0).reshape(-1, n_responses)
    rank = sps.rankdata(-perceived, method="min", axis=1).ravel().astype(float)
    position = np.argsort(rng.random((n_rows // n_responses, n_responses)), axis=1).ravel()
    categories = np.array(["diagnosis", "treatment", "summary", "triage", "education"])
    specialties = np.array(["cardiology", "oncology", "primary care", "neurology"])
    table = JudgementTable(
        review=inst * n_clinicians + clin,
        instruction=inst,
        clinician=clin,
        model=np.array([f"model_{k}" for k in range(n_responses)], dtype=object)[resp_k],
        response=inst * n_responses + resp_k,
        rank=rank,
        correct=(perceived.ravel() > -0.5),
        position=position,
        category=categories[inst % categories.shape[0]],
        specialty=specialties[clin % specialties.shape[0]],
    )
    scores = {}
    for j in range(n_metrics):
        # A metric scores a response, so all clinicians' rows of a response share the score.
        s = quality + rng.normal(0.0, 0.5 + 0.5 * j, size=quality.shape)
        s[rng.random(quality.shape) < 0.01] = np.nan
        scores[f"metric_{j}"] = s[inst, resp_k]
    return table, scores
