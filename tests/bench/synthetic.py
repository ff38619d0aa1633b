"""Synthetic judgements for benchmarks and property tests."""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

from scoring.reports.statistics.table import Array, JudgementTable


def bench_inputs(
    n_instructions: int = 303,
    n_responses: int = 6,
    n_clinicians: int = 3,
    n_metrics: int = 6,
    seed: int = 0,
) -> tuple[JudgementTable, dict[str, Array]]:
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
