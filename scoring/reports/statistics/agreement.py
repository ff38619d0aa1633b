"""How well do clinicians agree with each other? The human ceiling and Krippendorff's alpha."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .intervals import INTERVAL_METHOD, cluster_ci
from .resampling import (
    DEFAULT_RESAMPLES,
    MIN_CLUSTERS,
    _cluster_counts,
    interval_note,
    n_clusters_of,
)
from .table import (
    Array,
    JudgementTable,
    _as_float,
    _check_bootstrap_args,
    _group_rows,
    _take,
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


@dataclass(frozen=True, eq=False)
class ClinicianPairs:
    """Every pair of reviews of one instruction by two different clinicians, aligned on the
    responses both ranked: ``rows_a[p, k]`` and ``rows_b[p, k]`` are the table rows of the same
    response in the two reviews (``-1``: padding)."""

    rows_a: Array
    rows_b: Array
    clinician_a: Array
    clinician_b: Array
    cluster: Array
    instruction: Array


def clinician_pairs(table: JudgementTable) -> ClinicianPairs:
    """Every pair of reviews of one instruction by two different clinicians, aligned on the
    responses both judged (vectorised: rows are joined on the response they judge)."""
    # Every row takes part, ranked or not: a review with no ranked row still pairs, and its
    # pairs are undefined (skipped), as any pair with fewer than two distinct ranks is; the
    # tau of a pair counts only the responses both ranked (nan ranks are missing there).
    ranked = np.arange(len(table))
    review = np.asarray(table.review)
    clinician = np.asarray(table.clinician)
    empty = np.zeros((0, 0), dtype=np.intp)
    if ranked.size == 0:
        nothing = np.zeros(0, dtype=np.int64)
        return ClinicianPairs(empty, empty, nothing, nothing, nothing, nothing)
    # Rows judging the same response, two at a time (a response belongs to one instruction).
    _, by_response = _group_rows(np.asarray(table.response)[ranked])
    a_parts, b_parts = [], []
    for i, j in itertools.combinations(range(by_response.shape[1]), 2):
        ok = (by_response[:, i] >= 0) & (by_response[:, j] >= 0)
        a_parts.append(ranked[by_response[ok, i]])
        b_parts.append(ranked[by_response[ok, j]])
    a = np.concatenate(a_parts) if a_parts else np.zeros(0, dtype=np.intp)
    b = np.concatenate(b_parts) if b_parts else np.zeros(0, dtype=np.intp)
    keep = clinician[a] != clinician[b]
    a, b = a[keep], b[keep]
    # One orientation per pair of reviews, then the pair's rows side by side.
    swap = review[a] > review[b]
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    if a.size == 0:
        nothing = np.zeros(0, dtype=np.int64)
        return ClinicianPairs(empty, empty, nothing, nothing, nothing, nothing)
    key = review[a].astype(np.int64) * (int(review.max()) + 1) + review[b]
    _, grouped = _group_rows(key)
    rows_a = np.where(grouped >= 0, a[np.maximum(grouped, 0)], -1)
    rows_b = np.where(grouped >= 0, b[np.maximum(grouped, 0)], -1)
    first_a = rows_a[:, 0]
    return ClinicianPairs(
        rows_a=rows_a,
        rows_b=rows_b,
        clinician_a=clinician[first_a],
        clinician_b=clinician[rows_b[:, 0]],
        cluster=np.asarray(table.clusters)[first_a],
        instruction=np.asarray(table.instruction)[first_a],
    )


def human_ceiling(
    table: JudgementTable,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """How well do clinicians agree with each other? (An upper reference for metrics.)

    For every instruction reviewed by at least two clinicians and every pair of reviews of it
    by different clinicians ``(a, b)``, over the responses ``S`` both ranked::

        tau_ab = tau_b(rank_a[S], rank_b[S])

    skipping pairs with fewer than two distinct ranks on either side. ``mean_tau`` is the mean
    over pairs; the CI is the studentized cluster bootstrap (``intervals``).

    ``alpha`` is Krippendorff's ordinal alpha (:func:`krippendorff_alpha_ordinal`) with units =
    (instruction, response), coders = clinicians and values = ranks. If a clinician ranked the
    same response twice, the first rank is used.
    """
    _check_bootstrap_args(n_resamples, confidence)
    rank = _as_float(table.rank)
    ranked = ~np.isnan(rank)
    pairs = clinician_pairs(table)
    tau, _, _ = _tau_b_padded(_take(rank, pairs.rows_a), _take(rank, pairs.rows_b))
    keep = ~np.isnan(tau)
    tau = tau[keep]
    clusters = pairs.cluster[keep]
    n_clusters = n_clusters_of(clusters)
    if tau.size:
        mean = float(tau.mean())
        lo, hi = cluster_ci(
            tau, clusters, n_resamples, seed, confidence, min_clusters, bounds=(-1.0, 1.0)
        )
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
        "variant": "tau-b",
        "level": "per pair of reviews, averaged",
        "n_pairs": int(tau.size),
        "n_skipped_pairs": int((~keep).sum()),
        "n_instructions": int(np.unique(pairs.instruction[keep]).shape[0]),
        "n_clusters": n_clusters,
        "interval_note": interval_note(n_clusters, min_clusters) if tau.size else "",
        "interval_method": INTERVAL_METHOD,
        "alpha": alpha,
        "n_units": n_units,
        "confidence": confidence,
        "seed": seed,
        "n_resamples": int(n_resamples),
    }


def _mean_by(keys: Array, values: Array, ids: Array) -> Array:
    """Mean of ``values`` per key in ``ids`` (nan where a key has none)."""
    out = np.full(ids.shape[0], np.nan)
    for k, key in enumerate(ids):
        mine = values[(keys == key) & ~np.isnan(values)]
        if mine.size:
            out[k] = float(mine.mean())
    return out


def _per_side_totals(
    side_clinician: Array, side_cluster: Array, values: Array, clinicians: Array, n_clusters: int
) -> tuple[Array, Array]:
    """Per clinician and cluster, the sum and count of the defined ``values`` of the pairs
    where that clinician is the side: ``(clinicians, clusters)`` each."""
    ok = ~np.isnan(values)
    row = np.searchsorted(clinicians, side_clinician[ok])
    flat = row * n_clusters + side_cluster[ok]
    size = clinicians.shape[0] * n_clusters
    sums = np.bincount(flat, weights=values[ok], minlength=size).reshape(-1, n_clusters)
    counts = np.bincount(flat, minlength=size).reshape(-1, n_clusters).astype(float)
    return sums, counts


def leave_one_clinician_out(
    table: JudgementTable,
    scores: Mapping[str, Array],
    min_clinicians: int = 3,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """Where each metric falls among the clinicians themselves (HealthBench's meta-evaluation:
    each physician against the others).

    Over every pair of reviews of one instruction by two clinicians ``(a, b)`` (as in
    :func:`human_ceiling`), and the responses ``S`` both ranked:

    - clinician ``c``'s agreement with the others: ``A_c = mean tau_b(rank_c[S], rank_o[S])``
      over the pairs where ``c`` is one side and ``o`` the other;
    - a metric put in ``c``'s place: ``M_c = mean tau_b(score[S], -rank_o[S])`` over the same
      pairs (the responses ``c`` ranked, scored instead by the metric).

    Per metric: ``M = mean_c M_c``, its place in the distribution of ``A_c`` (the share of
    clinicians whose agreement with the others is at most ``M``: ``n_at_most`` of
    ``n_clinicians``), and, clinician by clinician, how often the metric agrees with the others
    at least as well as that clinician does (``M_c >= A_c``, a paired comparison on the same
    reviews: ``n_beaten``). Fewer than ``min_clinicians`` clinicians with a partner: no
    distribution (a percentile among two people says nothing).

    With a handful of clinicians those shares take few values (0, 1/3, 2/3, 1 with three) and
    "beats every clinician" may be one patient's luck, so each comes with a percentile
    interval from a bootstrap over the clusters (every ``A_c`` and ``M_c`` recomputed from the
    resampled patients' pairs; ``percentile_ci``, ``share_beating_ci``); none below
    ``min_clusters`` clusters, with the reason (``interval_note``).
    """
    rank = _as_float(table.rank)
    pairs = clinician_pairs(table)
    x = _take(rank, pairs.rows_a)
    y = _take(rank, pairs.rows_b)
    human, _, _ = _tau_b_padded(x, y)
    # Each pair counts for both clinicians: c = a against o = b, and c = b against o = a.
    side_clinician = np.r_[pairs.clinician_a, pairs.clinician_b]
    clinicians = np.unique(side_clinician) if side_clinician.size else side_clinician
    agreement = _mean_by(side_clinician, np.r_[human, human], clinicians)
    defined = ~np.isnan(agreement)
    cluster_ids, cluster_code = np.unique(np.r_[pairs.cluster, pairs.cluster], return_inverse=True)
    side_cluster = cluster_code.reshape(-1)
    used = side_cluster[np.r_[~np.isnan(human), ~np.isnan(human)]]
    n_clusters = int(np.unique(used).shape[0])
    enough = int(defined.sum()) >= min_clinicians
    boot = enough and n_clusters >= min_clusters
    note = "" if not enough else interval_note(n_clusters, min_clusters)
    out: dict[str, Any] = {
        "n_clinicians": int(defined.sum()),
        "n_pairs": int(np.count_nonzero(~np.isnan(human))),
        "n_clusters": n_clusters,
        "min_clinicians": int(min_clinicians),
        "clinicians": [
            {"clinician": clinicians[k].item(), "agreement": float(agreement[k])}
            for k in np.flatnonzero(defined)
        ],
        "median_clinician": float(np.median(agreement[defined])) if defined.any() else math.nan,
        "metrics": {},
        "variant": "tau-b",
        "level": "per pair of reviews, averaged per clinician",
        "interval_method": "percentile bootstrap over clusters",
        "interval_note": note,
        "confidence": confidence,
        "seed": int(seed),
        "n_resamples": int(n_resamples),
    }
    g = int(cluster_ids.shape[0])
    draws = _cluster_counts(g, int(n_resamples), int(seed)) if boot and g else None
    boot_agreement = None
    if draws is not None:
        s_h, c_h = _per_side_totals(
            side_clinician, side_cluster, np.r_[human, human], clinicians, g
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            boot_agreement = (s_h @ draws.T) / (c_h @ draws.T)  # (clinicians, B)
    alpha = 1.0 - confidence
    for name, values in scores.items():
        v = np.asarray(values, dtype=float)
        s_a, s_b = _take(v, pairs.rows_a), _take(v, pairs.rows_b)
        # The metric in a's place (against b's ranks), and in b's place (against a's ranks).
        m_vs_b, _, _ = _tau_b_padded(s_a, -y)
        m_vs_a, _, _ = _tau_b_padded(s_b, -x)
        per_clinician = _mean_by(side_clinician, np.r_[m_vs_b, m_vs_a], clinicians)
        ok = defined & ~np.isnan(per_clinician)
        mean = float(per_clinician[ok].mean()) if ok.any() else math.nan
        row: dict[str, Any] = {"mean_tau": mean, "n_clinicians": int(ok.sum())}
        nan_ci = [math.nan, math.nan]
        if enough and ok.any():
            at_most = int(np.count_nonzero(agreement[defined] <= mean))
            beaten = int(np.count_nonzero(per_clinician[ok] >= agreement[ok]))
            row.update(
                percentile=at_most / int(defined.sum()),
                n_at_most=at_most,
                at_least_median=bool(mean >= float(np.median(agreement[defined]))),
                share_beating=beaten / int(ok.sum()),
                n_beaten=beaten,
                percentile_ci=nan_ci,
                share_beating_ci=nan_ci,
            )
            m_defined = np.r_[~np.isnan(m_vs_b), ~np.isnan(m_vs_a)]
            m_clusters = int(np.unique(side_cluster[m_defined]).shape[0])
            row["n_clusters"] = m_clusters
            row["interval_note"] = interval_note(m_clusters, min_clusters)
            if draws is not None and boot_agreement is not None and m_clusters >= min_clusters:
                s_m, c_m = _per_side_totals(
                    side_clinician, side_cluster, np.r_[m_vs_b, m_vs_a], clinicians, g
                )
                with np.errstate(invalid="ignore", divide="ignore"):
                    boot_metric = (s_m @ draws.T) / (c_m @ draws.T)  # (clinicians, B)
                both = ~np.isnan(boot_metric) & ~np.isnan(boot_agreement)
                with np.errstate(invalid="ignore", divide="ignore"):
                    m_b = np.where(both, boot_metric, 0.0).sum(0) / both.sum(0)
                    known = ~np.isnan(boot_agreement)
                    pct = (known & (boot_agreement <= m_b)).sum(0) / known.sum(0)
                    beat = (both & (boot_metric >= boot_agreement)).sum(0) / both.sum(0)
                pct, beat = pct[np.isfinite(pct)], beat[np.isfinite(beat)]
                if pct.size and beat.size:
                    row["percentile_ci"] = [
                        float(q) for q in np.quantile(pct, [alpha / 2, 1 - alpha / 2])
                    ]
                    row["share_beating_ci"] = [
                        float(q) for q in np.quantile(beat, [alpha / 2, 1 - alpha / 2])
                    ]
        else:
            row.update(
                percentile=math.nan, n_at_most=None, at_least_median=None,
                share_beating=math.nan, n_beaten=None, percentile_ci=nan_ci,
                share_beating_ci=nan_ci,
            )  # fmt: skip
        out["metrics"][name] = row
    return out


def source_agreement(
    app: JudgementTable,
    release: JudgementTable,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """How the clinicians who reviewed in the app agree with the release's own judgements of
    the same responses: per app review and the release's review of the same instruction, tau-b
    of their ranks over the responses both ranked (as :func:`human_ceiling` pairs clinicians),
    and the share of responses both judged correct or both incorrect, with Cohen's kappa.
    Clusters are the app table's."""
    release_rank = {int(r): float(v) for r, v in zip(release.response, release.rank, strict=True)}
    release_correct = {
        int(r): float(v) for r, v in zip(release.response, release.correct, strict=True)
    }
    rank_b = np.array([release_rank.get(int(r), np.nan) for r in app.response])
    correct_b = np.array([release_correct.get(int(r), np.nan) for r in app.response])
    review_ids, rows = _group_rows(np.asarray(app.review))
    rank_a = _as_float(app.rank)
    x, y = _take(rank_a, rows), _take(rank_b, rows)
    tau, _, _ = _tau_b_padded(x, y)
    keep = ~np.isnan(tau)
    clusters = np.asarray(app.clusters)[rows[:, 0]][keep] if rows.size else np.zeros(0)
    n_clusters = n_clusters_of(clusters)
    lo, hi = cluster_ci(
        tau[keep], clusters, n_resamples, seed, confidence, min_clusters, bounds=(-1.0, 1.0)
    )
    correct_a = _as_float(app.correct)
    both = ~np.isnan(correct_a) & ~np.isnan(correct_b)
    agree = float(np.mean(correct_a[both] == correct_b[both])) if both.any() else math.nan
    kappa = math.nan
    if both.any():
        pa, pb = correct_a[both].mean(), correct_b[both].mean()
        expected = pa * pb + (1 - pa) * (1 - pb)
        kappa = (agree - expected) / (1 - expected) if expected < 1 else math.nan
    return {
        "mean_tau": float(tau[keep].mean()) if keep.any() else math.nan,
        "ci_low": lo,
        "ci_high": hi,
        "n_reviews": int(keep.sum()),
        "n_skipped": int((~keep).sum()),
        "n_clusters": n_clusters,
        "interval_note": interval_note(n_clusters, min_clusters) if keep.any() else "",
        "correct_agreement": agree,
        "correct_kappa": float(kappa),
        "n_correct_pairs": int(both.sum()),
        "variant": "tau-b, per app review against the release's review, averaged",
    }
