"""How well do clinicians agree with each other? The human ceiling and Krippendorff's alpha."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from .resampling import DEFAULT_RESAMPLES, cluster_bootstrap_ci
from .table import (
    Array,
    JudgementTable,
    _as_float,
    _check_bootstrap_args,
    _group_rows,
    _tau_b_padded,
)


def krippendorff_alpha_ordinal(reliability_data: Array) -> float:
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
    return 1.0 - float(n - 1.0) * float((o * d2).sum()) / expected


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
    xs: list[Array] = []
    ys: list[Array] = []
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
