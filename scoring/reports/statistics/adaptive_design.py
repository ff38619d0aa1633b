"""Where the next clinician reviews should go, and when the leaderboard is settled.

An adaptive study (``review.services.adaptive``) walks its instructions in waves, in an order
drawn once with a recorded seed. Before a wave is drawn, each of its instructions gets a
sampling probability ``pi`` from what is known then (the predictor everywhere, the clinicians'
labels of earlier waves); an instruction is reviewed when a uniform draw falls below its
``pi``. ``active.active_mean_ci`` weights each review by ``1/pi``, so the estimates stay
unbiased however the probabilities were chosen; the choice only decides how narrow they get.

The interval that matters is the gap between neighbours on the leaderboard of share correct.
Following Zrnic & Candès (2024), the variance of the weighted estimate of a gap is smallest when
``pi_i`` is proportional to the root of the expected squared error of the predictor on unit
``i``; summed over the gaps, each weighted by how unsettled it still is, that gives the score
``sqrt(sum_p w_p e_ip)``. The expected error ``e_ip`` comes from a line fitted to the labelled
units (squared residual against the predictor's own uncertainty ``f(1-f)``), so a predictor
whose uncertainty says nothing gets a flat line and the design falls back to uniform.

Every instruction keeps a probability of at least ``pi_min``: no part of the population is left
to the predictor alone, and the weights stay bounded by ``1/pi_min``.

The stopping rule: the ranking is settled when every gap between neighbours excludes 0 at the
family-wise level ``alpha``, Bonferroni-corrected over every pair of models (a wrongly settled
ranking puts some pair in the wrong order, whichever pairs end up neighbours) and over every
planned look (one per wave), so peeking after each wave cannot spend more than ``alpha``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats as sps

from .active import (
    ACTIVE_TUNE_MIN,
    Array,
    MeanCI,
    active_contrasts,
    active_fixed_contrasts,
    active_moments,
)

Bools = NDArray[np.bool_]
Ints = NDArray[np.intp]


def inclusion_probabilities(score: Any, budget: Any, pi_min: float) -> Array:
    """``pi = clip(c * score, pi_min, 1)`` with ``c`` set so that the probabilities of each
    row (last axis) sum to ``budget`` (the expected number of units drawn). Vectorised; a row
    of equal scores gets ``budget / n`` everywhere."""
    score = np.asarray(score, dtype=float)
    n = score.shape[-1]
    budget_arr = np.broadcast_to(np.asarray(budget, dtype=float), score.shape[:-1])
    if not 0.0 < pi_min <= 1.0:
        raise ValueError("pi_min must be in (0, 1]")
    if np.any(budget_arr < pi_min * n - 1e-9) or np.any(budget_arr > n + 1e-9):
        raise ValueError("the budget must lie between pi_min x units and the number of units")
    score = np.maximum(score, 1e-12)
    lo = np.zeros(score.shape[:-1])
    hi = np.full(score.shape[:-1], 1.0) / score.min(-1)  # c at which every unit reaches 1
    for _ in range(60):  # bisection: the total is monotone in c
        mid = (lo + hi) / 2.0
        total = np.clip(mid[..., None] * score, pi_min, 1.0).sum(-1)
        low = total < budget_arr
        lo = np.where(low, mid, lo)
        hi = np.where(low, hi, mid)
    return np.asarray(np.clip(hi[..., None] * score, pi_min, 1.0), dtype=float)


def n_model_pairs(k: int) -> int:
    return k * (k - 1) // 2


@dataclass(frozen=True)
class RankingStatus:
    """The leaderboard as estimated so far, and whether its order is settled."""

    shares: MeanCI  # per model (leading axes x K)
    order: Ints  # models from most to least correct (… x K)
    gaps: MeanCI  # neighbour i minus neighbour i+1, at the corrected level (… x K-1)
    gaps_raw: MeanCI  # the same gaps at level alpha, uncorrected (for the design's weights)
    separated: Bools  # a gap's corrected interval lies above 0 (… x K-1)
    settled: Bools  # every gap separated (…)
    level: float  # the per-gap, per-look level used (alpha / pairs / looks)
    reviewed: Ints  # reviewed instructions among the walked ones (…)
    patients: Ints | None  # the patients they are about (…); None without clusters


def gap_contrasts(order: Ints) -> Array:
    """Contrasts (…, K-1, K): each model minus the next one down the leaderboard."""
    k = order.shape[-1]
    one_hot = np.eye(k)[order]
    return np.asarray(one_hot[..., :-1, :] - one_hot[..., 1:, :], dtype=float)


# The fewest reviewed instructions before the stopping rule may say "settled".
MIN_REVIEWED_TO_STOP = 30
# With patients as the draws, the fewest reviewed patients too: a cluster-robust variance from
# a handful of clusters is too small (the report's own floor, ``statistics.MIN_CLUSTERS``).
MIN_PATIENTS_TO_STOP = 10


def ranking_status(
    yhat: Any,
    y: Any,
    xi: Any,
    pi: Any,
    *,
    mask: Any = None,
    alpha: float = 0.05,
    looks: int = 1,
    clusters: Any = None,
) -> RankingStatus:
    """Shares correct and neighbour gaps from an adaptive (or uniform) design.

    ``yhat`` and ``y`` are (…, N, K): the predictor and the clinicians' mean verdict per
    instruction and model (``y`` read only where ``xi``); ``xi`` and ``pi`` (…, N); ``mask``
    (…, N) the instructions already walked (their probability fixed), default all;
    ``clusters`` (N,) each instruction's patient: intervals count patients, not instructions,
    as independent draws."""
    yhat = np.asarray(yhat, dtype=float)
    k = yhat.shape[-1]
    walked = np.ones(np.shape(xi), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    labelled = np.asarray(xi, dtype=bool) & walked
    reviewed = labelled.sum(-1)
    # Below ACTIVE_TUNE_MIN reviewed patients (instructions without clusters): lambda fixed at 1,
    # unbiased, with CR2 / Bell-McCaffrey intervals; above, lambda and gamma tuned.
    draws = _labelled_clusters(labelled, clusters)
    fixed = draws < ACTIVE_TUNE_MIN
    moments = active_moments(yhat, y, xi, pi, mask=mask, clusters=clusters)
    eye = np.broadcast_to(np.eye(k), (*yhat.shape[:-2], k, k))

    def contrast(c: Array, level: float) -> MeanCI:
        tuned = active_contrasts(moments, c, alpha=level)
        if not fixed.any():
            return tuned
        plain = active_fixed_contrasts(
            yhat, y, xi, pi, c, alpha=level, mask=mask, clusters=clusters
        )
        if fixed.all():
            return plain
        pick = fixed[..., None]
        assert plain.df is not None
        mixed = [
            np.where(pick, p, t) for p, t in zip(_fields5(plain), _fields5(tuned), strict=True)
        ]
        return MeanCI(
            mixed[0], mixed[1], mixed[2], mixed[3], mixed[4], np.where(pick, plain.df, np.inf)
        )

    shares = MeanCI(*_relevel(contrast(eye, alpha), alpha))
    order = np.argsort(-shares.estimate, axis=-1, kind="stable")
    gaps_raw = contrast(gap_contrasts(order), alpha)
    level = alpha / (n_model_pairs(k) * max(looks, 1))
    gaps = MeanCI(*_relevel(gaps_raw, level))
    # A gap with no spread (se 0: too few or identical labels) separates nothing.
    separated = (gaps.lower > 0) & (gaps.se > 0)
    enough = reviewed >= MIN_REVIEWED_TO_STOP
    patients = None
    if clusters is not None:
        labels = np.asarray(clusters)
        patients = np.array(
            [len(np.unique(labels[row])) for row in labelled.reshape(-1, labelled.shape[-1])]
        ).reshape(labelled.shape[:-1])
        enough = enough & (patients >= MIN_PATIENTS_TO_STOP)
    return RankingStatus(
        shares=shares,
        order=order,
        gaps=gaps,
        gaps_raw=gaps_raw,
        separated=separated,
        # The normal intervals lean on the weights (lambda, gamma) fitted to these same labels:
        # with a handful they are too narrow, and a tie was declared settled in 12-23% of
        # simulated 50-100-instruction studies, mostly after the first wave (an outside review).
        settled=separated.all(-1) & enough,
        level=level,
        reviewed=reviewed,
        patients=patients,
    )


def _fields5(ci: MeanCI) -> tuple[Array, ...]:
    return ci.estimate, ci.lower, ci.upper, ci.se, ci.lam


def _labelled_clusters(labelled: Array, clusters: Any) -> Array:
    """Per leading index, the reviewed patients (instructions, without clusters)."""
    if clusters is None:
        return np.asarray(labelled.sum(-1))
    _, codes = np.unique(np.asarray(clusters), return_inverse=True)
    members = np.eye(int(codes.max()) + 1 if codes.size else 0)[codes.reshape(-1)]
    return np.asarray(((labelled.astype(float) @ members) > 0).sum(-1))


def _relevel(ci: MeanCI, alpha: float) -> tuple[Array, Array, Array, Array, Array, Array | None]:
    """The interval at another level: Student's quantile where ``ci`` carries degrees of
    freedom (an infinite df is the normal)."""
    if ci.df is None:
        q: Any = float(sps.norm.ppf(1.0 - alpha / 2.0))
    else:
        q = np.where(
            np.isfinite(ci.df),
            sps.t.ppf(1.0 - alpha / 2.0, np.where(np.isfinite(ci.df), ci.df, 1.0)),
            sps.norm.ppf(1.0 - alpha / 2.0),
        )
    half = q * ci.se
    return ci.estimate, ci.estimate - half, ci.estimate + half, ci.se, ci.lam, ci.df


def doubt_scores(
    yhat_wave: Any,
    yhat: Any,
    y: Any,
    xi: Any,
    status: RankingStatus,
    *,
    floor: float = 0.1,
    evidence: float = 2.0,
) -> Array:
    """Each instruction of the next wave's share of the doubt: ``sqrt(sum_p w_p e_ip)``.

    ``yhat_wave`` (…, W, K) the predictor on the wave; ``yhat``, ``y`` (…, N, K) and ``xi``
    (…, N) what is known (labels where ``xi``). Each gap ``p`` between neighbours weighs by the
    normal density at its z-score (an unsettled gap weighs most, a settled one little);
    ``e_ip`` is the squared residual ``(d - lam d_hat)^2`` expected at the unit's predictor
    uncertainty ``u = f_a (1 - f_a) + f_b (1 - f_b)``, from a least-squares line over the
    labelled units, kept above ``floor`` x their mean residual so no score reaches 0; a
    slope less than ``evidence`` standard errors above 0 counts as flat."""
    yhat_wave = np.clip(np.asarray(yhat_wave, dtype=float), 0.0, 1.0)
    yhat = np.clip(np.asarray(yhat, dtype=float), 0.0, 1.0)
    y = np.where(np.asarray(xi, dtype=bool)[..., None], np.asarray(y, dtype=float), 0.0)
    lab = np.asarray(xi, dtype=float)[..., None]  # (…, N, 1)
    c = np.swapaxes(gap_contrasts(status.order), -1, -2)  # (…, K, P)
    raw = status.gaps_raw
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(raw.se > 0, raw.estimate / raw.se, 0.0)
    w = sps.norm.pdf(z) + 0.02
    w = w / w.sum(-1, keepdims=True)  # (…, P)
    lam = raw.lam[..., None, :]  # (…, 1, P)
    u_hist = (yhat * (1 - yhat)) @ np.abs(c)  # (…, N, P)
    r = ((y @ c - lam * (yhat @ c)) ** 2) * lab
    n_lab = np.maximum(lab.sum(-2), 1.0)  # (…, 1)
    u_mean = (u_hist * lab).sum(-2) / n_lab  # (…, P)
    r_mean = r.sum(-2) / n_lab
    du = (u_hist - u_mean[..., None, :]) * lab
    su = (du**2).sum(-2)
    sur = (du * (r - r_mean[..., None, :])).sum(-2)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(su > 0, sur / su, 0.0)
        # Only a line that the labels support steers the design: a slope less than two
        # standard errors above 0 (a predictor whose uncertainty says nothing) is taken as
        # flat, and the wave is drawn uniformly, at no cost in width.
        fit = r - r_mean[..., None, :] - slope[..., None, :] * du
        dof = np.maximum(n_lab - 2.0, 1.0)
        se_slope = np.sqrt(((fit * lab) ** 2).sum(-2) / dof / su)
        slope = np.where(slope > evidence * se_slope, slope, 0.0)
    u_wave = (yhat_wave * (1 - yhat_wave)) @ np.abs(c)  # (…, W, P)
    e = r_mean[..., None, :] + slope[..., None, :] * (u_wave - u_mean[..., None, :])
    e = np.maximum(e, floor * r_mean[..., None, :] + 1e-6)
    return np.asarray(np.sqrt((e * w[..., None, :]).sum(-1)), dtype=float)
