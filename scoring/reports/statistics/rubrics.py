"""Rubric scores, and how well a model grader agrees with clinicians on rubric criteria.

HealthBench (Arora et al. 2025, openai/simple-evals ``healthbench_eval.py``: ``calculate_score``;
``healthbench_meta_eval.py``) scores a response as the points of the criteria it meets over the
points of its positive criteria (negative criteria subtract when met), and measures its grader
by the macro-F1 of its "met"/"not met" verdicts against physicians', beside each physician
measured against the others. Here:

- **Per response** (``response_scores``): ``sum(points of met criteria) / sum(positive points)``,
  clipped to [0, 1] per response (HealthBench clips only the mean; a response's own score is
  then a share, and one harmful answer cannot pull a model's mean below what "nothing met"
  gives). A criterion whose verdict is missing (the grader's answer did not parse) leaves both
  sums: it is neither met nor not met. No graded positive criterion: no score (nan).
  Clinicians' score of a response: the mean of each clinician's own score of it.
- **Per model** (``model_scores``): the mean of its responses' scores with a cluster-bootstrap
  interval (``resampling.cluster_bootstrap_ci``: patients resampled when instructions share
  records); per tag, the same over the tag's criteria only.
- **Agreement** (``grader_agreement``): on the (response, criterion) items both graded,

  * the grader against each clinician: macro-F1 (the mean of the F1 of "met" and of "not met")
    and Cohen's kappa;
  * leave one clinician out: for each clinician, the majority of the *other* clinicians on the
    items they graded (ties left out) is the reference; the clinician and the grader are each
    scored against it on the same items. Pooled over clinicians, that is HealthBench's
    comparison: the grader beside a physician, both against the remaining physicians;
  * intervals: the confusion counts are summed per cluster and resampled with the same cluster
    draws for the grader and the clinicians (paired), so the difference has an interval too.

  Where the grader's pooled macro-F1 is below the clinicians', ``verdict`` says so.

Pure numpy; no Django.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .resampling import (
    DEFAULT_RESAMPLES,
    MIN_CLUSTERS,
    _cluster_counts,
    _percentile_interval,
    cluster_bootstrap_ci,
    interval_note,
    n_clusters_of,
)
from .table import Array, _check_bootstrap_args

GRADER = "grader"

__all__ = [
    "GRADER",
    "Verdicts",
    "agreement_report",
    "cohen_kappa",
    "grader_agreement",
    "macro_f1",
    "model_scores",
    "clinician_mean_scores",
    "response_scores",
    "score_table",
]


@dataclass(frozen=True, eq=False)
class Verdicts:
    """One row per verdict: a rater's "met" on one (response, criterion).

    ``rater``: a clinician's key, or ``GRADER`` (``GRADER:<config id>`` when several);
    ``met``: 1.0, 0.0, or nan (missing). ``points``,
    ``tags`` and ``version`` describe each criterion; ``cluster`` names each response's cluster
    (its patient, or its instruction).
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


def response_scores(verdicts: Verdicts) -> dict[str, dict[int, float]]:
    """``{rater: {response: score}}``: points met over positive points, clipped to [0, 1].

    Missing verdicts leave the criterion out; a response with no graded positive criterion
    has no score (absent)."""
    met_points: dict[tuple[str, int], float] = {}
    positive: dict[tuple[str, int], float] = {}
    for rater, response, criterion, met in zip(
        verdicts.rater, verdicts.response, verdicts.criterion, verdicts.met, strict=True
    ):
        if math.isnan(met):
            continue
        key = (str(rater), int(response))
        points = float(verdicts.points[int(criterion)])
        if points > 0:
            positive[key] = positive.get(key, 0.0) + points
        if met:
            met_points[key] = met_points.get(key, 0.0) + points
        else:
            met_points.setdefault(key, 0.0)
    out: dict[str, dict[int, float]] = {}
    for (rater, response), total in positive.items():
        score = met_points.get((rater, response), 0.0) / total
        out.setdefault(rater, {})[response] = min(1.0, max(0.0, score))
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


def model_scores(
    scores: Mapping[int, float],
    model_of: Mapping[int, str],
    cluster_of: Mapping[int, str],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> list[dict[str, Any]]:
    """Per model: mean response score, its cluster-bootstrap interval, responses, clusters."""
    by_model: dict[str, list[int]] = {}
    for response in sorted(scores):
        by_model.setdefault(model_of[response], []).append(response)
    rows = []
    for model in sorted(by_model):
        ids = by_model[model]
        values = np.array([scores[r] for r in ids], dtype=float)
        clusters = np.array([cluster_of.get(r, str(r)) for r in ids])
        n_clusters = n_clusters_of(clusters)
        lo, hi = cluster_bootstrap_ci(
            values, clusters, n_resamples, seed, confidence, min_clusters=min_clusters
        )
        rows.append(
            {
                "model": model,
                "mean": float(values.mean()),
                "ci_low": lo,
                "ci_high": hi,
                "n_responses": len(ids),
                "n_clusters": n_clusters,
                "note": interval_note(n_clusters, min_clusters),
            }
        )
    return rows


# --- agreement --------------------------------------------------------------------------------


def _confusion(a: Array, b: Array) -> Array:
    """``[both met, a met only, b met only, neither]`` of two 0/1 arrays."""
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


def _kappa_counts(counts: Array) -> Array:
    tp, fp, fn, tn = (counts[..., i] for i in range(4))
    n = tp + fp + fn + tn
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = (tp + tn) / n
        expected = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
        out: Array = np.where(expected < 1.0, (observed - expected) / (1.0 - expected), np.nan)
    return out


def macro_f1(a: Sequence[float] | Array, b: Sequence[float] | Array) -> float:
    """Macro-F1 of "met"/"not met" between two raters' 0/1 verdicts (symmetric)."""
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


def _pair_row(name: str, counts: Array, n_clusters: int) -> dict[str, Any]:
    return {
        "rater": name,
        "n_items": int(counts.sum()),
        "n_clusters": n_clusters,
        "macro_f1": float(_macro_f1_counts(counts)) if counts.sum() else math.nan,
        "kappa": float(_kappa_counts(counts)) if counts.sum() else math.nan,
    }


def _interval(
    pooled: list[_Pooled],
    order: list[str],
    draws: Array | None,
    confidence: float,
    stat: Callable[[Array], Array] = _macro_f1_counts,
) -> list[tuple[float, float]]:
    """Cluster-bootstrap intervals of ``stat`` (macro-F1, or kappa) of each pooled comparison,
    every one over the same cluster draws."""
    if draws is None:
        return [(math.nan, math.nan)] * len(pooled)
    out = []
    for p in pooled:
        per_cluster = np.stack([p.counts.get(c, np.zeros(4)) for c in order])
        dist = stat(draws @ per_cluster)
        dist = dist[~np.isnan(dist)]
        out.append(_percentile_interval(dist, confidence) if dist.size else (math.nan, math.nan))
    return out


def grader_agreement(
    verdicts: Verdicts,
    *,
    grader: str = GRADER,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> dict[str, Any]:
    """The grader against each clinician, and beside each clinician against the others."""
    _check_bootstrap_args(n_resamples, confidence)
    grader_items = _items(verdicts, grader)
    clinicians = verdicts.clinicians()
    by_clinician = {c: _items(verdicts, c) for c in clinicians}

    def cluster(response: int) -> str:
        return verdicts.cluster.get(response, str(response))

    per_clinician = []
    direct = _Pooled()
    loo_clinicians, loo_grader = _Pooled(), _Pooled()
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
        keys = sorted(reference)
        ref = np.array([reference[k] for k in keys])
        k_clusters = np.array([cluster(k[0]) for k in keys])
        own = np.array([mine[k] for k in keys])
        graded = np.array([grader_items[k] for k in keys])
        loo_clinicians.add(k_clusters, own, ref)
        loo_grader.add(k_clusters, graded, ref)
        row["loo_items"] = len(keys)
        row["loo_clinician_f1"] = macro_f1(own, ref) if keys else math.nan
        row["loo_grader_f1"] = macro_f1(graded, ref) if keys else math.nan
        per_clinician.append(row)

    order = sorted(set(direct.counts) | set(loo_clinicians.counts))
    n_clusters = len(order)
    draws = (
        _cluster_counts(n_clusters, int(n_resamples), int(seed))
        if n_clusters >= min_clusters
        else None
    )
    (d_ci, c_ci, g_ci) = _interval([direct, loo_clinicians, loo_grader], order, draws, confidence)
    (dk_ci, ck_ci, gk_ci) = _interval(
        [direct, loo_clinicians, loo_grader], order, draws, confidence, _kappa_counts
    )
    clin_f1 = float(_macro_f1_counts(loo_clinicians.total()))
    grad_f1 = float(_macro_f1_counts(loo_grader.total()))
    diff_ci = (math.nan, math.nan)
    if draws is not None and loo_clinicians.counts:
        per = [
            np.stack([p.counts.get(c, np.zeros(4)) for c in order])
            for p in (loo_grader, loo_clinicians)
        ]
        diff = _macro_f1_counts(draws @ per[0]) - _macro_f1_counts(draws @ per[1])
        diff = diff[~np.isnan(diff)]
        if diff.size:
            diff_ci = _percentile_interval(diff, confidence)
    direct_total = direct.total()
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
            "n_items": int(loo_clinicians.total().sum()),
            "clinicians_f1": clin_f1 if loo_clinicians.counts else math.nan,
            "clinicians_ci": list(c_ci),
            "grader_f1": grad_f1 if loo_grader.counts else math.nan,
            "grader_ci": list(g_ci),
            "difference": grad_f1 - clin_f1 if loo_clinicians.counts else math.nan,
            "difference_ci": list(diff_ci),
            "clinician_f1s": [r["loo_clinician_f1"] for r in per_clinician],
            "clinicians_kappa": float(_kappa_counts(loo_clinicians.total()))
            if loo_clinicians.counts
            else math.nan,
            "clinicians_kappa_ci": list(ck_ci),
            "grader_kappa": float(_kappa_counts(loo_grader.total()))
            if loo_grader.counts
            else math.nan,
            "grader_kappa_ci": list(gk_ci),
        },
        "n_clusters": n_clusters,
        "note": interval_note(n_clusters, min_clusters),
        "missing_grader_verdicts": int(np.isnan(verdicts.met[verdicts.rater == grader]).sum()),
    }
    result["verdict"] = _verdict(result)
    return result


def _verdict(result: Mapping[str, Any]) -> str:
    """A sentence when the grader does worse than the clinicians do against each other."""
    loo = result["leave_one_out"]
    grader, clinicians = loo["grader_f1"], loo["clinicians_f1"]
    if math.isnan(grader) or math.isnan(clinicians):
        return ""
    if grader >= clinicians:
        return (
            f"The grader's macro-F1 ({grader:.2f}) is at or above the clinicians' against each "
            f"other ({clinicians:.2f})."
        )
    lo, hi = loo["difference_ci"]
    certain = (
        " and the interval of the difference lies below zero"
        if not math.isnan(hi) and hi < 0
        else " (the interval of the difference includes zero)"
        if not math.isnan(hi)
        else ""
    )
    below = [
        r["rater"]
        for r in result["per_clinician"]
        if not math.isnan(r["loo_clinician_f1"])
        and not math.isnan(r["loo_grader_f1"])
        and r["loo_grader_f1"] < r["loo_clinician_f1"]
    ]
    return (
        f"The grader falls below the clinicians: its macro-F1 against the clinicians' majority "
        f"is {grader:.2f}, theirs against each other {clinicians:.2f}{certain}; it is below "
        f"{len(below)} of {len(result['per_clinician'])} clinicians. Read its scores with that "
        "in mind."
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
    per tag: ``{"overall": {"clinicians": rows, "grader": rows}, "per_tag": {tag: ...}}``."""
    kwargs: dict[str, Any] = {
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "min_clusters": min_clusters,
    }
    cluster_of = verdicts.cluster

    def both(v: Verdicts) -> dict[str, list[dict[str, Any]]]:
        scores = response_scores(v)
        return {
            "clinicians": model_scores(
                clinician_mean_scores(scores), model_of, cluster_of, **kwargs
            ),
            "grader": model_scores(scores.get(grader, {}), model_of, cluster_of, **kwargs),
        }

    tags = sorted({t for c in set(verdicts.criterion.tolist()) for t in verdicts.tags.get(c, ())})
    return {"overall": both(verdicts), "per_tag": {t: both(verdicts.with_tag(t)) for t in tags}}
