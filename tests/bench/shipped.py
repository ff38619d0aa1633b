"""The report's estimators of a mean over instructions, as the simulated studies call them.

Each is the function the report calls, vectorised over replicates and columns: clinicians only
is the leaderboard's share (a mean over judgements) with the studentized cluster bootstrap
(``intervals.studentized_totals``); prediction-powered is ``ppi.ppi_means_clustered`` (the
batched ``ppi_mean_clustered``: lambda cross-fitted, Student's t). Each instruction is its own
cluster here (the bench's instructions are about their own patients).
"""

from __future__ import annotations

import numpy as np

from scoring.reports.statistics.active import Array, MeanCI
from scoring.reports.statistics.intervals import studentized_totals
from scoring.reports.statistics.ppi import ppi_means_clustered
from scoring.reports.statistics.resampling import _cluster_counts

BOOTSTRAP = 1999  # the studentized bootstrap's resamples (the coverage bench's)
CHUNK = 100  # replicates at a time: the resamples' statistics are (replicates, columns, B)


def clinicians_only(
    sums: Array, counts: Array, bounds: tuple[float, float], interval: bool
) -> MeanCI:
    """The report's clinicians-only mean over judgements: ``sums`` (R, P, n) per instruction
    (its clusters), ``counts`` (n,) judgements each. With ``interval``, the studentized
    cluster bootstrap (in chunks of replicates, one set of resamples); without, its CR1
    standard error alone (what the width curves need) and no bounds."""
    n_counts = np.broadcast_to(counts, sums.shape)
    if not interval:
        total = n_counts.sum(-1)
        m = sums.sum(-1) / total
        e = sums - m[..., None] * n_counts
        g = sums.shape[-1]
        se = np.sqrt(g / (g - 1) * (e**2).sum(-1)) / total
        nan = np.full(m.shape, np.nan)
        return MeanCI(m, nan, nan, se, np.zeros(m.shape))
    draws = _cluster_counts(sums.shape[-1], BOOTSTRAP, 0)
    parts = [
        studentized_totals(sums[i : i + CHUNK], n_counts[i : i + CHUNK], draws, bounds=bounds)
        for i in range(0, sums.shape[0], CHUNK)
    ]

    def cat(name: str) -> Array:
        return np.concatenate([getattr(p, name) for p in parts])

    est = cat("estimate")
    return MeanCI(est, cat("low"), cat("high"), cat("se"), np.zeros(est.shape))


def prediction_powered(y: Array, f: Array, n: int, *, cross_fitted: bool) -> MeanCI:
    """``ppi_means_clustered`` with the first ``n`` instructions (last axis) reviewed, each
    instruction its own cluster."""
    big_n = y.shape[-1]
    res = ppi_means_clustered(
        y[..., :n],
        f[..., :n],
        np.arange(n),
        f[..., n:],
        np.arange(n, big_n),
        cross_fitted=cross_fitted,
    )
    return MeanCI(res.estimate, res.ci_low, res.ci_high, res.se, res.lam)


def se_width(ci: MeanCI, z: float) -> float:
    """The width a normal interval of the estimator's variance would have, averaged over
    the contrasts: ``2 z sqrt(mean over replicates of se^2)``, as the floor's widths are."""
    return float((2.0 * z * np.sqrt(np.nanmean(ci.se**2, axis=0))).mean())
