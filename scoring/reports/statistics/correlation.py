"""How well does a metric order responses as clinicians do? Per-review Kendall tau-b, pairwise
accuracy, system-level tau.

Kendall's tau-b
---------------
For paired observations ``(x_i, y_i)`` with ``n0 = n (n - 1) / 2`` pairs::

    tau_b = (P - Q) / sqrt((n0 - T_x) (n0 - T_y))

where ``P``/``Q`` count concordant/discordant pairs and ``T_x``/``T_y`` count pairs tied in
``x``/``y``. This is the statistic of ``scipy.stats.kendalltau(x, y, variant="b")``; the
per-review taus are computed with a vectorized implementation of exactly that formula
(``engine="numpy"``, the default, which the test-suite checks against scipy review by review) or
by calling scipy once per review (``engine="scipy"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import stats as sps

from .resampling import DEFAULT_RESAMPLES, cluster_bootstrap_ci
from .table import (
    Array,
    Engine,
    JudgementTable,
    ReviewTaus,
    Scores,
    _as_float,
    _check_bootstrap_args,
    _check_scores,
    _group_nanmean,
    _group_rows,
    _take,
    _tau_b_padded,
)


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


def _review_pairs(
    table: JudgementTable, scores: Array | None
) -> tuple[Array, Array, Array, Array, Array]:
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
