"""An adaptive study walked wave by wave, simulated and vectorised over replicates (the
bench's and the tests' generator of adaptive designs; the app draws real waves in
``review.services.adaptive``)."""

from dataclasses import dataclass
from typing import Any

import numpy as np

from scoring.reports.statistics.active import Array
from scoring.reports.statistics.adaptive_design import (
    Bools,
    Ints,
    RankingStatus,
    doubt_scores,
    inclusion_probabilities,
    ranking_status,
)


@dataclass(frozen=True)
class AdaptiveRun:
    """A whole adaptive study, simulated (vectorised over replicates)."""

    xi: Bools  # (…, N) reviewed
    pi: Array  # (…, N) the probability each instruction had
    status: RankingStatus | None  # after the last look (with ``stop``), else None
    stopped_after: Ints  # (…,) the wave after which the ranking was settled, or -1
    walked: Bools  # (…, N) instructions walked before the stop (all if it never stopped)


def simulate_adaptive(
    yhat: Any,
    y: Any,
    waves: list[slice],
    *,
    budget_fraction: float,
    pi_min: float,
    rng: np.random.Generator,
    alpha: float = 0.05,
    stop: bool = False,
) -> AdaptiveRun:
    """Walk ``waves`` of instructions (…, N, K): the first wave uniform at
    ``budget_fraction``, every later one by ``doubt_scores``; with ``stop``, a replicate
    whose ranking is settled after a wave draws nothing more."""
    yhat = np.asarray(yhat, dtype=float)
    y = np.asarray(y, dtype=float)
    shape = yhat.shape[:-1]
    lead = shape[:-1]
    xi = np.zeros(shape, dtype=bool)
    pi = np.ones(shape)
    walked = np.zeros(shape, dtype=bool)
    active = np.ones(lead, dtype=bool)
    stopped_after = np.full(lead, -1, dtype=np.intp)
    looks = len(waves)
    status: RankingStatus | None = None
    for t, wave in enumerate(waves):
        width = len(range(*wave.indices(shape[-1])))
        budget = budget_fraction * width
        if status is None:
            p = np.full((*lead, width), budget_fraction)
        else:
            score = doubt_scores(yhat[..., wave, :], yhat, y, xi, status)
            p = inclusion_probabilities(score, budget, max(pi_min, 1e-9))
        draw = rng.random(p.shape) < p
        pi[..., wave] = p
        xi[..., wave] = draw & active[..., None]
        walked[..., wave] = active[..., None]
        if not stop and t == looks - 1:
            break  # the caller estimates what it needs; no more waves to steer
        status = ranking_status(yhat, y, xi, pi, mask=walked, alpha=alpha, looks=looks)
        if stop:
            newly = active & status.settled
            stopped_after = np.where(newly, t, stopped_after)
            active = active & ~status.settled
    return AdaptiveRun(
        xi=xi, pi=pi, status=status if stop else None, stopped_after=stopped_after, walked=walked
    )
