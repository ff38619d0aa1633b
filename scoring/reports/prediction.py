"""The predictor a report leans on, and what it is worth: prediction-powered estimates and the
reviews still needed (statistics in ``scoring.reports.statistics.ppi`` and ``.power``).

A predictor is a column of scores on every response of the study: a metric, the LLM jury, or
the metric learned from these clinicians (cross-fitted by patient folds, so each reviewed
instruction is predicted by a model that never saw its patient). ``auto`` takes the first
available in a fixed order (the jury, then the learned metric, then COMET, BERTScore, METEOR,
ROUGE-L, chrF, BLEU), never the one that happens to look best on these data: choosing the
predictor by its fit to the same judgements would spend the evidence twice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from review.selectors.studies import studies_of, study_latest_reviewed
from scoring.reports import statistics as st
from scoring.reports.page import power_rows
from scoring.reports.selectors import StudyResponses, report_inputs, study_responses
from scoring.reports.statistics.power import DEFAULT_MARGIN, DEFAULT_POWER, power_analysis
from scoring.reports.statistics.ppi import Predictions, estimate_targets
from scoring.reports.statistics.table import Array

AUTO = "auto"
NONE = "none"
LEARNED = "learned"
PREFERENCE = ("jury", LEARNED, "comet", "bertscore", "meteor", "rougeL", "chrf", "bleu")


class PredictorError(ValueError):
    """A predictor that the data do not have; the message is for the user."""


def choose_predictor(
    requested: str, metrics: list[dict[str, Any]], *, learned: bool = False
) -> str | None:
    """The metric key of the predictor to use, ``None`` for none (asked, or nothing scored)."""
    requested = (requested or AUTO).strip()
    if requested == NONE:
        return None
    keys = [str(m["key"]) for m in metrics]
    if requested == AUTO:
        for backend in PREFERENCE:
            if backend == LEARNED:
                if learned:
                    return LEARNED
                continue
            for m in metrics:
                if m.get("backend") == backend:
                    return str(m["key"])
        return None
    if requested == LEARNED:
        if not learned:
            raise PredictorError("the learned metric is a predictor only when the report fits it")
        return LEARNED
    if requested not in keys:
        raise PredictorError(
            f"no metric {requested!r} is scored here; choose from {', '.join(keys) or 'none'}"
        )
    return requested


def predictions(
    responses: StudyResponses,
    key: str,
    unit: str,
    *,
    values: Array | None = None,
    folds: Array | None = None,
    fold: Array | None = None,
) -> Predictions:
    """The predictor on every response of the study, each response in its resampling unit
    (``unit``: the report's, "patient" or "instruction")."""
    clusters, _ = st.choose_clusters(
        np.asarray(responses.instruction_code, dtype=object).astype(str),
        np.asarray(responses.patient, dtype=object).astype(str),
        unit,
    )
    return Predictions(
        instruction=np.asarray(responses.instruction_ids, dtype=np.int64),
        cluster=clusters,
        model=np.asarray(responses.model, dtype=object),
        value=np.asarray(responses.scores[key] if values is None else values, dtype=float),
        folds=folds,
        fold=fold,
    )


def mean_taus(table: st.JudgementTable, scores: Mapping[str, Array]) -> dict[str, float]:
    """Each metric's mean per-review tau-b (no interval: for picking the default pair)."""
    out = {}
    for key, values in scores.items():
        taus = st.per_review_tau(table, values)
        out[key] = float(taus.tau.mean()) if len(taus) else math.nan
    return out


def default_pair(taus: Mapping[str, float], exclude: str | None = None) -> tuple[str | None, ...]:
    """The two metrics that agree best with the clinicians so far (the comparison a reader asks
    about first); the predictor itself is left out of the pair when others exist."""
    ranked = sorted(
        (k for k, v in taus.items() if math.isfinite(v) and k != exclude),
        key=lambda k: -taus[k],
    )
    if len(ranked) < 2 and exclude is not None and exclude in taus:
        ranked.append(exclude)
    return (ranked[0] if ranked else None, ranked[1] if len(ranked) > 1 else None)


def section(
    table: st.JudgementTable,
    responses: StudyResponses,
    *,
    predictor: str | None,
    label: str,
    preds: Predictions | None,
    table_scores: Mapping[str, Array],
    confidence: float,
    metric_a: str | None = None,
    metric_b: str | None = None,
    margin: float = DEFAULT_MARGIN,
    power: float = DEFAULT_POWER,
    estimates: bool = True,
    unit: str = "unit",
    min_clusters: int = st.MIN_CLUSTERS,
) -> dict[str, Any]:
    """The report's prediction-powered section: the predictor, its estimates, the plan."""
    out: dict[str, Any] = {
        "predictor": predictor,
        "predictor_label": label,
        "n_study_responses": len(responses.response_ids),
        "estimates": None,
        "power": None,
    }
    if preds is None or len(table) == 0 or not responses.response_ids:
        return out
    if estimates:
        out["estimates"] = estimate_targets(table, preds, confidence, min_clusters)
    if metric_a is None and metric_b is None:
        metric_a, metric_b = default_pair(mean_taus(table, table_scores), exclude=predictor)
    out["power"] = power_analysis(
        table,
        preds,
        table_scores=table_scores,
        prediction_scores=responses.scores,
        metric_a=metric_a,
        metric_b=metric_b,
        margin=margin,
        confidence=confidence,
        power=power,
        unit_name=unit,
    )
    return out


def study_power(
    *,
    dataset: Any,
    predictor: str = AUTO,
    metric_a: str | None = None,
    metric_b: str | None = None,
    margin: float = DEFAULT_MARGIN,
    confidence: float = 0.95,
    study_id: int | None = None,
) -> dict[str, Any]:
    """The admin's power calculator for a study of the dataset (``study_id``, else the latest
    round with submitted reviews), from the reviews so far
    (the app's reviews, clustered as a report does by default): the targets' plans with and
    without the predictor, and the choices the page offers. Numbers only; about 15 queries."""

    rounds = list(studies_of(dataset))
    chosen = [s for s in rounds if s.pk == study_id]
    study = chosen[0] if chosen else study_latest_reviewed(dataset)
    out: dict[str, Any] = {
        "study": study,
        "rounds": rounds,
        "design": getattr(study, "assignment_mode", "uniform"),
        "predictor": None,
        "predictor_label": "",
        "metrics": [],
        "rows": [],
        "error": "",
        "margin": margin,
        "margin_points": f"{margin * 100:g}",
        "metric_a": metric_a,
        "metric_b": metric_b,
    }
    if study is None:
        out["error"] = "this dataset has no study yet"
        return out
    inputs = report_inputs(dataset=dataset, study=study)
    out["metrics"] = [{"key": m["key"], "label": m["label"]} for m in inputs.metrics]
    if len(inputs.table) == 0:
        out["error"] = "no submitted reviews yet"
        return out
    try:
        key = choose_predictor(predictor, inputs.metrics)
    except PredictorError as exc:
        out["error"] = str(exc)
        return out
    keys, unit = st.choose_clusters(
        np.asarray(inputs.instruction_code), np.asarray(inputs.patient), "auto"
    )
    table = inputs.table.with_clusters(keys)
    responses = study_responses(dataset=dataset, study=study)
    known = set(inputs.scores)
    if metric_a not in known or metric_b not in known:
        metric_a = metric_b = None
    labels = {m["key"]: m["label"] for m in inputs.metrics}
    # With no predictor the plan still gives the clinicians-only counts: a constant predictor
    # has lam = 0, so "with the predictor" is then the same as without.
    constant = np.zeros(len(responses.response_ids))
    result = section(
        table,
        responses,
        predictor=key,
        label=labels.get(key or "", key or ""),
        preds=predictions(responses, key or "", unit, values=None if key else constant),
        table_scores=inputs.scores,
        confidence=confidence,
        metric_a=metric_a,
        metric_b=metric_b,
        margin=margin,
        estimates=False,
        unit=unit,
    )
    plan = result.get("power") or {}
    out.update(
        predictor=key,
        predictor_label=result["predictor_label"],
        rows=power_rows(plan),
        metric_a=plan.get("metric_a"),
        metric_b=plan.get("metric_b"),
        unit=unit,
        reviews=plan.get("reviews"),
        n_units=plan.get("n_units"),
        n_labelled_units=plan.get("n_labelled_units"),
    )
    if key is None:
        out["error"] = "no metric is scored on this study's responses to serve as a predictor"
    return out
