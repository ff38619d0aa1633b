"""Which truth a report scores metrics against, and what it says about reviewing quality.

A report names its consensus (``parameters.consensus``, ``CONSENSUS_METHODS``): ``reviews``
scores each review on its own (the paper's per-review tau, averaged); ``majority``,
``adjudicated`` and the latent-class ``dawid_skene`` and ``mace`` score metrics against one
consensus judgement per response (``scoring.reports.statistics.consensus``). Whatever the choice,
the report's consensus section sets every metric's tau against every consensus side by side
and says where the conclusions change: a different best metric, a sign, an interval that
leaves zero under one truth and not another.

The section also carries what reports say about reviewing quality: the adjudication trail
(who resolved which disagreement, how; ids, pseudonyms and numbers only, never the reason's
text, which stays in the app and its audit trail) and each clinician's agreement with gold.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from typing import Any

import numpy as np

from review.models import (
    AdjudicatedJudgement,
    Adjudication,
    GoldItem,
    Study,
    User,
)
from review.selectors.quality import gold_references, quality_rows
from scoring.reports.formatting import interval
from scoring.reports.selectors import ReportInputs
from scoring.reports.statistics import metric_correlations
from scoring.reports.statistics.consensus import (
    CONSENSUS_LABELS,
    CONSENSUS_METHODS,
    LATENT_METHODS,
    Consensus,
    consensus,
)
from scoring.reports.statistics.quality import QualityRows, clinician_quality
from scoring.reports.statistics.table import Array

DEFAULT_CONSENSUS = "reviews"


def consensus_label(method: str) -> str:
    return CONSENSUS_LABELS.get(method, method)


# How a sentence says "against <the truth>".
AGAINST = {
    "reviews": "each review on its own",
    "majority": "the clinicians' majority",
    "adjudicated": "the adjudicated judgements",
    "dawid_skene": "the Dawid–Skene estimate",
    "mace": "the MACE estimate",
}


# --- reads -------------------------------------------------------------------------------------
def adjudicated_judgements(study: Study) -> dict[int, tuple[float, float]]:
    """Each response of a submitted adjudication of the study: its resolved (rank, correct)."""
    return {
        response_id: (
            math.nan if rank is None else float(rank),
            math.nan if correct is None else float(correct),
        )
        for response_id, rank, correct in AdjudicatedJudgement.objects.filter(
            adjudication__study=study, adjudication__status=Adjudication.Status.SUBMITTED
        ).values_list("response_id", "rank", "is_correct")
    }


def adjudication_trail(study: Study) -> list[dict[str, Any]]:
    """One row per adjudicated response of the study: the instruction, the adjudicator's and
    the disagreeing reviewers' pseudonyms, what made it a disagreement, the resolution."""
    adjudications = list(
        Adjudication.objects.filter(study=study)
        .select_related("instruction", "adjudicator")
        .prefetch_related("reviews__assignment__clinician")
        .order_by("instruction__instruction_id")
    )
    resolved: dict[int, list[AdjudicatedJudgement]] = defaultdict(list)
    for j in AdjudicatedJudgement.objects.filter(adjudication__in=adjudications).select_related(
        "response"
    ):
        resolved[j.adjudication_id].append(j)
    rows = []
    for a in adjudications:
        evidence = a.evidence or {}
        base = {
            "adjudication_id": a.pk,
            "instruction_id": a.instruction.instruction_id,
            "adjudicator": a.adjudicator.pseudonym,
            "reviewers": sorted(r.assignment.clinician.pseudonym for r in a.reviews.all()),
            "review_ids": sorted(r.pk for r in a.reviews.all()),
            "status": a.status,
            "submitted_at": a.submitted_at.isoformat() if a.submitted_at else None,
            "split_responses": len(evidence.get("split", [])),
            "min_tau": evidence.get("min_tau"),
            "threshold": evidence.get("threshold"),
            "reason_length": len(a.reason),
        }
        judgements = sorted(resolved.get(a.pk, []), key=lambda j: j.response_id)
        if not judgements:
            rows.append({**base, "response_id": None, "model": None, "rank": None, "correct": None})
        for j in judgements:
            rows.append(
                {
                    **base,
                    "response_id": j.response_id,
                    "model": j.response.model_name,
                    "rank": j.rank,
                    "correct": j.is_correct,
                }
            )
    return rows


def gold_results(study: Study, inputs_pseudonyms: dict[int, str]) -> list[dict[str, Any]]:
    """Each clinician's agreement with the study's gold items (review.selectors.quality reads
    the same figures for the admin's page)."""
    references = gold_references(study, use=GoldItem.Use.GOLD)
    if not references:
        return []
    rows: QualityRows = quality_rows(study, response_ids=set(references))
    figures = clinician_quality(rows, gold=references, seed=study.pk)
    people = dict(User.objects.filter(pk__in=list(figures)).values_list("pk", "pseudonym"))
    out = []
    for clinician, q in sorted(figures.items(), key=lambda kv: people.get(kv[0], "")):
        g, t = q.gold_correct, q.gold_tau
        out.append(
            {
                "clinician": inputs_pseudonyms.get(clinician) or people.get(clinician),
                "gold_items": g.units,
                "verdicts": g.n,
                "agreement": g.estimate,
                "ci_low": g.ci_low,
                "ci_high": g.ci_high,
                "interval": "Wilson",
                "note": g.note,
                "tau": t.estimate,
                "tau_ci_low": t.ci_low,
                "tau_ci_high": t.ci_high,
                "tau_note": t.note,
            }
        )
    return out


# --- the consensus a report analyses -----------------------------------------------------------
def consensus_inputs(inputs: ReportInputs, found: Consensus) -> ReportInputs:
    """The report's inputs with the consensus as its table: one pseudo-review per instruction,
    the metric scores and per-row columns aligned through ``found.source_rows``."""
    rows = found.source_rows
    return dataclasses.replace(
        inputs,
        table=found.table,
        scores=found.aligned(inputs.scores),
        truncated={k: np.asarray(v)[rows] for k, v in inputs.truncated.items()},
        review_ids=sorted({int(i) for i in found.table.review}),
        clinician_pseudonym=[f"consensus:{found.method}"] * len(rows),
        instruction_code=[inputs.instruction_code[int(r)] for r in rows],
        error_tags=[[] for _ in rows],
        patient=[inputs.patient[int(r)] for r in rows] if inputs.patient else [],
    )


def build_consensus(
    inputs: ReportInputs, method: str, adjudicated: dict[int, tuple[float, float]]
) -> Consensus:
    return consensus(inputs.table, method, adjudicated=adjudicated)


def consensus_section(
    inputs: ReportInputs,
    scores: dict[str, Array],
    labels: dict[str, str],
    *,
    chosen: str,
    adjudicated: dict[int, tuple[float, float]],
    boot: dict[str, Any],
    built: dict[str, Consensus] | None = None,
) -> dict[str, Any]:
    """Every consensus side by side: each metric's tau against it, the share of responses it
    judges correct per model, each clinician's estimated reliability (latent-class models),
    and where the metric conclusions differ from the chosen consensus's."""
    built = dict(built or {})
    pseudonym = dict(zip(inputs.table.clinician.tolist(), inputs.clinician_pseudonym, strict=True))
    n_clinicians = len(set(inputs.table.clinician.tolist()))
    methods: dict[str, Any] = {}
    for method in CONSENSUS_METHODS:
        entry: dict[str, Any] = {"label": consensus_label(method), "available": True, "note": ""}
        if method == "adjudicated" and not adjudicated:
            entry.update(available=False, note="no adjudication submitted yet")
            methods[method] = entry
            continue
        if method in LATENT_METHODS and n_clinicians < 2:
            # A latent-class model weighs clinicians by how far they agree with each other:
            # one clinician's reliability is not identified (the fit reports 1.00 or anything).
            entry.update(
                available=False,
                note="needs judgements from at least two clinicians (one clinician's "
                "reliability cannot be estimated)",
            )
            methods[method] = entry
            continue
        try:
            if method == "reviews":
                table, aligned = inputs.table, scores
            else:
                found = built.get(method) or build_consensus(inputs, method, adjudicated)
                built[method] = found
                table, aligned = found.table, found.aligned(scores)
                entry["n_undecided"] = found.n_undecided
                entry["n_adjudicated_instructions"] = found.n_adjudicated_instructions
                if method in LATENT_METHODS:
                    entry["reliability"] = [
                        {
                            "clinician": pseudonym.get(c, str(c)),
                            "correct": r.get("correct"),
                            "ranking": r.get("ranking"),
                        }
                        for c, r in sorted(
                            found.reliability.items(), key=lambda kv: pseudonym.get(kv[0], "")
                        )
                    ]
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
            entry.update(available=False, note=f"could not be estimated ({exc})")
            methods[method] = entry
            continue
        correlations = metric_correlations(table, aligned, **boot)
        entry["metrics"] = [
            {
                "metric": key,
                "label": labels.get(key, key),
                "mean_tau": c["mean_tau"],
                "ci_low": c["ci_low"],
                "ci_high": c["ci_high"],
                "n_reviews": c["n_reviews"],
                "n_clusters": c["n_clusters"],
                "interval_note": c["interval_note"],
            }
            for key, c in correlations.items()
        ]
        correct = np.asarray(table.correct, dtype=float)
        model = np.asarray(table.model).astype(str)
        entry["share_correct"] = {
            m: (
                float(np.nanmean(correct[model == m]))
                if np.any(~np.isnan(correct[model == m]))
                else None
            )
            for m in sorted(set(model.tolist()))
        }
        methods[method] = entry
    return {
        "chosen": chosen,
        "label": consensus_label(chosen),
        "methods": methods,
        "changes": conclusion_changes(methods, chosen),
        "comparison": comparison_basis(methods, chosen, n_clinicians=n_clinicians),
    }


def comparison_basis(methods: dict[str, Any], chosen: str, *, n_clinicians: int) -> str:
    """Whether "no consensus changes a conclusion" can be said: "compared" when at least one
    other consensus was estimated and some interval exists to change; otherwise why not
    ("one clinician": every consensus is that clinician's judgement; "no intervals": too few
    clusters for any interval, so no verdict could change; "nothing else": no other consensus
    could be estimated)."""
    if n_clinicians < 2:
        return "one clinician"
    base = methods.get(chosen) or {}
    rows = base.get("metrics") or []
    if not any(_finite(r.get("ci_low")) and _finite(r.get("ci_high")) for r in rows):
        return "no intervals"
    others = [
        m for m, e in methods.items() if m != chosen and e.get("available") and "metrics" in e
    ]
    return "compared" if others else "nothing else"


def _best(entry: dict[str, Any]) -> str | None:
    rows = [r for r in entry.get("metrics", []) if _finite(r["mean_tau"])]
    return max(rows, key=lambda r: r["mean_tau"])["label"] if rows else None


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _verdict(row: dict[str, Any]) -> str:
    """Whether the metric's tau is positive, negative or undecided under a truth."""
    lo, hi = row.get("ci_low"), row.get("ci_high")
    if isinstance(lo, int | float) and math.isfinite(lo) and lo > 0:
        return "above zero"
    if isinstance(hi, int | float) and math.isfinite(hi) and hi < 0:
        return "below zero"
    return "undecided"


def conclusion_changes(methods: dict[str, Any], chosen: str) -> list[str]:
    """Sentences saying where another consensus would change the report's conclusions about
    the metrics: the best metric, and a metric's tau clearly above or below zero."""
    base = methods.get(chosen) or {}
    if not base.get("available", False) or "metrics" not in base:
        return []
    lines = []
    best = _best(base)
    base_rows = {r["metric"]: r for r in base["metrics"]}
    for method, entry in methods.items():
        if method == chosen or not entry.get("available") or "metrics" not in entry:
            continue
        other_best = _best(entry)
        if other_best != best and other_best is not None:
            lines.append(
                f"Best metric: {best} against {AGAINST[chosen]}, {other_best} against "
                f"{AGAINST[method]}."
            )
        for row in entry["metrics"]:
            mine = base_rows.get(row["metric"])
            if mine is None:
                continue
            a, b = _verdict(mine), _verdict(row)
            if a != b:
                lines.append(
                    f"{row['label']}: tau {a} against {AGAINST[chosen]}, {b} against "
                    f"{AGAINST[method]}."
                )
    return lines


# --- the page ----------------------------------------------------------------------------------
def truth_page(results: dict[str, Any]) -> dict[str, Any]:
    """The consensus section, the adjudication trail and the gold results, formatted."""
    section = results.get("consensus") or {}
    methods = section.get("methods") or {}
    order = [m for m in CONSENSUS_METHODS if m in methods]
    metrics: dict[str, dict[str, str]] = {}
    labels: dict[str, str] = {}
    for method in order:
        for row in methods[method].get("metrics", []):
            labels[row["metric"]] = row["label"]
            metrics.setdefault(row["metric"], {})[method] = interval(
                row["mean_tau"], row["ci_low"], row["ci_high"], note=row.get("interval_note", "")
            )
    return {
        "truth": {
            "chosen": section.get("chosen", DEFAULT_CONSENSUS),
            "label": section.get("label", consensus_label(DEFAULT_CONSENSUS)),
            "columns": [
                {
                    "method": m,
                    "label": methods[m]["label"],
                    "available": methods[m].get("available", False),
                    "note": methods[m].get("note", ""),
                }
                for m in order
            ],
            "rows": [
                {
                    "label": labels[key],
                    "cells": [
                        {"label": methods[m]["label"], "value": metrics[key].get(m, "–")}
                        for m in order
                    ],
                }
                for key in metrics
            ],
            "reliability": [
                (methods[m]["label"], methods[m]["reliability"])
                for m in order
                if methods[m].get("reliability")
            ],
            "changes": section.get("changes", []),
            # Reports computed before this field existed compared whatever they had.
            "comparison": section.get("comparison", "compared"),
            "adjudications": results.get("adjudications") or [],
            "gold": results.get("gold") or [],
            "exclusions": results.get("exclusions") or [],
        }
    }
