"""Rubric scores, and how well a model grader agrees with clinicians on rubric criteria.

HealthBench (Arora et al. 2025; openai/simple-evals, MIT: ``healthbench_eval.py``
``calculate_score`` and ``_compute_clipped_stats``; ``healthbench_meta_eval.py``
``compute_metrics_for_rater_by_class``; the analysis notebook ``healthbench_scripts/
healthbench_analysis.ipynb``) scores a response as the points of the criteria it meets over the
points of its positive criteria (negative criteria subtract when met), and measures its grader
by the balanced (macro) F1 of its "met"/"not met" verdicts against physicians'. Here:

- **Per response** (``response_details``, ``response_scores``): ``sum(points of met criteria)
  / sum(positive points)`` (``raw``, HealthBench's per-response score), and that clipped to
  [0, 1] (``score``, the app's). A rater's score of a response exists only when the rater gave
  every criterion a verdict: a missing verdict (the grader's answer did not parse) is neither
  met nor not met, and leaving it out would raise the score (+5 met, +5 missing, -10 not met
  would read 1.0, not 0.5). Instead each response carries its bounds, ``low`` (every missing
  verdict against the response: a positive criterion not met, a harm criterion met) and
  ``high`` (every one for it). HealthBench never has one: it asks its grader again until the
  answer parses. No positive criterion: no score (HealthBench's ``None``).
  Clinicians' score of a response: the mean of each clinician's own score of it.
- **Per model** (``model_scores``, ``score_table``): the mean of the responses' clipped scores
  (the app's), and HealthBench's aggregate, the mean of the unclipped scores clipped once
  (1.0 and -2.0 give 0.5 here, 0.0 there), each with an interval from ``score_interval``
  (HealthBench's interval is the clip of its mean's: clipping is monotone). Beside a grader
  the clinicians are scored on the same responses: those the grader scored completely; its
  share of missing verdicts and its bounds come over every response it graded at all.
- **Agreement** (``grader_agreement``): on the (response, criterion) items both graded,

  * the grader against each clinician: macro-F1 (the mean of the F1 of "met" and of "not met")
    and Cohen's kappa;
  * the app's comparison, *majority*: for each clinician, the majority of the *other*
    clinicians on the items they graded (ties left out) is the reference; the clinician and
    the grader are each scored against it on the same items, pooled over clinicians;
  * HealthBench's comparison, *pairwise*: each rater against each other clinician separately,
    every (item, other clinician) pair counted; the grader's pooled over every pair, each
    clinician's over theirs, and the clinicians' figure their average weighted by pairs (as in
    HealthBench's analysis notebook). With two clinicians both comparisons coincide for them;
    with more the majority is a steadier reference and its figures run higher;
  * intervals: the confusion counts are summed per cluster and resampled with the same cluster
    draws for the grader and the clinicians (paired), so the difference has an interval too.

  A macro-F1 (or kappa) whose reference lacks a class ("not met" never said) is undefined:
  nan, not the F1 of the one class left. HealthBench gives no balanced F1 when either side
  lacks a class; here a rater who never says a class the reference says scores 0 on it. A
  ``verdict`` sentence (the grader below or at the clinicians, on the majority comparison) is
  given only where it means something: two clusters at least, and ``MIN_CLASS_ITEMS`` items of
  each class in the reference; ``no_verdict`` says why otherwise.

Pure numpy; no Django.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .intervals import INTERVAL_METHOD, cluster_ci
from .resampling import (
    DEFAULT_RESAMPLES,
    MIN_CLUSTERS,
    _cluster_counts,
    _percentile_interval,
    interval_note,
    n_clusters_of,
)
from .table import Array, _check_bootstrap_args

GRADER = "grader"
# Fewer items of a class in the reference than this and that class's F1, half of a macro-F1,
# turns on one or two verdicts: the figure is shown, but no verdict is drawn from it.
MIN_CLASS_ITEMS = 5

__all__ = [
    "GRADER",
    "MIN_CLASS_ITEMS",
    "ResponseScore",
    "Verdicts",
    "agreement_report",
    "cohen_kappa",
    "grader_agreement",
    "macro_f1",
    "model_scores",
    "clinician_mean_scores",
    "response_details",
    "response_scores",
    "score_interval",
    "score_table",
]


@dataclass(frozen=True, eq=False)
class Verdicts:
    """One row per verdict: a rater's "met" on one (response, criterion).

    ``rater``: a clinician's key, or ``GRADER`` (``GRADER:<config id>`` when several);
    ``met``: 1.0, 0.0, or nan (missing). ``points``,
    ``tags`` and ``version`` describe each criterion; ``cluster`` names each response's cluster
    (its patient, or its instruction). At most one row per (rater, response, criterion): which
    of two verdicts counts is the caller's decision, never the row order's (ValueError).
    """

    rater: Array
    response: Array
    criterion: Array
    met: Array
    points: Mapping[int, float]
    tags: Mapping[int, Sequence[str]] = field(default_factory=dict)
    version: Mapping[int, str] = field(default_factory=dict)
    cluster: Mapping[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rater", np.asarray(self.rater, dtype=object))
        object.__setattr__(self, "response", np.asarray(self.response, dtype=np.int64))
        object.__setattr__(self, "criterion", np.asarray(self.criterion, dtype=np.int64))
        object.__setattr__(self, "met", np.asarray(self.met, dtype=float))
        n = {len(self.rater), len(self.response), len(self.criterion), len(self.met)}
        if len(n) > 1:
            raise ValueError("Verdicts arrays must have the same length")
        keys = set(
            zip(self.rater.tolist(), self.response.tolist(), self.criterion.tolist(), strict=True)
        )
        if len(keys) != len(self.rater):
            raise ValueError(
                f"one verdict per rater, response and criterion: "
                f"{len(self.rater) - len(keys)} row(s) repeat one"
            )

    def __len__(self) -> int:
        return int(self.rater.shape[0])

    def subset(self, keep: Array) -> Verdicts:
        return Verdicts(
            self.rater[keep],
            self.response[keep],
            self.criterion[keep],
            self.met[keep],
            self.points,
            self.tags,
            self.version,
            self.cluster,
        )

    def with_tag(self, tag: str) -> Verdicts:
        keep = np.array([tag in self.tags.get(int(c), ()) for c in self.criterion], dtype=bool)
        return self.subset(keep)

    def with_version(self, version: str) -> Verdicts:
        keep = np.array([self.version.get(int(c)) == version for c in self.criterion], dtype=bool)
        return self.subset(keep)

    def clinicians(self) -> list[str]:
        """Every rater but the graders (``GRADER``, or a key starting with it)."""
        return sorted({str(r) for r in self.rater if not is_grader(str(r))})


def is_grader(rater: str) -> bool:
    """Graders are ``GRADER`` or ``GRADER:<config>``; every other rater is a clinician."""
    return rater == GRADER or rater.startswith(GRADER + ":")


# --- scores ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResponseScore:
    """One rater's grading of one response: points met, and what its missing verdicts hold.

    ``met``: points of the criteria met (a met harm criterion subtracts); ``positive``: points
    of every positive criterion graded, a missing verdict's included (the rubric's worth does
    not depend on the verdicts); ``missing_positive`` / ``missing_negative``: points of the
    positive / negative criteria whose verdict is missing (the second <= 0).
    """

    met: float
    positive: float
    missing_positive: float
    missing_negative: float
    n_verdicts: int
    n_missing: int

    @property
    def complete(self) -> bool:
        return self.n_missing == 0

    @property
    def raw(self) -> float:
        """HealthBench's ``calculate_score`` (not clipped); nan when a verdict is missing."""
        return self.met / self.positive if self.complete else math.nan

    @property
    def score(self) -> float:
        """The app's score: ``raw`` clipped to [0, 1]; nan when a verdict is missing."""
        return _clip(self.raw)

    @property
    def low(self) -> float:
        """The score with every missing verdict against the response."""
        return _clip((self.met + self.missing_negative) / self.positive)

    @property
    def high(self) -> float:
        """The score with every missing verdict for the response."""
        return _clip((self.met + self.missing_positive) / self.positive)


def _clip(value: float) -> float:
    return value if math.isnan(value) else min(1.0, max(0.0, value))


def response_details(verdicts: Verdicts) -> dict[str, dict[int, ResponseScore]]:
    """``{rater: {response: ResponseScore}}`` for every response with a positive criterion
    graded (a missing verdict counts as graded: the criterion was asked)."""
    sums: dict[tuple[str, int], list[float]] = {}
    for rater, response, criterion, met in zip(
        verdicts.rater, verdicts.response, verdicts.criterion, verdicts.met, strict=True
    ):
        # met, positive, missing positive, missing negative, verdicts, missing
        row = sums.setdefault((str(rater), int(response)), [0.0] * 6)
        points = float(verdicts.points[int(criterion)])
        row[4] += 1
        if points > 0:
            row[1] += points
        if math.isnan(met):
            row[2 if points > 0 else 3] += points
            row[5] += 1
        elif met:
            row[0] += points
    out: dict[str, dict[int, ResponseScore]] = {}
    for (rater, response), (met_points, positive, m_pos, m_neg, n, n_missing) in sums.items():
        if positive > 0:
            out.setdefault(rater, {})[response] = ResponseScore(
                met_points, positive, m_pos, m_neg, int(n), int(n_missing)
            )
    return out


def response_scores(verdicts: Verdicts) -> dict[str, dict[int, float]]:
    """``{rater: {response: score}}``: points met over positive points, clipped to [0, 1], for
    the responses the rater scored completely (a missing verdict leaves the response unscored;
    ``response_details`` has its bounds)."""
    out: dict[str, dict[int, float]] = {}
    for rater, per_response in response_details(verdicts).items():
        scored = {r: d.score for r, d in per_response.items() if d.complete}
        if scored:
            out[rater] = scored
    return out


def clinician_mean_scores(scores: Mapping[str, Mapping[int, float]]) -> dict[int, float]:
    """Each response's clinicians' score: the mean of every clinician's own score of it."""
    sums: dict[int, list[float]] = {}
    for rater, per_response in scores.items():
        if is_grader(rater):
            continue
        for response, value in per_response.items():
            sums.setdefault(response, []).append(value)
    return {r: float(np.mean(v)) for r, v in sums.items()}


def score_interval(
    values: Array,
    clusters: Array,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
    bounds: tuple[float, float] | None = (0.0, 1.0),
) -> tuple[float, float]:
    """The interval of a mean rubric score: every score interval of this module comes from
    here (the app's means, HealthBench's aggregates), so the method is chosen in one place.
    It is the report's for every mean (``intervals.cluster_ci``, the studentized cluster
    bootstrap, ``INTERVAL_METHOD``): the percentile bootstrap covered 93-95% at 30 patients
    and 90-92% at 12 (``bench_coverage``, "rubric scores"). ``bounds``: the score's range
    (the app's clipped score lies in [0, 1]; HealthBench's unclipped one has none, its
    interval is clipped after)."""
    return cluster_ci(values, clusters, n_resamples, seed, confidence, min_clusters, bounds=bounds)


def _mean_row(
    ids: Sequence[int],
    scores: Mapping[int, float],
    raw: Mapping[int, float] | None,
    cluster_of: Mapping[int, str],
    kwargs: Mapping[str, Any],
) -> dict[str, Any]:
    """Mean score of ``ids`` with its interval, and HealthBench's aggregate when ``raw``."""
    min_clusters = int(kwargs.get("min_clusters", MIN_CLUSTERS))
    values = np.array([scores[r] for r in ids], dtype=float)
    clusters = np.array([cluster_of.get(r, str(r)) for r in ids])
    n_clusters = n_clusters_of(clusters) if len(ids) else 0
    lo, hi = score_interval(values, clusters, **kwargs) if len(ids) else (math.nan, math.nan)
    row: dict[str, Any] = {
        "mean": float(values.mean()) if len(ids) else math.nan,
        "ci_low": lo,
        "ci_high": hi,
        "n_responses": len(ids),
        "n_clusters": n_clusters,
        "note": interval_note(n_clusters, min_clusters),
        "interval_method": INTERVAL_METHOD,
    }
    if raw is not None:
        # _compute_clipped_stats: np.clip(np.mean(values), 0, 1); its interval, the clip of the
        # mean's (a monotone map keeps what the interval covers).
        raw_values = np.array([raw[r] for r in ids], dtype=float)
        raw_lo, raw_hi = (
            score_interval(raw_values, clusters, bounds=None, **kwargs)
            if len(ids)
            else (math.nan, math.nan)
        )
        row["healthbench_mean"] = _clip(float(raw_values.mean())) if len(ids) else math.nan
        row["healthbench_ci_low"] = _clip(raw_lo)
        row["healthbench_ci_high"] = _clip(raw_hi)
    return row


def model_scores(
    scores: Mapping[int, float],
    model_of: Mapping[int, str],
    cluster_of: Mapping[int, str],
    *,
    raw: Mapping[int, float] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> list[dict[str, Any]]:
    """Per model: mean response score, its interval, responses, clusters; with ``raw`` (the
    same responses' unclipped scores) HealthBench's aggregate and its interval too."""
    kwargs = {
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "min_clusters": min_clusters,
    }
    by_model: dict[str, list[int]] = {}
    for response in sorted(scores):
        by_model.setdefault(model_of[response], []).append(response)
    return [
        {"model": model, **_mean_row(by_model[model], scores, raw, cluster_of, kwargs)}
        for model in sorted(by_model)
    ]


# --- agreement --------------------------------------------------------------------------------


def _confusion(a: Array, b: Array) -> Array:
    """``[both met, a met only, b met only, neither]`` of two 0/1 arrays (``b`` the reference)."""
    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    return np.array([(a & b).sum(), (a & ~b).sum(), (~a & b).sum(), (~a & ~b).sum()], dtype=float)


def _macro_f1_counts(counts: Array) -> Array:
    """Macro-F1 from confusion counts ``(..., 4)``; a class absent from both sides is left out
    of the mean (its F1 is undefined), and nan when both classes are absent."""
    tp, fp, fn, tn = (counts[..., i] for i in range(4))
    with np.errstate(invalid="ignore", divide="ignore"):
        denom_met = 2 * tp + fp + fn
        denom_not = 2 * tn + fp + fn
        f1_met = np.where(denom_met > 0, 2 * tp / np.where(denom_met > 0, denom_met, 1), np.nan)
        f1_not = np.where(denom_not > 0, 2 * tn / np.where(denom_not > 0, denom_not, 1), np.nan)
    with warnings.catch_warnings():
        # A resample holding only clusters without items has neither class: nan, dropped later.
        warnings.simplefilter("ignore", RuntimeWarning)
        out: Array = np.nanmean(np.stack([f1_met, f1_not]), axis=0)
    return out


def _reference_has_both(counts: Array) -> Array:
    """Whether the reference (``b`` of ``_confusion``) says both "met" and "not met"."""
    out: Array = (counts[..., 0] + counts[..., 2] > 0) & (counts[..., 1] + counts[..., 3] > 0)
    return out


def _f1_counts(counts: Array) -> Array:
    """The report's macro-F1: undefined (nan) when the reference lacks a class, since the
    F1 of the one class left would read as agreement on both (30 items all met and one
    grader's "not met" gave 0.49; every rater marking a criterion alike gave 1.0)."""
    out: Array = np.where(_reference_has_both(counts), _macro_f1_counts(counts), np.nan)
    return out


def _healthbench_f1_counts(counts: Array) -> Array:
    """HealthBench's balanced F1 (``compute_f1_metric``, ``compute_balanced_metric``): the
    same mean of the two classes' F1, but none when a class's precision or recall has no
    pairs, i.e. when either side never says a class."""
    tp, fp, fn, tn = (counts[..., i] for i in range(4))
    defined = (tp + fp > 0) & (tp + fn > 0) & (fn + tn > 0) & (fp + tn > 0)
    out: Array = np.where(defined, _macro_f1_counts(counts), np.nan)
    return out


def _healthbench_weight(counts: Array) -> Array:
    """The ``n`` HealthBench's balanced F1 carries (its F1s' ``n``: TP + FP + FN per class),
    by which its analysis notebook (``agg_n_and_val_list``) averages physicians."""
    tp, fp, fn, tn = (counts[..., i] for i in range(4))
    out: Array = tp + tn + 2 * (fp + fn)
    return out


def _kappa_counts(counts: Array) -> Array:
    tp, fp, fn, tn = (counts[..., i] for i in range(4))
    n = tp + fp + fn + tn
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = (tp + tn) / n
        expected = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
        out: Array = np.where(expected < 1.0, (observed - expected) / (1.0 - expected), np.nan)
    return out


def _report_kappa_counts(counts: Array) -> Array:
    """Kappa as the report gives it: undefined, like macro-F1, when the reference lacks a
    class (it is then 0 for any disagreement at all, whatever the agreement)."""
    out: Array = np.where(_reference_has_both(counts), _kappa_counts(counts), np.nan)
    return out


def macro_f1(a: Sequence[float] | Array, b: Sequence[float] | Array) -> float:
    """Macro-F1 of "met"/"not met" between two raters' 0/1 verdicts (symmetric; sklearn's
    ``f1_score(average="macro")``: a class neither says is left out)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size == 0:
        return math.nan
    return float(_macro_f1_counts(_confusion(a, b)))


def cohen_kappa(a: Sequence[float] | Array, b: Sequence[float] | Array) -> float:
    """Cohen's kappa of two raters' 0/1 verdicts; nan when chance agreement is 1."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size == 0:
        return math.nan
    return float(_kappa_counts(_confusion(a, b)))


@dataclass
class _Pooled:
    """Confusion counts per cluster of one comparison, pooled over folds."""

    counts: dict[str, Array] = field(default_factory=dict)

    def add(self, clusters: Array, a: Array, b: Array) -> None:
        for cluster in np.unique(clusters):
            rows = clusters == cluster
            c = str(cluster)
            self.counts[c] = self.counts.get(c, np.zeros(4)) + _confusion(a[rows], b[rows])

    def total(self) -> Array:
        return sum(self.counts.values(), np.zeros(4))

    def per_cluster(self, order: list[str]) -> Array:
        return np.stack([self.counts.get(c, np.zeros(4)) for c in order])


def _items(verdicts: Verdicts, rater: str) -> dict[tuple[int, int], float]:
    rows = (verdicts.rater == rater) & ~np.isnan(verdicts.met)
    return {
        (int(r), int(c)): float(m)
        for r, c, m in zip(
            verdicts.response[rows], verdicts.criterion[rows], verdicts.met[rows], strict=True
        )
    }


def _majority(values: list[float]) -> float | None:
    share = sum(values) / len(values)
    return None if share == 0.5 else float(share > 0.5)


def _value(stat: Callable[[Array], Array], counts: Array) -> float:
    return float(stat(counts)) if counts.sum() else math.nan


def _pair_row(name: str, counts: Array, n_clusters: int) -> dict[str, Any]:
    return {
        "rater": name,
        "n_items": int(counts.sum()),
        "n_clusters": n_clusters,
        "macro_f1": _value(_f1_counts, counts),
        "kappa": _value(_report_kappa_counts, counts),
    }


def _interval(
    pooled: list[_Pooled],
    order: list[str],
    draws: Array | None,
    confidence: float,
    stat: Callable[[Array], Array] = _f1_counts,
) -> list[tuple[float, float]]:
    """Cluster-bootstrap intervals of ``stat`` (macro-F1, or kappa) of each pooled comparison,
    every one over the same cluster draws."""
    if draws is None:
        return [(math.nan, math.nan)] * len(pooled)
    out = []
    for p in pooled:
        if not p.counts:
            out.append((math.nan, math.nan))
            continue
        dist = stat(draws @ p.per_cluster(order))
        dist = dist[~np.isnan(dist)]
        out.append(_percentile_interval(dist, confidence) if dist.size else (math.nan, math.nan))
    return out


def _weighted_f1(counts: Array) -> Array:
    """Clinicians' pairwise figure from their counts ``(..., raters, 4)``: each one's
    HealthBench F1, averaged weighted by its pairs; raters whose F1 is undefined left out."""
    f1 = _healthbench_f1_counts(counts)
    weight = np.where(np.isnan(f1), 0.0, _healthbench_weight(counts))
    with np.errstate(invalid="ignore", divide="ignore"):
        total = weight.sum(axis=-1)
        out: Array = np.where(
            total > 0, np.nansum(np.nan_to_num(f1) * weight, axis=-1) / total, np.nan
        )
    return out


def _difference_ci(
    a: Callable[[Array], Array], b: Callable[[Array], Array], draws: Array | None, confidence: float
) -> tuple[float, float]:
    """Interval of ``a - b``, each a statistic of one resample's draws."""
    if draws is None:
        return math.nan, math.nan
    diff = a(draws) - b(draws)
    diff = diff[~np.isnan(diff)]
    return _percentile_interval(diff, confidence) if diff.size else (math.nan, math.nan)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _no_verdict(n_clinicians: int, n_clusters: int, reference: Mapping[str, int]) -> str:
    """Why no verdict can be drawn ("" when one can), on the majority comparison."""
    if n_clinicians < 2:
        return "No verdict: the clinicians' agreement with each other needs two clinicians."
    if not sum(reference.values()):
        return "No verdict: no item was graded by the grader and two clinicians."
    if n_clusters < 2:
        return (
            "No verdict: the items compared come from one patient, so nothing says how the "
            "agreement would vary from one patient to another."
        )
    for name, label in (("not_met", "“not met”"), ("met", "“met”")):
        n = reference[name]
        if n == 0:
            return (
                f"No verdict: the clinicians never marked {label} on the items compared, so "
                "macro-F1 and kappa are undefined there (HealthBench reports none either)."
            )
        if n < MIN_CLASS_ITEMS:
            return (
                f"No verdict: the clinicians' reference holds {label} on only "
                f"{_plural(n, 'item')} (fewer than {MIN_CLASS_ITEMS}), so half of each "
                "macro-F1 rests on them."
            )
    return ""


def grader_agreement(
    verdicts: Verdicts,
    *,
    grader: str = GRADER,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """The grader against each clinician, and beside the clinicians against each other, in
    two comparisons: the others' majority (the app's) and pairwise (HealthBench's)."""
    _check_bootstrap_args(n_resamples, confidence)
    grader_items = _items(verdicts, grader)
    clinicians = verdicts.clinicians()
    by_clinician = {c: _items(verdicts, c) for c in clinicians}

    def cluster(response: int) -> str:
        return verdicts.cluster.get(response, str(response))

    per_clinician = []
    direct = _Pooled()
    loo_clinicians, loo_grader = _Pooled(), _Pooled()
    pairwise_clinicians: list[_Pooled] = []
    reference_items: dict[str, set[tuple[int, int]]] = {"met": set(), "not_met": set()}
    for c in clinicians:
        mine = by_clinician[c]
        shared = sorted(k for k in mine if k in grader_items)
        clusters = np.array([cluster(k[0]) for k in shared])
        g = np.array([grader_items[k] for k in shared])
        h = np.array([mine[k] for k in shared])
        counts = _confusion(g, h)
        direct.add(clusters, g, h)
        row = _pair_row(c, counts, n_clusters_of(clusters) if shared else 0)
        # Leave this clinician out: the others' majority is the reference for both.
        reference: dict[tuple[int, int], float] = {}
        for key in mine:
            others = [by_clinician[o][key] for o in clinicians if o != c and key in by_clinician[o]]
            vote = _majority(others) if others else None
            if vote is not None and key in grader_items:
                reference[key] = vote
                reference_items["met" if vote else "not_met"].add(key)
        keys = sorted(reference)
        ref = np.array([reference[k] for k in keys])
        k_clusters = np.array([cluster(k[0]) for k in keys])
        own = np.array([mine[k] for k in keys])
        graded = np.array([grader_items[k] for k in keys])
        loo_clinicians.add(k_clusters, own, ref)
        loo_grader.add(k_clusters, graded, ref)
        row["loo_items"] = len(keys)
        row["loo_clinician_f1"] = _value(_f1_counts, _confusion(own, ref))
        row["loo_grader_f1"] = _value(_f1_counts, _confusion(graded, ref))
        # HealthBench's comparison: this clinician against each other one, every pair counted.
        pairs = _Pooled()
        for o in clinicians:
            if o == c:
                continue
            theirs = by_clinician[o]
            both = sorted(k for k in mine if k in theirs)
            pairs.add(
                np.array([cluster(k[0]) for k in both]),
                np.array([mine[k] for k in both]),
                np.array([theirs[k] for k in both]),
            )
        pairwise_clinicians.append(pairs)
        row["pairwise_items"] = int(pairs.total().sum())
        row["pairwise_f1"] = _value(_healthbench_f1_counts, pairs.total())
        per_clinician.append(row)

    order = sorted(
        set(direct.counts)
        | set(loo_clinicians.counts)
        | {c for p in pairwise_clinicians for c in p.counts}
    )
    n_clusters = len(order)
    draws = (
        _cluster_counts(n_clusters, int(n_resamples), int(seed))
        if n_clusters >= min_clusters
        else None
    )
    (d_ci, c_ci, g_ci) = _interval([direct, loo_clinicians, loo_grader], order, draws, confidence)
    (dk_ci, ck_ci, gk_ci) = _interval(
        [direct, loo_clinicians, loo_grader], order, draws, confidence, _report_kappa_counts
    )
    clin_f1 = _value(_f1_counts, loo_clinicians.total())
    grad_f1 = _value(_f1_counts, loo_grader.total())
    diff_ci = _difference_ci(
        lambda k: _f1_counts(k @ loo_grader.per_cluster(order)),
        lambda k: _f1_counts(k @ loo_clinicians.per_cluster(order)),
        draws if loo_clinicians.counts else None,
        confidence,
    )
    # Pairwise: the grader's pooled over every (item, clinician) pair is ``direct``.
    hb_grader = _value(_healthbench_f1_counts, direct.total())
    stacked = (
        np.stack([p.per_cluster(order) for p in pairwise_clinicians], axis=1)  # (C, R, 4)
        if pairwise_clinicians and order
        else None
    )
    hb_clinicians = (
        float(_weighted_f1(stacked.sum(axis=0)))
        if stacked is not None and stacked.sum()
        else math.nan
    )

    def hb_clinicians_of(k: Array) -> Array:
        assert stacked is not None
        return _weighted_f1(np.einsum("bc,crf->brf", k, stacked))

    def hb_grader_of(k: Array) -> Array:
        return _healthbench_f1_counts(k @ direct.per_cluster(order))

    usable = draws if stacked is not None and not math.isnan(hb_clinicians) else None
    hb_grader_ci = _interval([direct], order, draws, confidence, _healthbench_f1_counts)[0]
    hb_clinicians_ci: tuple[float, float] = (math.nan, math.nan)
    if usable is not None:
        dist = hb_clinicians_of(usable)
        dist = dist[~np.isnan(dist)]
        if dist.size:
            hb_clinicians_ci = _percentile_interval(dist, confidence)
    hb_diff_ci = _difference_ci(hb_grader_of, hb_clinicians_of, usable, confidence)
    direct_total = direct.total()
    reference_counts = {k: len(v) for k, v in reference_items.items()}
    result: dict[str, Any] = {
        "grader_vs_clinicians": {
            **_pair_row(grader, direct_total, len(direct.counts)),
            "ci_low": d_ci[0],
            "ci_high": d_ci[1],
            "kappa_ci_low": dk_ci[0],
            "kappa_ci_high": dk_ci[1],
        },
        "per_clinician": per_clinician,
        "leave_one_out": {
            "comparison": "each clinician and the grader against the other clinicians' "
            "majority, leaving each clinician out in turn (ties dropped)",
            "n_items": int(loo_clinicians.total().sum()),
            "clinicians_f1": clin_f1,
            "clinicians_ci": list(c_ci),
            "grader_f1": grad_f1,
            "grader_ci": list(g_ci),
            "difference": grad_f1 - clin_f1,
            "difference_ci": list(diff_ci),
            "clinician_f1s": [r["loo_clinician_f1"] for r in per_clinician],
            "clinicians_kappa": _value(_report_kappa_counts, loo_clinicians.total()),
            "clinicians_kappa_ci": list(ck_ci),
            "grader_kappa": _value(_report_kappa_counts, loo_grader.total()),
            "grader_kappa_ci": list(gk_ci),
            "reference_items": reference_counts,
        },
        "pairwise": {
            "comparison": "HealthBench's: each rater against each other clinician separately, "
            "every (item, clinician) pair counted; the clinicians' figure their average "
            "weighted by pairs",
            "n_pairs": int(direct_total.sum()),
            "grader_f1": hb_grader,
            "grader_ci": list(hb_grader_ci),
            "clinicians_f1": hb_clinicians,
            "clinicians_ci": list(hb_clinicians_ci),
            "difference": hb_grader - hb_clinicians,
            "difference_ci": list(hb_diff_ci),
            "n_clinicians_undefined": sum(1 for r in per_clinician if math.isnan(r["pairwise_f1"])),
        },
        "n_clusters": n_clusters,
        "note": interval_note(n_clusters, min_clusters),
        "missing_grader_verdicts": int(np.isnan(verdicts.met[verdicts.rater == grader]).sum()),
    }
    result["no_verdict"] = _no_verdict(
        len(clinicians), len(loo_clinicians.counts), reference_counts
    )
    result["verdict"] = "" if result["no_verdict"] else _verdict(result)
    return result


def _verdict(result: Mapping[str, Any]) -> str:
    """A sentence saying where the grader stands, on the majority comparison, and whether
    HealthBench's pairwise comparison points the other way."""
    loo = result["leave_one_out"]
    grader, clinicians = loo["grader_f1"], loo["clinicians_f1"]
    if math.isnan(grader) or math.isnan(clinicians):
        return ""
    pairwise = result["pairwise"]
    hb_grader, hb_clinicians = pairwise["grader_f1"], pairwise["clinicians_f1"]
    other_way = ""
    if not (math.isnan(hb_grader) or math.isnan(hb_clinicians)) and (
        (hb_grader >= hb_clinicians) != (grader >= clinicians)
    ):
        where = "at or above" if hb_grader >= hb_clinicians else "below"
        other_way = (
            f" HealthBench's pairwise comparison puts it {where} them ({hb_grader:.2f} against "
            f"{hb_clinicians:.2f})."
        )
    if grader >= clinicians:
        return (
            f"Against the other clinicians' majority, the grader's macro-F1 ({grader:.2f}) is at "
            f"or above the clinicians' ({clinicians:.2f}).{other_way}"
        )
    lo, hi = loo["difference_ci"]
    certain = (
        " and the interval of the difference lies below zero"
        if not math.isnan(hi) and hi < 0
        else " (the interval of the difference includes zero)"
        if not math.isnan(hi)
        else " (too few clusters for an interval)"
    )
    below = [
        r["rater"]
        for r in result["per_clinician"]
        if not math.isnan(r["loo_clinician_f1"])
        and not math.isnan(r["loo_grader_f1"])
        and r["loo_grader_f1"] < r["loo_clinician_f1"]
    ]
    return (
        f"The grader falls below the clinicians: against the other clinicians' majority its "
        f"macro-F1 is {grader:.2f}, theirs {clinicians:.2f}{certain}; it is below "
        f"{len(below)} of {len(result['per_clinician'])} clinicians. Read its scores with that "
        f"in mind.{other_way}"
    )


def agreement_report(
    verdicts: Verdicts,
    *,
    grader: str = GRADER,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """``grader_agreement`` overall, per tag and per rubric version."""
    kwargs: dict[str, Any] = {
        "grader": grader,
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "min_clusters": min_clusters,
    }
    tags = sorted({t for c in set(verdicts.criterion.tolist()) for t in verdicts.tags.get(c, ())})
    versions = sorted(
        {verdicts.version[c] for c in set(verdicts.criterion.tolist()) if c in verdicts.version}
    )
    return {
        "overall": grader_agreement(verdicts, **kwargs),
        "per_tag": {t: grader_agreement(verdicts.with_tag(t), **kwargs) for t in tags},
        "per_version": {v: grader_agreement(verdicts.with_version(v), **kwargs) for v in versions},
    }


def score_table(
    verdicts: Verdicts,
    model_of: Mapping[int, str],
    *,
    grader: str = GRADER,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """Per model, the clinicians' and the grader's rubric scores side by side, overall and
    per tag: ``{"overall": {"clinicians": rows, "grader": rows}, "per_tag": {tag: ...}}``.

    With the grader's verdicts in ``verdicts``, both sides are scored on the same responses
    (those the clinicians scored and the grader scored completely), and each grader row says
    how many verdicts are missing and the bounds of its mean over every response it graded.
    Without, the clinicians' rows cover every response they scored."""
    kwargs: dict[str, Any] = {
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "min_clusters": min_clusters,
    }
    tags = sorted({t for c in set(verdicts.criterion.tolist()) for t in verdicts.tags.get(c, ())})
    return {
        "overall": _score_part(verdicts, model_of, grader, kwargs),
        "per_tag": {t: _score_part(verdicts.with_tag(t), model_of, grader, kwargs) for t in tags},
    }


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def _score_part(
    verdicts: Verdicts, model_of: Mapping[int, str], grader: str, kwargs: Mapping[str, Any]
) -> dict[str, list[dict[str, Any]]]:
    details = response_details(verdicts)
    clinicians = {r: per for r, per in details.items() if not is_grader(r)}
    clin_score = clinician_mean_scores(
        {r: {p: d.score for p, d in per.items() if d.complete} for r, per in clinicians.items()}
    )
    clin_raw = clinician_mean_scores(
        {r: {p: d.raw for p, d in per.items() if d.complete} for r, per in clinicians.items()}
    )
    cluster_of = verdicts.cluster
    mine = details.get(grader, {})
    if not mine:
        rows = model_scores(clin_score, model_of, cluster_of, raw=clin_raw, **kwargs)
        return {"clinicians": rows, "grader": []}
    graded = sorted(p for p in mine if not clin_score or p in clin_score)
    both = [p for p in graded if mine[p].complete]
    g_score = {p: mine[p].score for p in both}
    g_raw = {p: mine[p].raw for p in both}
    models = sorted({model_of[p] for p in graded} | {model_of[p] for p in clin_score})
    clinician_rows, grader_rows = [], []
    for model in models:
        on_graded = [p for p in graded if model_of[p] == model]
        on_both = [p for p in both if model_of[p] == model]
        if clin_score:
            clinician_rows.append(
                {"model": model, **_mean_row(on_both, clin_score, clin_raw, cluster_of, kwargs)}
            )
        n_verdicts = sum(mine[p].n_verdicts for p in on_graded)
        n_missing = sum(mine[p].n_missing for p in on_graded)
        grader_rows.append(
            {
                "model": model,
                **_mean_row(on_both, g_score, g_raw, cluster_of, kwargs),
                # the responses the clinicians scored, of which the grader scored n_responses
                "n_clinician_responses": sum(1 for p in clin_score if model_of[p] == model)
                if clin_score
                else None,
                "n_verdicts": n_verdicts,
                "n_missing": n_missing,
                "missing_share": n_missing / n_verdicts if n_verdicts else math.nan,
                "bound_low": _mean([mine[p].low for p in on_graded]),
                "bound_high": _mean([mine[p].high for p in on_graded]),
                "bound_n_responses": len(on_graded),
                "bound_clinicians": _mean([clin_score[p] for p in on_graded])
                if clin_score
                else math.nan,
            }
        )
    return {"clinicians": clinician_rows, "grader": grader_rows}
