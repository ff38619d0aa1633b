"""The report's computation on arrays: every statistic of a correlation report, no database.

``compute_results(table, scores, params)`` is what ``compute.report_compute`` stores and what
``manage.py bench_report`` times; the method is documented in ``templates/scoring/method.html``
and the README. The returned dict is JSON-ready: numpy scalars become Python numbers and every
non-finite float becomes ``None`` (PostgreSQL's jsonb rejects NaN).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from scoring.reports import prediction
from scoring.reports import statistics as st

DEFAULT_CONFIDENCE = 0.95


def clean(value: Any) -> Any:
    """A JSON-safe copy: numpy types to Python, nan/inf to None, tuples to lists."""
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return [clean(v) for v in value.tolist()]
    if isinstance(value, np.bool_ | bool):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        v = float(value)
        return v if math.isfinite(v) else None
    return value


def _counts(table: st.JudgementTable) -> dict[str, int]:
    return {
        "judgements": len(table),
        "reviews": int(np.unique(table.review).shape[0]),
        "instructions": int(np.unique(table.instruction).shape[0]),
        "clinicians": int(np.unique(table.clinician).shape[0]),
        "models": int(np.unique(table.model.astype(str)).shape[0]),
        "responses": int(np.unique(table.response).shape[0]),
    }


def compute_results(
    table: st.JudgementTable,
    scores: Mapping[str, np.ndarray],
    params: Mapping[str, Any],
    labels: Mapping[str, str] | None = None,
    variants: Mapping[str, tuple[str, int | None]] | None = None,
    style: Mapping[str, np.ndarray] | None = None,
    cluster_unit: str = "instruction",
) -> dict[str, Any]:
    """Every statistic of a report. ``params``: ``n_resamples``, ``seed``, ``confidence``,
    ``min_clusters``, ``n_permutations``.

    ``table.cluster`` is the resampling unit (``cluster_unit`` names it: "patient" or
    "instruction"); ``variants`` (model name -> base model, context length) feeds the
    context-length section; ``style`` (per row: the response's length, list items…) the
    style-controlled Bradley-Terry fit.

    All bootstraps share the seed, hence the same cluster draws: the intervals of different
    metrics (and the paired tests) are computed on the same resamples of clusters.
    """
    started = time.perf_counter()
    n_resamples = int(params.get("n_resamples", st.DEFAULT_RESAMPLES))
    seed = int(params.get("seed", 0))
    confidence = float(params.get("confidence", DEFAULT_CONFIDENCE))
    min_clusters = int(params.get("min_clusters", st.MIN_CLUSTERS))
    n_permutations = int(params.get("n_permutations", st.DEFAULT_PERMUTATIONS))
    labels = dict(labels or {})
    boot = {
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "min_clusters": min_clusters,
    }

    significance = st.perm_both_tests(
        table, scores, n_permutations=n_permutations, seed=seed, min_clusters=min_clusters
    )
    cluster_of = {row["metric"]: row["cluster"] for row in significance["clusters"]}
    loo = st.leave_one_clinician_out(table, scores, **boot)
    correlation = []
    correlations = st.metric_correlations(table, scores, **boot)
    for key, values in scores.items():
        corr = correlations[key]
        acc = st.pairwise_accuracy(table, values, **boot)
        acc23 = st.tie_calibrated_accuracy(table, values, **boot)
        system = st.system_level_tau(table, values)
        place = loo["metrics"].get(key, {})
        correlation.append(
            {
                "metric": key,
                "label": labels.get(key, key),
                "mean_tau": corr["mean_tau"],
                "ci_low": corr["ci_low"],
                "ci_high": corr["ci_high"],
                "tau_variant": "tau-b, per review, averaged",
                "n_reviews": corr["n_reviews"],
                "n_skipped": corr["n_skipped"],
                "n_instructions": corr["n_instructions"],
                "n_clusters": corr["n_clusters"],
                "interval_note": corr["interval_note"],
                "pairwise_accuracy": acc["accuracy"],
                "pairwise_ci_low": acc["ci_low"],
                "pairwise_ci_high": acc["ci_high"],
                "pairwise_level": "pooled over response pairs, metric ties half",
                "n_pairs": acc["n_pairs"],
                "n_metric_ties": acc["n_metric_ties"],
                "acc23": acc23["accuracy"],
                "acc23_ci_low": acc23["ci_low"],
                "acc23_ci_high": acc23["ci_high"],
                "acc23_epsilon": acc23["epsilon"],
                "acc23_level": "per review, averaged; tie threshold calibrated",
                "system_tau": system["tau"],
                "system_p_value": system["p_value"],
                "system_level": "tau-b over model means",
                "n_models": system["n_models"],
                "n_scored": int(np.count_nonzero(~np.isnan(np.asarray(values, dtype=float)))),
                "system_mean_score": system["mean_score"],
                "significance_cluster": cluster_of.get(key),
                "loo_tau": place.get("mean_tau"),
                "loo_percentile": place.get("percentile"),
                "loo_share_beating": place.get("share_beating"),
                "loo_n_at_most": place.get("n_at_most"),
                "loo_percentile_ci": place.get("percentile_ci"),
            }
        )

    paired = st.paired_bootstrap_tests(table, scores, **boot)

    models, matrix = st.win_rate_matrix(table)
    breakdowns: dict[str, Any] = {}
    for by in ("category", "specialty"):
        groups = {}
        for value, per_metric in st.breakdown(
            table, dict(scores), by, st.metric_correlations, **boot
        ).items():
            mask = np.asarray(getattr(table, by)).astype(str) == value
            sub = table.subset(mask)
            groups[value] = {
                "n_reviews": int(np.unique(table.review[mask]).shape[0]),
                "n_instructions": int(np.unique(table.instruction[mask]).shape[0]),
                "n_clusters": int(np.unique(sub.clusters).shape[0]),
                "metrics": per_metric,
                "leave_one_out": st.leave_one_clinician_out(
                    sub, {k: np.asarray(v)[mask] for k, v in scores.items()}, **boot
                ),
            }
        breakdowns[by] = groups

    leaderboard, bt_info = st.leaderboard_fit(table, **boot)
    results = {
        "metrics": [{"key": k, "label": labels.get(k, k)} for k in scores],
        "counts": _counts(table),
        "clustering": {
            "unit": cluster_unit,
            "interval_method": st.INTERVAL_METHOD,
            "n_clusters": int(np.unique(table.clusters).shape[0]),
            "min_clusters": min_clusters,
        },
        "correlation": correlation,
        "paired_tests": paired,
        "significance": significance,
        "leave_one_out": loo,
        "human_ceiling": st.human_ceiling(table, **boot),
        "leaderboard": leaderboard,
        "bradley_terry": bt_info,
        "style_control": (
            st.style_controlled_bradley_terry(
                table, style, confidence=confidence, min_clusters=min_clusters
            )
            if style
            else None
        ),
        "win_rate": {"models": models, "matrix": matrix},
        "position_bias": st.position_bias(table, **boot),
        "context_length": st.context_length_analysis(table, dict(variants or {}), **boot),
        "breakdowns": breakdowns,
        "parameters": {**boot, "n_permutations": n_permutations, "cluster_unit": cluster_unit},
    }
    results["seconds"] = time.perf_counter() - started
    return clean(results)


def prediction_powered_results(
    table: st.JudgementTable, responses: Any, **kwargs: Any
) -> dict[str, Any]:
    """The prediction-powered section (scoring.reports.prediction.section), JSON-ready."""

    return clean(prediction.section(table, responses, **kwargs))


def response_rows(
    table: st.JudgementTable,
    scores: Mapping[str, np.ndarray],
    *,
    clinician_pseudonym: list[str],
    instruction_code: list[str],
    error_tags: list[list[str]],
    simulated_review_ids: Iterable[int] = (),
    truncated: Mapping[str, np.ndarray] | None = None,
    patient: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The per-response table: one row per judgement, ids and numbers only (never any text).

    ``simulated`` marks the rows of simulated reviews (the demo's "Simulated clinician" accounts).
    """
    simulated = {int(r) for r in simulated_review_ids}
    rank = table.rank.astype(float)
    correct = table.correct.astype(float)
    rows = []
    for i in range(len(table)):
        row = {
            "review_id": int(table.review[i]),
            "instruction_id": instruction_code[i],
            "patient": patient[i] if patient is not None else None,
            "cluster": str(table.cluster_keys[i]),
            "category": str(table.category[i]),
            "specialty": str(table.specialty[i]),
            "clinician": clinician_pseudonym[i],
            "model": str(table.model[i]),
            "response_id": int(table.response[i]),
            "shown_position": int(table.position[i]),
            "rank": None if np.isnan(rank[i]) else int(rank[i]),
            "correct": None if np.isnan(correct[i]) else bool(correct[i]),
            "error_tags": list(error_tags[i]),
            "simulated": int(table.review[i]) in simulated,
        }
        for key, values in scores.items():
            row[f"score_{key}"] = values[i]
        for key, cut in (truncated or {}).items():
            row[f"truncated_{key}"] = bool(cut[i])
        rows.append(row)
    return clean(rows)


# --- evaluator provenance ----------------------------------------------------------------------
# What a reader needs to identify each metric's evaluator (HELM asks reports to "identify the
# active evaluator and model version"). Read from the MetricConfig identity, whatever backend
# wrote it: each field lists the places it may be recorded, then a key name searched anywhere.
NOT_RECORDED = "not recorded"
NOT_APPLICABLE = "not applicable"
PROVENANCE_FIELDS: dict[str, tuple[tuple[tuple[str, ...], ...], str | None]] = {
    "model": ((("model", "id"), ("checkpoint", "id"), ("options", "model"), ("model",)), None),
    "weights_sha256": (
        (("model", "weights_sha256"), ("model", "files"), ("checkpoint", "sha256")),
        "weights_sha256",
    ),
    "layer": ((("options", "num_layers"), ("options", "layer")), "num_layers"),
    "idf": ((("options", "idf"),), "idf"),
    "baseline_rescaling": ((("options", "rescale_with_baseline"),), "rescale_with_baseline"),
    "tokenizer": ((("options", "tokenizer"), ("model", "tokenizer")), "tokenizer"),
    "stemming": ((("options", "use_stemmer"), ("options", "stemming")), "use_stemmer"),
    "sacrebleu_signature": ((("signature",), ("options", "signature")), "signature"),
    "reference_aggregation": ((("reference_aggregate",),), "reference_aggregate"),
    "max_input_tokens": ((("options", "max_length"), ("options", "max_tokens")), "max_length"),
    "library_versions": ((("versions",),), "versions"),
}


def _at(identity: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = identity
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _search(node: Any, key: str) -> Any:
    if isinstance(node, Mapping):
        if key in node and node[key] is not None:
            return node[key]
        for k, v in node.items():
            if k == "location":  # machine-specific paths are not provenance
                continue
            found = _search(v, key)
            if found is not None:
                return found
    return None


def metric_provenance(
    identity: Mapping[str, Any], recorded: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Every provenance field of one metric configuration; ``"not recorded"`` when absent.

    ``recorded`` is the backend's flat ``MetricConfig.provenance`` (its keys are documented on
    the model); it wins over what can be dug out of the identity."""
    out: dict[str, Any] = {}
    for field, (paths, key) in PROVENANCE_FIELDS.items():
        value = (recorded or {}).get(field)
        for path in paths if value is None else ():
            value = _at(identity, path)
            if value is not None:
                break
        if value is None and key is not None:
            value = _search(identity, key)
        if isinstance(value, Mapping) and field == "model":
            value = value.get("id") or value.get("name") or value.get("source")
        out[field] = NOT_RECORDED if value is None else clean(value)
    return out
