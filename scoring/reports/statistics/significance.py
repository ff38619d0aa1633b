"""Is a difference real? Paired tests between metrics, significance clusters, position bias,
context length.

Every test here respects the design: two metrics are compared on the responses both scored;
resampling and permutation act on whole clusters or on the scores of one response, never on
judgements as if they were independent; and no resampling p-value is reported below the
resolution its resamples allow (``p_value_floor``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import stats as sps

from .correlation import per_review_tau
from .intervals import INTERVAL_METHOD, cluster_ci, cluster_mean, cluster_means
from .resampling import (
    DEFAULT_RESAMPLES,
    MIN_CLUSTERS,
    interval_note,
    n_clusters_of,
)
from .table import Array, JudgementTable, Scores, _as_float, _check_bootstrap_args, _check_scores

DEFAULT_PERMUTATIONS = 1000
SIGNIFICANCE_LEVEL = 0.05


def _common(a: Array, b: Array) -> tuple[Array, Array, Array]:
    """Both metrics' scores where both are present, nan elsewhere, and the mask."""
    both = ~np.isnan(a) & ~np.isnan(b)
    return np.where(both, a, np.nan), np.where(both, b, np.nan), both


def paired_bootstrap_test(
    table: JudgementTable,
    scores_a: Scores,
    scores_b: Scores,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """Is metric A better correlated with the clinicians than metric B?

    Both metrics are compared **on the responses both scored**: a response only one of them
    scored is left out of both (comparing taus over different responses confounds the metric
    with the responses it happened to score). Over the reviews ``R_ab`` where both per-review
    taus are then defined::

        d_r = tau_r(A) - tau_r(B),    difference = mean_r d_r

    with the studentized cluster-bootstrap interval and its two-sided p-value (``intervals``;
    both metrics share every resample, so the test is paired). ``n_responses_excluded``
    counts the responses dropped because one metric had no score.
    """
    return paired_bootstrap_tests(
        table,
        {"a": scores_a, "b": scores_b},
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        min_clusters=min_clusters,
    )[0]


def paired_bootstrap_tests(
    table: JudgementTable,
    scores: Mapping[str, Scores],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> list[dict[str, Any]]:
    """:func:`paired_bootstrap_test` for every two metrics of ``scores`` (in the order of
    ``itertools.combinations``), the pairs whose reviews cover the same clusters bootstrapped in
    one pass over the draws. Each row names its metrics (``metric_a``, ``metric_b``)."""
    _check_bootstrap_args(n_resamples, confidence)
    names = list(scores)
    arrays = {n: _check_scores(table, scores[n]) for n in names}
    responses = np.asarray(table.response)
    rows: list[dict[str, Any]] = []
    diffs: list[tuple[Array, Array, Array]] = []  # per pair: reviews, differences, clusters
    for x, y in itertools.combinations(names, 2):
        a, b, both = _common(arrays[x], arrays[y])
        either = ~np.isnan(arrays[x]) | ~np.isnan(arrays[y])
        ta, tb = per_review_tau(table, a), per_review_tau(table, b)
        common, ia, ib = np.intersect1d(
            ta.review, tb.review, assume_unique=True, return_indices=True
        )
        clusters = ta.cluster[ia]
        n_clusters = n_clusters_of(clusters)
        rows.append(
            {
                "metric_a": x,
                "metric_b": y,
                "mean_tau_a": float(ta.tau[ia].mean()) if common.size else math.nan,
                "mean_tau_b": float(tb.tau[ib].mean()) if common.size else math.nan,
                "difference": float((ta.tau[ia] - tb.tau[ib]).mean()) if common.size else math.nan,
                "ci_low": math.nan,
                "ci_high": math.nan,
                "p_value": math.nan,
                "p_at_floor": False,
                "test": f"paired {INTERVAL_METHOD} of per-review tau-b differences",
                "n_reviews": int(common.size),
                "n_instructions": int(np.unique(ta.instruction[ia]).shape[0]),
                "n_clusters": n_clusters,
                "n_responses_excluded": int(np.unique(responses[either & ~both]).shape[0]),
                "interval_note": interval_note(n_clusters, min_clusters) if common.size else "",
                "confidence": confidence,
                "seed": seed,
                "n_resamples": int(n_resamples),
            }
        )
        diffs.append((common, ta.tau[ia] - tb.tau[ib], clusters))
    by_clusters: dict[bytes, list[int]] = {}
    for k, (common, _, clusters) in enumerate(diffs):
        if common.size and n_clusters_of(clusters) >= min_clusters:
            by_clusters.setdefault(np.unique(clusters).tobytes(), []).append(k)
    for group in by_clusters.values():
        reviews = np.unique(np.concatenate([diffs[k][0] for k in group]))
        values = np.full((reviews.shape[0], len(group)), np.nan)
        cluster = np.zeros(reviews.shape[0], dtype=diffs[group[0]][2].dtype)
        for j, k in enumerate(group):
            at = np.searchsorted(reviews, diffs[k][0])
            values[at, j] = diffs[k][1]
            cluster[at] = diffs[k][2]
        res = cluster_means(
            values, cluster, n_resamples, seed, confidence, min_clusters, bounds=(-2.0, 2.0)
        )
        for j, k in enumerate(group):
            r = res[j]
            rows[k].update(
                ci_low=r.ci_low, ci_high=r.ci_high, p_value=r.p_value, p_at_floor=r.p_at_floor
            )
    return rows


# --- PERM-BOTH and significance clusters ---------------------------------------------------------


class _Blocks:
    """The judgements regrouped per instruction for the permutation test: each instruction's
    responses (``resp``: indices into one-score-per-response arrays) and its reviews' ranks of
    them, instructions with the same number of responses stacked into one block.

    With ``n`` responses an instruction's scores can come out of a permutation in ``2 ** n``
    ways (each response keeps its own score or takes the other metric's); every way's
    contribution to the mean per-review tau is worked out once per metric pair, and a
    permutation is then a lookup per instruction rather than a pass over every review pair."""

    MAX_RESPONSES = 12  # 4,096 patterns per instruction

    def __init__(self, table: JudgementTable) -> None:
        rank = _as_float(table.rank)
        responses, response_of_row = np.unique(np.asarray(table.response), return_inverse=True)
        self.response_of_row = response_of_row.reshape(-1)
        self.n_responses = responses.shape[0]
        instruction = np.asarray(table.instruction)
        review = np.asarray(table.review)
        by_size: dict[int, list[tuple[Array, Array]]] = {}
        for inst in np.unique(instruction):
            rows = np.flatnonzero(instruction == inst)
            resp = np.unique(self.response_of_row[rows])
            reviews = np.unique(review[rows])
            ranks = np.full((reviews.shape[0], resp.shape[0]), np.nan)
            ri = np.searchsorted(reviews, review[rows])
            ci = np.searchsorted(resp, self.response_of_row[rows])
            ranks[ri, ci] = rank[rows]
            by_size.setdefault(resp.shape[0], []).append((resp, ranks))
        if by_size and max(by_size) > self.MAX_RESPONSES:
            raise ValueError(
                f"an instruction has {max(by_size)} responses: the permutation test handles up "
                f"to {self.MAX_RESPONSES}"
            )
        self.blocks: list[tuple[Array, Array]] = []
        for n, items in sorted(by_size.items()):
            r_max = max(r.shape[0] for _, r in items)
            resp = np.stack([r for r, _ in items])
            ranks = np.full((len(items), r_max, n), np.nan)
            for g, (_, r) in enumerate(items):
                ranks[g, : r.shape[0]] = r
            self.blocks.append((resp, ranks))

    def per_response(self, scores: Array) -> Array:
        """A row-aligned score array as one score per response (rows of a response share it)."""
        out = np.full(self.n_responses, np.nan)
        out[self.response_of_row] = scores
        return out

    def contributions(self, a: Array, b: Array) -> list[tuple[Array, Array, Array]]:
        """Per block: (responses, sum of defined per-review taus, number defined), the last two
        for every pattern of which responses keep ``a``'s score (bit 1) or take ``b``'s."""
        out = []
        for resp, ranks in self.blocks:
            n = resp.shape[1]
            i, j = np.triu_indices(n, k=1)
            patterns = ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
            va, vb = a[resp], b[resp]  # (G, n)
            present = ~np.isnan(va) & ~np.isnan(vb)
            values = np.where(patterns[None, :, :], va[:, None, :], vb[:, None, :])
            with np.errstate(invalid="ignore"):
                msign = np.sign(values[:, :, i] - values[:, :, j])  # (G, 2^n, pairs)
            pair_ok = present[:, i] & present[:, j]  # (G, pairs)
            msign = np.where(pair_ok[:, None, :], msign, 0.0)
            ranked = ~np.isnan(ranks[:, :, i]) & ~np.isnan(ranks[:, :, j]) & pair_ok[:, None, :]
            with np.errstate(invalid="ignore"):
                rsign = np.where(ranked, np.sign(ranks[:, :, j] - ranks[:, :, i]), 0.0)
            num = np.matmul(msign, rsign.transpose(0, 2, 1))  # (G, 2^n, R)
            untied_metric = np.matmul(np.abs(msign), ranked.astype(float).transpose(0, 2, 1))
            untied_rank = np.abs(rsign).sum(axis=2)[:, None, :]  # (G, 1, R)
            defined = (untied_metric > 0) & (untied_rank > 0)
            with np.errstate(invalid="ignore", divide="ignore"):
                tau = np.where(defined, num / np.sqrt(untied_rank * untied_metric), 0.0)
            out.append((resp, tau.sum(axis=2), defined.sum(axis=2).astype(float)))
        return out


def _pattern_index(blocks: _Blocks, bits: Array) -> list[Array]:
    """Per block, each permutation's pattern of each instruction (``(k, G)``): which of its
    responses keep metric ``a``'s score. The same for every metric pair."""
    out = []
    for resp, _ in blocks.blocks:
        weights = (1 << np.arange(resp.shape[1])).astype(np.int64)
        out.append(bits[:, resp].astype(np.int64) @ weights)
    return out


def _mean_tau_for(
    parts: list[tuple[Array, Array, Array]], index: list[Array], complement: bool
) -> Array:
    """The mean per-review tau of each permutation; ``complement`` reads the other metric's
    side (every response's choice flipped)."""
    total: Array = np.zeros(index[0].shape[0]) if index else np.zeros(0)
    count: Array = np.zeros_like(total)
    for (resp, sums, defined), idx in zip(parts, index, strict=True):
        flat = (2 ** resp.shape[1] - 1) - idx if complement else idx
        g = np.arange(resp.shape[0])[None, :]
        total += sums[g, flat].sum(axis=1)
        count += defined[g, flat].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean: Array = np.where(count > 0, total / np.maximum(count, 1.0), np.nan)
    return mean


PERMUTATION_UNITS = ("auto", "response", "cluster")


def perm_both_tests(
    table: JudgementTable,
    scores: Mapping[str, Scores],
    n_permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
    alpha: float = SIGNIFICANCE_LEVEL,
    min_clusters: int = MIN_CLUSTERS,
    unit: str = "auto",
) -> dict[str, Any]:
    """PERM-BOTH permutation tests between every two metrics, and significance clusters.

    The test of Deutsch, Dror & Roth (2021), as WMT's metrics task runs it
    (mt-metrics-eval's ``PermutationSigDiff``): the two metrics' scores are z-scored over the
    common responses, then in each of ``n_permutations`` permutations the two metrics' scores
    are swapped with probability 1/2, and the statistic is the difference of mean per-review
    tau-b. The unit swapped (``unit``): each **response** (mt-metrics-eval's: a score belongs
    to a (system, instruction) cell), or each **cluster**, every response of one patient
    swapped together, so that a patient's instructions, which are not independent, count as
    one draw; ``"auto"`` (the default) swaps clusters when a cluster holds more than one
    instruction (the report's patients), responses otherwise. For metric ``i`` against ``j``::

        p(i > j) = (1 + #{permutations: tau(i*) - tau(j*) >= tau(i) - tau(j)}) / (P + 1)

    (one-sided, the null: ``i`` is not better than ``j``, never below ``1 / (P + 1)``);
    ``p_value`` is that of the better one (``better``), ``p_two_sided = min(1, 2 p_value)``.
    Permutation draws are shared across pairs (each pair is still an exact permutation test).

    **The common responses.** Every statistic here is computed on the responses every placed
    metric scored (a metric is placed when its own responses span ``min_clusters``
    clusters), so that the order of the clusters and the tests agree: a metric that could not
    score the hard responses would otherwise rank first on its own responses and lose to
    another on the common ones. ``n_common_responses`` says how many those are.

    Significance clusters (mt-metrics-eval's ``AssignRanks``): metrics sorted by their mean
    tau on the common responses; a metric starts a new cluster when some metric of the current
    cluster beats it at the **two-sided** level ``alpha`` (``p_two_sided <= alpha``, i.e. the
    one-sided ``p`` of the direction the data show at ``alpha / 2``: at the one-sided level
    two equal metrics were declared different about 9% of the time). Metrics of one cluster are
    not distinguishable from each other on these data. No correction for multiple
    comparisons is applied (as in WMT).

    No certainty from too little: a pair whose common responses span fewer than
    ``min_clusters`` clusters gets no p-value, and an unplaced metric has ``cluster`` None.
    """
    if unit not in PERMUTATION_UNITS:
        raise ValueError(f"permute by {' or '.join(PERMUTATION_UNITS)}")
    names = list(scores)
    row_clusters = np.asarray(table.clusters)
    row_scores = {n: _check_scores(table, scores[n]) for n in names}
    enough = {
        n: n_clusters_of(row_clusters[~np.isnan(row_scores[n])]) >= min_clusters for n in names
    }
    placed_names = [n for n in names if enough[n]]
    common_rows = np.ones(len(table), dtype=bool)
    for n in placed_names:
        common_rows &= ~np.isnan(row_scores[n])
    n_common_clusters = n_clusters_of(row_clusters[common_rows]) if placed_names else 0
    blocks = _Blocks(table)
    if unit == "auto":
        instruction = np.asarray(table.instruction)
        pairs = np.unique(np.stack([row_clusters, instruction], axis=1), axis=0)
        shares = bool((np.unique(pairs[:, 0], return_counts=True)[1] > 1).any())
        unit = "cluster" if shares else "response"
    rng = np.random.default_rng(seed)
    if unit == "cluster":
        cluster_of_response = np.zeros(blocks.n_responses, dtype=np.int64)
        cluster_of_response[blocks.response_of_row] = row_clusters
        n_units = int(cluster_of_response.max(initial=-1)) + 1
        draws = rng.integers(0, 2, size=(int(n_permutations), n_units), dtype=np.int8)
        bits = draws[:, cluster_of_response]
    else:
        bits = rng.integers(0, 2, size=(int(n_permutations), blocks.n_responses), dtype=np.int8)
    index = _pattern_index(blocks, bits)
    kept = _pattern_index(blocks, np.ones((1, blocks.n_responses), dtype=np.int8))
    common_scores = {n: np.where(common_rows, row_scores[n], np.nan) for n in names}
    per_response = {n: blocks.per_response(common_scores[n]) for n in placed_names}
    observed: dict[str, float] = {}
    common: dict[str, float] = {}
    for n in names:
        taus = per_review_tau(table, row_scores[n])
        observed[n] = float(taus.tau.mean()) if len(taus) else math.nan
        if n in per_response:
            taus = per_review_tau(table, common_scores[n])
            common[n] = float(taus.tau.mean()) if len(taus) else math.nan
    tests: list[dict[str, Any]] = []
    directional: dict[tuple[str, str], float] = {}
    for x, y in itertools.combinations(names, 2):
        pair_clusters = n_clusters_of(
            row_clusters[~np.isnan(row_scores[x]) & ~np.isnan(row_scores[y])]
        )
        tested = x in per_response and y in per_response and n_common_clusters >= min_clusters
        if not tested:
            one_only = np.isnan(row_scores[x]) != np.isnan(row_scores[y])
            left_out = int(np.unique(np.asarray(table.response)[one_only]).shape[0])
            tests.append(
                {"metric_a": x, "metric_b": y, "p_value": math.nan, "p_two_sided": math.nan,
                 "p_at_floor": False, "n_responses": 0, "n_clusters": pair_clusters,
                 "n_responses_excluded": left_out,
                 "note": interval_note(min(pair_clusters, n_common_clusters), min_clusters)}
            )  # fmt: skip
            continue
        a, b = per_response[x], per_response[y]
        both = ~np.isnan(a) & ~np.isnan(b)
        za, zb = np.full_like(a, np.nan), np.full_like(b, np.nan)
        za[both], zb[both] = sps.zscore(a[both]), sps.zscore(b[both])
        parts = blocks.contributions(za, zb)
        observed_x = float(_mean_tau_for(parts, kept, complement=False)[0])
        observed_y = float(_mean_tau_for(parts, kept, complement=True)[0])
        resampled = _mean_tau_for(parts, index, complement=False) - _mean_tau_for(
            parts, index, complement=True
        )
        delta = observed_x - observed_y
        p_x = (1 + int(np.count_nonzero(resampled >= delta - 1e-12))) / (int(n_permutations) + 1)
        p_y = (1 + int(np.count_nonzero(-resampled >= -delta - 1e-12))) / (int(n_permutations) + 1)
        directional[(x, y)], directional[(y, x)] = p_x, p_y
        better = None if abs(delta) < 1e-12 else (x if delta > 0 else y)
        p = min(p_x, p_y) if better is None else (p_x if better == x else p_y)
        either = ~np.isnan(row_scores[x]) | ~np.isnan(row_scores[y])
        responses = np.asarray(table.response)
        tests.append(
            {
                "metric_a": x,
                "metric_b": y,
                "better": better,
                "tau_a_common": observed_x,
                "tau_b_common": observed_y,
                "difference": delta,
                "p_value": p,
                "p_two_sided": min(1.0, 2.0 * p),
                "p_at_floor": p <= 1.0 / (int(n_permutations) + 1) + 1e-15,
                "n_responses": int(both.sum()),
                "n_clusters": n_common_clusters,
                "n_responses_excluded": int(np.unique(responses[either & ~common_rows]).shape[0]),
            }
        )
    ranked = sorted(
        (n for n in placed_names if n_common_clusters >= min_clusters),
        key=lambda n: (-(common[n] if math.isfinite(common[n]) else -9.0), n),
    )

    def beats(i: str, j: str) -> float:
        """Two-sided p-value that ``i`` (ranked above) beats ``j``; 1 when untested."""
        p = directional.get((i, j))
        return 1.0 if p is None or math.isnan(p) else min(1.0, 2.0 * p)

    clusters: dict[str, int | None] = dict(_assign_ranks(ranked, beats, alpha))
    unplaced = [n for n in names if n not in clusters]
    clusters.update({n: None for n in unplaced})
    ranked += sorted(unplaced)
    return {
        "test": (
            "PERM-BOTH (Deutsch, Dror & Roth 2021), per-review tau-b on the common responses, "
            f"two-sided at level {alpha:g}, permuting {unit}s"
        ),
        "n_permutations": int(n_permutations),
        "seed": int(seed),
        "alpha": alpha,
        "permutation_unit": unit,
        "n_common_responses": int(np.unique(np.asarray(table.response)[common_rows]).shape[0])
        if placed_names
        else 0,
        "n_common_clusters": n_common_clusters,
        "correlations": observed,
        "correlations_common": common,
        "pairs": tests,
        "clusters": [
            {
                "metric": n,
                "cluster": clusters[n],
                "placed": clusters[n] is not None,
                "tau": common.get(n, math.nan) if clusters[n] is not None else observed[n],
                "tau_own": observed[n],
            }
            for n in ranked
        ],
    }


def _assign_ranks(ranked: list[str], p: Any, alpha: float) -> dict[str, int]:
    """Significance clusters from metrics sorted best first (mt-metrics-eval's AssignRanks)."""
    out: dict[str, int] = {}
    current, start = 1, 0
    for i, name in enumerate(ranked):
        if any(p(ranked[k], name) <= alpha for k in range(start, i)):
            current += 1
            start = i
        out[name] = current
    return out


# --- position bias -------------------------------------------------------------------------------


def position_bias(
    table: JudgementTable,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """Do clinicians favour responses shown early?

    ``mean_rank[p]`` = mean rank of the responses shown at 0-based position ``p`` (with
    ``count[p]``). The test statistic is per review, like every other statistic here::

        tau_r = tau_b(position_i, rank_i)      over the responses of review r

    (reviews with fewer than two distinct ranks are skipped), ``tau = mean_r tau_r``, with the
    studentized cluster-bootstrap interval and its two-sided p-value. Judgements of one review are
    not independent, so pooling them (as a single scipy test over all rows would) overstates
    the evidence. Positive tau: later positions get worse (larger) ranks.
    """
    _check_bootstrap_args(n_resamples, confidence)
    rank = _as_float(table.rank)
    position = _as_float(table.position)
    position[position < 0] = np.nan  # not shown in a known order (the release's judgements)
    ok = ~np.isnan(rank) & ~np.isnan(position)
    positions, inverse = np.unique(position[ok], return_inverse=True)
    inverse = inverse.ravel()
    counts = np.bincount(inverse, minlength=positions.shape[0])
    sums = np.bincount(inverse, weights=rank[ok], minlength=positions.shape[0])
    # tau_b(-rank, -position) == tau_b(position, rank): per_review_tau negates the ranks.
    taus = per_review_tau(table, -position)
    n_clusters = n_clusters_of(taus.cluster)
    out: dict[str, Any] = {
        "positions": [int(v) for v in positions],
        "mean_rank": [float(v) for v in sums / np.maximum(counts, 1)],
        "count": [int(v) for v in counts],
        "tau": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "p_value": math.nan,
        "p_at_floor": False,
        "n": int(ok.sum()),
        "n_reviews": len(taus),
        "n_skipped": taus.skipped,
        "n_instructions": int(np.unique(taus.instruction).shape[0]),
        "n_clusters": n_clusters,
        "interval_note": interval_note(n_clusters, min_clusters) if len(taus) else "",
        "method": f"per-review tau-b, {INTERVAL_METHOD}",
        "confidence": confidence,
        "seed": seed,
        "n_resamples": int(n_resamples),
    }
    if len(taus):
        r = cluster_mean(
            taus.tau, taus.cluster, n_resamples, seed, confidence, min_clusters, bounds=(-1.0, 1.0)
        )
        out.update(
            tau=r.estimate, ci_low=r.ci_low, ci_high=r.ci_high, p_value=r.p_value,
            p_at_floor=r.p_at_floor,
        )  # fmt: skip
    return out


# --- context length ------------------------------------------------------------------------------


def mcnemar_exact(b: int, c: int) -> float:
    """Exact (binomial) two-sided McNemar p-value from the two discordant counts.

    ``b`` = pairs where only the first condition was correct, ``c`` = only the second. Under
    the null each discordant pair goes either way with probability 1/2::

        p = min(1, 2 * P(X <= min(b, c))),   X ~ Binomial(b + c, 1/2)

    (the same as ``statsmodels.stats.contingency_tables.mcnemar(exact=True)``); no discordant
    pair -> 1. It assumes the pairs independent: use it only with one pair per cluster.
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
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """Correct-rate and rank of one base model at different context lengths.

    ``variants`` maps a model name to ``(base model, context length)``; models not in it are
    left out. Per (base, length) cell: judgements, share judged correct and mean rank, with
    cluster-bootstrap intervals. For every base model and every two of its context lengths
    ``long > short``, over the reviews that judged both variants (the same clinician, the same
    instruction)::

        d_correct_r = correct_r(long) - correct_r(short)          (in {-1, 0, 1})
        d_rank_r    = rank_r(short) - rank_r(long)                 (> 0: long ranked better)

    each averaged over reviews. **The test is the studentized cluster bootstrap** (interval and
    two-sided p-value, ``intervals``): it resamples whole clusters, so several clinicians'
    judgements of one instruction (or one patient's instructions) count as one unit of
    evidence. The exact McNemar test is
    given only when every cluster holds a single pair; with several it would treat copies of
    one judgement as independent evidence, and is left out with the reason.
    """
    _check_bootstrap_args(n_resamples, confidence)
    model = np.asarray(table.model).astype(str)
    rank = _as_float(table.rank)
    correct = _as_float(table.correct)
    clusters = np.asarray(table.clusters)
    boot: dict[str, Any] = {
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "min_clusters": min_clusters,
    }
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
            lo, hi = cluster_ci(correct[known], clusters[known], **boot, bounds=(0.0, 1.0))
            ranks = rank[mine & ~np.isnan(rank)]
            cells.append(
                {
                    "base_model": base,
                    "context_length": length,
                    "models": sorted(lengths[length]),
                    "n": int(mine.sum()),
                    "n_correct_known": n_known,
                    "share_correct": float(correct[known].mean()) if n_known else math.nan,
                    "correct_ci_low": lo,
                    "correct_ci_high": hi,
                    "n_clusters": n_clusters_of(clusters[known]),
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
                    boot,
                )  # fmt: skip
            )
    return {
        "cells": cells,
        "comparisons": comparisons,
        "n_bases": len(bases),
        "test": f"{INTERVAL_METHOD} (McNemar only with one pair per cluster)",
        **boot,
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
    boot: dict[str, Any],
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
    cluster = np.asarray(table.clusters)[rl]
    out: dict[str, Any] = {
        "base_model": base,
        "long": long,
        "short": short,
        "n_reviews": int(both.size),
        "n_instructions": int(np.unique(instruction).shape[0]),
        "n_clusters": n_clusters_of(cluster),
    }
    ok_c = ~np.isnan(correct[rl]) & ~np.isnan(correct[rs])
    cl, cs = correct[rl][ok_c] > 0.5, correct[rs][ok_c] > 0.5
    b, c = int((cl & ~cs).sum()), int((~cl & cs).sum())
    d_correct = cl.astype(float) - cs.astype(float)
    pairs_per_cluster = np.unique(cluster[ok_c], return_counts=True)[1]
    independent = bool(cl.size) and int(pairs_per_cluster.max()) == 1
    out.update(
        n_pairs_correct=int(ok_c.sum()),
        share_correct_long=float(cl.mean()) if cl.size else math.nan,
        share_correct_short=float(cs.mean()) if cs.size else math.nan,
        both_correct=int((cl & cs).sum()),
        only_long_correct=b,
        only_short_correct=c,
        neither_correct=int((~cl & ~cs).sum()),
        mcnemar_p_value=mcnemar_exact(b, c) if independent else math.nan,
        mcnemar_note=""
        if independent or not cl.size
        else (
            f"not shown: up to {int(pairs_per_cluster.max())} pairs per cluster are not "
            "independent; the cluster bootstrap is the test"
        ),
        **_paired_mean(d_correct, cluster[ok_c], "correct_difference", boot, 1.0),
    )
    ok_r = ~np.isnan(rank[rl]) & ~np.isnan(rank[rs])
    d_rank = rank[rs][ok_r] - rank[rl][ok_r]
    out.update(
        n_pairs_rank=int(ok_r.sum()),
        **_paired_mean(d_rank, cluster[ok_r], "rank_difference", boot, math.inf),
    )
    return out


def _paired_mean(
    d: Array, clusters: Array, name: str, boot: dict[str, Any], largest: float
) -> dict[str, Any]:
    if d.size == 0:
        return {name: math.nan, f"{name}_ci_low": math.nan, f"{name}_ci_high": math.nan,
                f"{name}_p_value": math.nan, f"{name}_p_at_floor": False}  # fmt: skip
    bounds = (-largest, largest) if math.isfinite(largest) else None
    r = cluster_mean(d, clusters, **boot, bounds=bounds)
    return {name: r.estimate, f"{name}_ci_low": r.ci_low, f"{name}_ci_high": r.ci_high,
            f"{name}_p_value": r.p_value, f"{name}_p_at_floor": r.p_at_floor}  # fmt: skip
