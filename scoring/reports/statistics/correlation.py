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

from .intervals import INTERVAL_METHOD, cluster_ci, cluster_means
from .resampling import (
    DEFAULT_RESAMPLES,
    MIN_CLUSTERS,
    interval_note,
    n_clusters_of,
)
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

TAU_RANGE = (-1.0, 1.0)


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
    first = rows[:, 0] if rows.size else np.zeros(0, dtype=np.intp)
    instruction_ids = np.asarray(table.instruction)[first]
    cluster_ids = np.asarray(table.clusters)[first]
    keep = ~np.isnan(tau)
    return ReviewTaus(
        review=review_ids[keep],
        instruction=instruction_ids[keep],
        tau=tau[keep],
        skipped=int((~keep).sum()),
        skipped_reviews=review_ids[~keep],
        cluster=cluster_ids[keep],
    )


def _summary(
    taus: ReviewTaus,
    lo: float,
    hi: float,
    n_resamples: int,
    seed: int,
    confidence: float,
    min_clusters: int,
) -> dict[str, Any]:
    n_clusters = n_clusters_of(taus.cluster)
    return {
        "mean_tau": float(taus.tau.mean()) if len(taus) else math.nan,
        "ci_low": lo,
        "ci_high": hi,
        "variant": "tau-b",
        "level": "per review, averaged",
        "n_reviews": len(taus),
        "n_skipped": taus.skipped,
        "n_instructions": int(np.unique(taus.instruction).shape[0]),
        "n_clusters": n_clusters,
        "interval_note": interval_note(n_clusters, min_clusters) if len(taus) else "",
        "interval_method": INTERVAL_METHOD,
        "confidence": confidence,
        "seed": seed,
        "n_resamples": int(n_resamples),
    }


def metric_correlation(
    table: JudgementTable,
    scores: Scores,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """Mean per-review Kendall tau-b between a metric and the clinicians' ranks, with CI.

    ``mean_tau = (1 / R) sum_r tau_r`` over the ``R`` non-skipped reviews (see
    :func:`per_review_tau`); ``[ci_low, ci_high]`` is the studentized cluster-bootstrap
    interval (:func:`intervals.cluster_ci`; none below ``min_clusters`` clusters).
    """
    _check_bootstrap_args(n_resamples, confidence)
    taus = per_review_tau(table, scores)
    lo, hi = math.nan, math.nan
    if len(taus):
        lo, hi = cluster_ci(
            taus.tau, taus.cluster, n_resamples, seed, confidence, min_clusters, bounds=TAU_RANGE
        )
    return _summary(taus, lo, hi, n_resamples, seed, confidence, min_clusters)


def metric_correlations(
    table: JudgementTable,
    scores: Mapping[str, Scores],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, dict[str, Any]]:
    """:func:`metric_correlation` for every metric of a ``{name: scores}`` mapping, the
    bootstrap of metrics whose reviews cover the same clusters done in one pass (the same
    draws, hence the same intervals as one metric at a time, to rounding)."""
    _check_bootstrap_args(n_resamples, confidence)
    names = list(scores)
    taus = {name: per_review_tau(table, scores[name]) for name in names}
    out: dict[str, dict[str, Any]] = {}
    by_clusters: dict[bytes, list[str]] = {}
    for name in names:
        t = taus[name]
        if len(t) == 0 or n_clusters_of(t.cluster) < min_clusters:
            out[name] = _summary(t, math.nan, math.nan, n_resamples, seed, confidence, min_clusters)
            continue
        by_clusters.setdefault(np.unique(t.cluster).tobytes(), []).append(name)
    for group in by_clusters.values():
        reviews = np.unique(np.concatenate([taus[n].review for n in group]))
        values = np.full((reviews.shape[0], len(group)), np.nan)
        cluster = np.zeros(reviews.shape[0], dtype=taus[group[0]].cluster.dtype)
        for k, name in enumerate(group):
            at = np.searchsorted(reviews, taus[name].review)
            values[at, k] = taus[name].tau
            cluster[at] = taus[name].cluster
        res = cluster_means(
            values, cluster, n_resamples, seed, confidence, min_clusters, bounds=TAU_RANGE
        )
        for k, name in enumerate(group):
            lo, hi = res[k].ci_low, res[k].ci_high
            out[name] = _summary(taus[name], lo, hi, n_resamples, seed, confidence, min_clusters)
    return {name: out[name] for name in names}


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
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """Share of clinician-ordered response pairs that the metric orders the same way.

    Over every review and every pair ``(i, j)`` of its responses with ``rank_i != rank_j``
    (both scored), the credit is::

        c_ij = 1    if sgn(score_i - score_j) == sgn(rank_j - rank_i)   (agrees)
               1/2  if score_i == score_j                               (metric tie)
               0    otherwise

    and ``accuracy = sum c_ij / n_pairs``, pooled over the pairs of every review. Metric ties
    count as half a correct pair (the expected accuracy of breaking the tie at random). Pairs
    tied by the clinician are not counted. Undefined when the metric ties every pair (a
    constant metric orders nothing: 0.5 would be a number with no information). The CI is the
    studentized cluster bootstrap of the pair credits.
    """
    _check_bootstrap_args(n_resamples, confidence)
    s = _check_scores(table, scores)
    rank = _as_float(table.rank)
    a, b, group, _, _ = _review_pairs(table, s)
    strict = rank[a] != rank[b]
    a, b = a[strict], b[strict]
    agree = np.sign(s[a] - s[b]) == np.sign(rank[b] - rank[a])
    ties = s[a] == s[b]
    credit = np.where(ties, 0.5, agree.astype(float))
    clusters = np.asarray(table.clusters)[a]
    n_clusters = n_clusters_of(clusters)
    if credit.size == 0 or ties.all():
        acc, lo, hi = math.nan, math.nan, math.nan
    else:
        acc = float(credit.mean())
        lo, hi = cluster_ci(
            credit, clusters, n_resamples, seed, confidence, min_clusters, bounds=(0.0, 1.0)
        )
    return {
        "accuracy": acc,
        "ci_low": lo,
        "ci_high": hi,
        "level": "pooled over response pairs",
        "n_pairs": int(credit.size),
        "n_metric_ties": int(ties.sum()),
        "n_reviews": int(np.unique(np.asarray(table.review)[a]).shape[0]),
        "n_instructions": int(np.unique(np.asarray(table.instruction)[a]).shape[0]),
        "n_clusters": n_clusters,
        "interval_note": interval_note(n_clusters, min_clusters) if credit.size else "",
        "confidence": confidence,
        "seed": seed,
        "n_resamples": int(n_resamples),
    }


def _acc23_parts(table: JudgementTable, scores: Array) -> tuple[Array, Array, Array, Array]:
    """Per pair of responses in a review (both ranked and scored): the review's index, the
    clinician's order (+1: the first is better, 0: tie), the metric's order, |difference|."""
    rank = _as_float(table.rank)
    a, b, group, _, _ = _review_pairs(table, scores)
    human = np.sign(rank[b] - rank[a])
    metric = np.sign(scores[a] - scores[b])
    return group, human, metric, np.abs(scores[a] - scores[b])


def tie_calibrated_accuracy(
    table: JudgementTable,
    scores: Scores,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
    epsilon: float | None = None,
) -> dict[str, Any]:
    """Pairwise accuracy with ties, calibrated (``acc23``; Deutsch, Foster & Freitag 2023,
    "Ties Matter", as WMT's metrics task computes it in mt-metrics-eval).

    Per review ``r`` and every pair of its responses (both ranked and scored, ties included on
    both sides), with a metric tie meaning ``|score_i - score_j| <= epsilon``::

        credit = 1  if the clinician and the metric order the pair the same way, or both tie
                 0  otherwise
        acc_r  = sum credit / pairs_r,         acc23 = mean_r acc_r

    Unlike tau-b and :func:`pairwise_accuracy`, a metric is rewarded for predicting the
    clinicians' ties. ``epsilon`` is chosen to maximise acc23 on these judgements (tie
    calibration: every distinct |difference| is a candidate, the smallest best one wins),
    unless given; it is therefore optimistic on the data it was tuned on, as in WMT. The CI is
    the studentized cluster bootstrap of the per-review accuracies at the chosen epsilon (the
    threshold is not re-tuned in each resample).
    """
    _check_bootstrap_args(n_resamples, confidence)
    s = _check_scores(table, scores)
    group, human, metric, diff = _acc23_parts(table, s)
    out: dict[str, Any] = {
        "accuracy": math.nan,
        "epsilon": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "variant": "acc23 (tie-calibrated)",
        "level": "per review, averaged",
        "n_pairs": int(group.size),
        "n_reviews": 0,
        "n_clusters": 0,
        "interval_note": "",
        "confidence": confidence,
        "seed": seed,
        "n_resamples": int(n_resamples),
    }
    if group.size == 0:
        return out
    used, review_of_pair = np.unique(group, return_inverse=True)
    review_of_pair = review_of_pair.reshape(-1)
    n_reviews = used.shape[0]
    pairs_per_review = np.bincount(review_of_pair, minlength=n_reviews).astype(float)
    weight = 1.0 / (pairs_per_review[review_of_pair] * n_reviews)
    base_credit = (human == metric).astype(float)
    if epsilon is None:
        # Sweep thresholds: a pair becomes a metric tie once epsilon >= its difference; its
        # credit then becomes "the clinician tied it too".
        order = np.argsort(diff, kind="stable")
        delta = ((human == 0).astype(float) - base_credit)[order] * weight[order]
        overall = float((base_credit * weight).sum()) + np.cumsum(delta)
        d_sorted = diff[order]
        last_of_value = np.r_[d_sorted[1:] != d_sorted[:-1], True]
        candidates = np.r_[0.0, d_sorted[last_of_value]]
        values = np.r_[float((base_credit * weight).sum()), overall[last_of_value]]
        if d_sorted[0] == 0.0:
            # Exact ties are ties already: threshold 0 is the first candidate group itself.
            candidates, values = candidates[1:], values[1:]
        best = int(np.argmax(values))
        epsilon = float(candidates[best])
    tie = diff <= epsilon
    metric_eps = np.where(tie, 0.0, metric)
    credit = (human == metric_eps).astype(float)
    per_review = np.bincount(review_of_pair, weights=credit, minlength=n_reviews) / (
        pairs_per_review
    )
    first_row = _group_rows(table.review)[1][:, 0]
    clusters = np.asarray(table.clusters)[first_row][used]
    n_clusters = n_clusters_of(clusters)
    lo, hi = cluster_ci(
        per_review, clusters, n_resamples, seed, confidence, min_clusters, bounds=(0.0, 1.0)
    )
    out.update(
        accuracy=float(per_review.mean()),
        epsilon=float(epsilon),
        ci_low=lo,
        ci_high=hi,
        n_reviews=int(n_reviews),
        n_clusters=n_clusters,
        interval_note=interval_note(n_clusters, min_clusters),
    )
    return out


def system_level_tau(table: JudgementTable, scores: Scores) -> dict[str, Any]:
    """Kendall tau-b between models ordered by clinicians and by the metric.

    Per model ``m``: ``mean_rank_m`` = mean rank over all its ranked rows and
    ``mean_score_m`` = mean of its non-nan scores. Then::

        tau = tau_b(-mean_rank, mean_score)     (over models with both means defined)

    with the p-value of ``scipy.stats.kendalltau`` (which treats the models as independent
    observations: with six models it can rarely be small). Fewer than two models -> nan.
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
        "variant": "tau-b",
        "level": "system (model means)",
        "n_models": int(ok.sum()),
        "mean_rank": {str(m): float(v) for m, v in zip(models, mean_rank, strict=True)},
        "mean_score": {str(m): float(v) for m, v in zip(models, mean_score, strict=True)},
    }
