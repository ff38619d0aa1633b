"""Is a difference real? Paired tests between metrics, position bias, context length."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import stats as sps

from .correlation import per_review_tau
from .leaderboard import wilson_interval
from .resampling import (
    DEFAULT_RESAMPLES,
    _bootstrap_means,
    _bootstrap_p_value,
    _percentile_interval,
)
from .table import Array, JudgementTable, Scores, _as_float, _check_bootstrap_args


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
    model: Array,
    rank: Array,
    correct: Array,
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
    d: Array, clusters: Array, name: str, n_resamples: int, seed: int, confidence: float
) -> dict[str, float]:
    if d.size == 0:
        return {name: math.nan, f"{name}_ci_low": math.nan, f"{name}_ci_high": math.nan,
                f"{name}_p_value": math.nan}  # fmt: skip
    mean = float(d.mean())
    dist = _bootstrap_means(d, clusters, n_resamples, seed)
    lo, hi = _percentile_interval(dist, confidence)
    return {name: mean, f"{name}_ci_low": lo, f"{name}_ci_high": hi,
            f"{name}_p_value": _bootstrap_p_value(mean, dist)}  # fmt: skip
