"""The exportable tables of a report (correlation, leaderboard, per-response) as rows, CSV, JSON.

Exports read the stored snapshot (``report.results``), never the live database, so a download
reproduces exactly what the report page shows. They carry ids and numbers only: pseudonymous
clinician ids (``User.pseudonym``), the dataset's instruction ids, model names, error-tag slugs;
never names, emails, record text, questions or response text. Every caller audits the export
with ``services.report_export_record`` before rows leave the server.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from review.csv_safety import csv_safe_cell
from scoring.generation.provenance import GENERATION_COLUMNS
from scoring.models import CorrelationReport
from scoring.reports.analysis import NOT_APPLICABLE, NOT_RECORDED

TABLES = (
    "correlation",
    "leaderboard",
    "responses",
    "metrics",
    "significance",
    "paired_tests",
    "human_ceiling",
    "leave_one_out",
    "position_bias",
    "context_length",
    "breakdowns",
    "style_control",
    "reviews",
    "variants",
    "rubric_scores",
    "rubric_agreement",
    "prediction_powered",
    "power",
    "consensus",
    "reliability",
    "adjudications",
    "gold",
)
FORMATS = ("csv", "json")
TABLE_LABELS = {
    "correlation": "Correlation per metric",
    "leaderboard": "Leaderboard",
    "responses": "Per response",
    "metrics": "Metric provenance",
    "significance": "Significance (PERM-BOTH)",
    "paired_tests": "Paired bootstrap tests",
    "human_ceiling": "Human ceiling",
    "leave_one_out": "Leave one clinician out",
    "position_bias": "Position bias",
    "context_length": "Context length",
    "breakdowns": "Breakdowns",
    "style_control": "Style control",
    "reviews": "Reviews (incl. left out)",
    "variants": "Model variants",
    "rubric_scores": "Rubric scores (clinicians and graders)",
    "rubric_agreement": "Rubric grader against clinicians",
    "prediction_powered": "Prediction-powered estimates",
    "power": "Reviews still needed",
    "consensus": "Metrics against each consensus",
    "reliability": "Clinicians' estimated reliability (latent-class)",
    "adjudications": "Adjudication trail",
    "gold": "Agreement with gold, per clinician",
}

CORRELATION_COLUMNS = [
    "metric",
    "label",
    "tau_variant",
    "mean_tau",
    "ci_low",
    "ci_high",
    "interval_note",
    "n_reviews",
    "n_skipped",
    "n_instructions",
    "n_clusters",
    "significance_cluster",
    "acc23",
    "acc23_ci_low",
    "acc23_ci_high",
    "acc23_epsilon",
    "acc23_level",
    "pairwise_accuracy",
    "pairwise_ci_low",
    "pairwise_ci_high",
    "pairwise_level",
    "n_pairs",
    "n_metric_ties",
    "system_tau",
    "system_p_value",
    "system_level",
    "n_models",
    "n_scored",
    "loo_tau",
    "loo_percentile",
    "loo_share_beating",
]
LEADERBOARD_COLUMNS = [
    "model",
    "n",
    "n_correct_known",
    "share_correct",
    "correct_ci_low",
    "correct_ci_high",
    "mean_rank",
    "rank_ci_low",
    "rank_ci_high",
    "bt_strength",
    "bt_ci_low",
    "bt_ci_high",
    "n_comparisons",
]
RESPONSE_COLUMNS = [
    "review_id",
    "instruction_id",
    "patient",
    "cluster",
    "category",
    "specialty",
    "clinician",
    "model",
    "response_id",
    "shown_position",
    "rank",
    "correct",
    "error_tags",
    "simulated",
]
# Per metric: the evaluator's provenance (see analysis.PROVENANCE_FIELDS) and truncation.
PROVENANCE_COLUMNS = [
    "model",
    "weights_sha256",
    "layer",
    "idf",
    "baseline_rescaling",
    "tokenizer",
    "stemming",
    "sacrebleu_signature",
    "reference_aggregation",
    "max_input_tokens",
    "library_versions",
    "n_truncated",
    "truncated_excluded",
]
METRICS_COLUMNS = ["metric", "label", "config_id", "backend", "identity_hash", *PROVENANCE_COLUMNS]
# Every CSV row carries what a reader needs to cite or recompute it, as the JSON document does:
# the report, its seed and resampling, the unit resampled, and how many reviews were simulated.
CONTEXT_COLUMNS = [
    "report",
    "seed",
    "n_resamples",
    "confidence",
    "cluster_unit",
    "min_clusters",
    "simulated_reviews",
    "consensus",
]
# The report's other sections, each a table of its own (the page shows them; a rerun needs them).
SECTION_COLUMNS: dict[str, list[str]] = {
    "significance": [
        "metric_a", "metric_b", "better", "tau_a_common", "tau_b_common", "difference",
        "p_value", "p_at_floor", "n_responses", "n_responses_excluded", "cluster_a",
        "cluster_b", "test", "n_permutations", "alpha", "p_two_sided", "permutation_unit",
        "n_common_responses",
    ],
    "paired_tests": [
        "metric_a", "metric_b", "mean_tau_a", "mean_tau_b", "difference", "ci_low", "ci_high",
        "p_value", "p_at_floor", "test", "n_reviews", "n_instructions", "n_clusters",
        "n_responses_excluded", "interval_note",
    ],
    "human_ceiling": [
        "variant", "level", "mean_tau", "ci_low", "ci_high", "interval_note", "n_pairs",
        "n_skipped_pairs", "n_instructions", "n_clusters", "alpha", "n_units",
    ],
    "leave_one_out": [
        "part", "metric", "clinician", "agreement", "mean_tau", "percentile", "share_beating",
        "at_least_median", "n_clinicians", "n_at_most", "n_beaten", "percentile_ci",
        "share_beating_ci", "n_clusters", "interval_note",
    ],
    "position_bias": [
        "tau", "ci_low", "ci_high", "p_value", "p_at_floor", "interval_note", "n", "n_reviews",
        "n_skipped", "n_instructions", "n_clusters", "positions", "mean_rank", "count", "method",
    ],
    "context_length": [
        "part", "base_model", "context_length", "models", "long", "short", "n", "n_reviews",
        "n_instructions", "n_clusters", "share_correct", "correct_ci_low", "correct_ci_high",
        "mean_rank", "correct_difference", "correct_difference_ci_low",
        "correct_difference_ci_high", "correct_difference_p_value", "only_long_correct",
        "only_short_correct", "mcnemar_p_value", "mcnemar_note", "rank_difference",
        "rank_difference_ci_low", "rank_difference_ci_high", "test",
    ],
    "breakdowns": [
        "by", "group", "metric", "mean_tau", "ci_low", "ci_high", "interval_note", "n_reviews",
        "n_skipped", "n_clusters", "loo_percentile",
    ],
    "style_control": [
        "part", "model", "feature", "fit", "estimate", "ci_low", "ci_high", "n_games",
        "n_clusters",
    ],
    "reviews": [
        "review_id", "instruction_id", "patient", "cluster", "clinician", "simulated",
        "n_judgements", "distinct_ranks", "skipped", "excluded", "learned_fold",
    ],
    "variants": ["model", "base_model", "context_length"],
    "rubric_scores": [
        "grader", "grader_label", "part", "rater", "model", "mean", "ci_low", "ci_high",
        "n_responses", "n_clusters", "note",
        "healthbench_mean", "healthbench_ci_low", "healthbench_ci_high",
        "n_clinician_responses", "n_verdicts", "n_missing", "missing_share", "bound_low",
        "bound_high", "bound_n_responses", "bound_clinicians",
    ],
    "rubric_agreement": [
        "grader", "grader_label", "group", "row", "macro_f1", "kappa", "kappa_ci_low",
        "kappa_ci_high", "n_items",
        "loo_clinician_f1", "loo_grader_f1", "loo_items", "grader_f1", "grader_ci_low",
        "grader_ci_high", "clinicians_f1", "clinicians_ci_low", "clinicians_ci_high",
        "difference", "difference_ci_low", "difference_ci_high", "n_clusters",
        "missing_grader_verdicts", "verdict",
        "pairwise_f1", "pairwise_items", "pairwise_grader_f1", "pairwise_grader_ci_low",
        "pairwise_grader_ci_high", "pairwise_clinicians_f1", "pairwise_clinicians_ci_low",
        "pairwise_clinicians_ci_high", "pairwise_difference", "pairwise_difference_ci_low",
        "pairwise_difference_ci_high", "no_verdict",
    ],
    "prediction_powered": [
        "target", "model", "versus", "predictor", "estimate", "ci_low", "ci_high", "se",
        "classical", "classical_ci_low", "classical_ci_high", "classical_se", "lam", "n",
        "n_unlabelled", "effective_n", "effective_reviews", "width_ratio", "method",
    ],
    "power": [
        "target", "label", "predictor", "current", "labelled_units", "total_units",
        "reviews_per_unit", "classical_units", "classical_more_reviews",
        "classical_beyond_study", "ppi_units", "ppi_more_reviews", "ppi_beyond_study",
        "confidence", "power", "margin", "metric_a", "metric_b",
    ],
    "consensus": [
        "truth", "truth_label", "chosen", "available", "note", "metric", "label", "mean_tau",
        "ci_low", "ci_high", "n_reviews", "n_clusters", "interval_note", "n_undecided",
        "n_adjudicated_instructions",
    ],
    "reliability": ["truth", "clinician", "correct", "ranking"],
    "adjudications": [
        "adjudication_id", "instruction_id", "adjudicator", "reviewers", "review_ids", "status",
        "submitted_at", "split_responses", "min_tau", "threshold", "response_id", "model", "rank",
        "correct", "reason_length",
    ],
    "gold": [
        "clinician", "gold_items", "verdicts", "agreement", "ci_low", "ci_high", "interval",
        "note", "tau", "tau_ci_low", "tau_ci_high", "tau_note",
    ],
}  # fmt: skip


def columns(report: CorrelationReport, table: str) -> list[str]:
    if table == "correlation":
        return CORRELATION_COLUMNS + PROVENANCE_COLUMNS
    if table == "leaderboard":
        return LEADERBOARD_COLUMNS
    if table == "metrics":
        return METRICS_COLUMNS
    if table in SECTION_COLUMNS:
        return SECTION_COLUMNS[table]
    if table == "responses":
        keys = [m["key"] for m in report.results.get("metrics", [])]
        return (
            RESPONSE_COLUMNS
            + GENERATION_COLUMNS  # how the response was generated (scoring.generation.provenance)
            + [f"score_{k}" for k in keys]
            + [f"truncated_{k}" for k in keys]
        )
    raise ValueError(f"unknown table {table!r}; choose from {', '.join(TABLES)}")


def csv_columns(report: CorrelationReport, table: str) -> list[str]:
    return columns(report, table) + CONTEXT_COLUMNS


def _context(report: CorrelationReport) -> dict[str, Any]:
    clustering = report.results.get("clustering") or {}
    return {
        "report": report.pk,
        "seed": report.parameters.get("seed"),
        "n_resamples": report.parameters.get("n_resamples"),
        "confidence": report.parameters.get("confidence"),
        "cluster_unit": clustering.get("unit", "instruction"),
        "min_clusters": clustering.get("min_clusters"),
        "simulated_reviews": report.provenance.get("counts", {}).get("reviews_simulated", 0),
        # The truth the report scored metrics against (reports made before there was a choice
        # scored each review on its own).
        "consensus": report.parameters.get("consensus", "reviews"),
    }


# Which provenance fields mean something for each kind of evaluator: BLEU has no model to
# name, BERTScore no sacreBLEU signature. Elsewhere the page and exports say "not applicable",
# so "not recorded" keeps meaning a gap. An unknown backend claims every field.
_LEXICAL = {"sacrebleu_signature", "reference_aggregation", "library_versions"}
_MODEL = {"model", "weights_sha256", "tokenizer", "max_input_tokens", "library_versions"}
APPLICABLE: dict[str, set[str]] = {
    "bleu": _LEXICAL,
    "chrf": _LEXICAL,
    "rougeL": {"tokenizer", "stemming", "reference_aggregation", "library_versions"},
    "meteor": {"stemming", "reference_aggregation", "library_versions"},
    "bertscore": _MODEL | {"layer", "idf", "baseline_rescaling", "reference_aggregation"},
    "comet": _MODEL | {"reference_aggregation"},
    "jury": _MODEL,
    "jury-judge": _MODEL,
    "learned": {"model", "weights_sha256", "library_versions"},
}
ALWAYS = {"n_truncated", "truncated_excluded"}


def metric_provenance(report: CorrelationReport) -> list[dict[str, Any]]:
    """One row per metric: its evaluator's provenance; "not applicable" for a field that does
    not apply to its kind of evaluator, "not recorded" for anything else missing (also for
    every field of a report computed before provenance was stored)."""
    stored = {p["key"]: p for p in report.results.get("metric_provenance", [])}
    configs = {c.get("key"): c for c in report.provenance.get("metric_configs", [])}
    out = []
    for m in report.results.get("metrics", []):
        p = stored.get(m["key"], {})
        c = configs.get(m["key"], {})
        row = {
            "metric": m["key"],
            "label": m.get("label", m["key"]),
            "config_id": p.get("config_id", c.get("config_id")),
            "backend": p.get("backend", c.get("backend")),
            "identity_hash": p.get("identity_hash", c.get("identity_hash")),
        }
        applies = APPLICABLE.get(str(row["backend"]), set(PROVENANCE_COLUMNS)) | ALWAYS
        for col in PROVENANCE_COLUMNS:
            value = p.get(col, NOT_RECORDED)
            row[col] = value if col in applies or value != NOT_RECORDED else NOT_APPLICABLE
        out.append(row)
    return out


def _section_rows(report: CorrelationReport, table: str) -> list[dict[str, Any]]:
    """The rows of one of the report's other sections, from its stored results."""
    results = report.results
    if table == "significance":
        section = results.get("significance") or {}
        cluster = {c["metric"]: c["cluster"] for c in section.get("clusters", [])}
        keys = ("test", "n_permutations", "alpha", "permutation_unit", "n_common_responses")
        common = {k: section.get(k) for k in keys}
        return [
            {**t, **common, "cluster_a": cluster.get(t["metric_a"]),
             "cluster_b": cluster.get(t["metric_b"])}
            for t in section.get("pairs", [])
        ]  # fmt: skip
    if table == "paired_tests":
        return list(results.get("paired_tests", []))
    if table in ("human_ceiling", "position_bias"):
        section = results.get(table)
        return [section] if section else []
    if table == "leave_one_out":
        section = results.get("leave_one_out") or {}
        out = [{"part": "clinician", **c} for c in section.get("clinicians", [])]
        out += [{"part": "metric", "metric": k, **m} for k, m in section.get("metrics", {}).items()]
        return out
    if table == "context_length":
        section = results.get("context_length") or {}
        test = section.get("test")
        return [{"part": "cell", "test": test, **c} for c in section.get("cells", [])] + [
            {"part": "comparison", "test": test, **c} for c in section.get("comparisons", [])
        ]
    if table == "breakdowns":
        out = []
        for by, groups in (results.get("breakdowns") or {}).items():
            for group, data in groups.items():
                loo = (data.get("leave_one_out") or {}).get("metrics", {})
                for metric, m in data.get("metrics", {}).items():
                    out.append(
                        {"by": by, "group": group, "metric": metric, **m,
                         "loo_percentile": loo.get(metric, {}).get("percentile")}
                    )  # fmt: skip
        return out
    if table == "style_control":
        section = results.get("style_control") or {}
        out = []
        for fit in ("plain", "controlled"):
            part = section.get(fit) or {}
            for model, value in (part.get("strength") or {}).items():
                out.append(
                    {"part": "model", "model": model, "fit": fit, "estimate": value,
                     "ci_low": part["ci_low"].get(model), "ci_high": part["ci_high"].get(model),
                     "n_games": section.get("n_games"), "n_clusters": section.get("n_clusters")}
                )  # fmt: skip
        for feature, c in (section.get("style_coefficients") or {}).items():
            out.append(
                {"part": "style", "feature": feature, "fit": "controlled",
                 "estimate": c["coefficient"], "ci_low": c["ci_low"], "ci_high": c["ci_high"],
                 "n_games": section.get("n_games"), "n_clusters": section.get("n_clusters")}
            )  # fmt: skip
        return out
    if table in ("prediction_powered", "power"):
        section = results.get("prediction_powered") or {}
        predictor = {"predictor": section.get("predictor")}
        if table == "prediction_powered":
            return [{**r, **predictor} for r in (section.get("estimates") or {}).get("rows", [])]
        plan = section.get("power") or {}
        common = {k: plan.get(k) for k in ("confidence", "power", "margin", "metric_a", "metric_b")}
        return [{**t, **predictor, **common} for t in plan.get("targets", [])]
    if table == "reviews":
        return _review_rows(report)
    if table in ("consensus", "reliability"):
        return _consensus_rows(report, table)
    if table in ("adjudications", "gold"):
        return list(results.get(table) or [])
    if table == "rubric_scores":
        return _rubric_score_rows(results.get("rubrics") or {})
    if table == "rubric_agreement":
        return _rubric_agreement_rows(results.get("rubrics") or {})
    if table == "variants":
        return [
            {"model": name, **v}
            for name, v in (report.provenance.get("model_variants") or {}).items()
        ]
    raise ValueError(f"unknown table {table!r}")


def _consensus_rows(report: CorrelationReport, table: str) -> list[dict[str, Any]]:
    """Every metric against every consensus (``consensus``), or each clinician's estimated
    reliability under each latent-class model (``reliability``)."""
    section = report.results.get("consensus") or {}
    chosen = section.get("chosen")
    out: list[dict[str, Any]] = []
    for method, entry in (section.get("methods") or {}).items():
        if table == "reliability":
            out += [{"truth": method, **row} for row in entry.get("reliability", [])]
            continue
        base = {
            "truth": method,
            "truth_label": entry.get("label"),
            "chosen": method == chosen,
            "available": entry.get("available"),
            "note": entry.get("note", ""),
            "n_undecided": entry.get("n_undecided"),
            "n_adjudicated_instructions": entry.get("n_adjudicated_instructions"),
        }
        rows = entry.get("metrics") or []
        out += [{**base, **row} for row in rows] if rows else [base]
    return out


def _rubric_score_rows(section: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model: the clinicians' and each grader's rubric scores, overall and per tag."""
    out: list[dict[str, Any]] = []

    def add(grader: Any, label: str, table: dict[str, Any], raters: tuple[str, ...]) -> None:
        parts = [("overall", table.get("overall") or {})] + [
            (f"tag:{t}", v) for t, v in sorted((table.get("per_tag") or {}).items())
        ]
        for part, sides in parts:
            for rater in raters:
                for row in sides.get(rater, []):
                    out.append(
                        {"grader": grader, "grader_label": label, "part": part, "rater": rater,
                         **row}
                    )  # fmt: skip

    for g in section.get("graders", []):
        add(g["config_id"], g["label"], g.get("scores") or {}, ("clinicians", "grader"))
    if not section.get("graders") and section.get("clinicians"):
        add(None, "", section["clinicians"], ("clinicians",))
    return out


def _rubric_agreement_rows(section: dict[str, Any]) -> list[dict[str, Any]]:
    """Each grader against the clinicians: a pooled row and a row per clinician, per group."""
    out: list[dict[str, Any]] = []
    for g in section.get("graders", []):
        agreement = g.get("agreement") or {}
        groups = [("overall", agreement.get("overall"))]
        groups += [(f"tag:{t}", a) for t, a in sorted((agreement.get("per_tag") or {}).items())]
        groups += [
            (f"version:{v}", a) for v, a in sorted((agreement.get("per_version") or {}).items())
        ]
        for group, a in groups:
            if not a:
                continue
            loo = a.get("leave_one_out") or {}
            pairwise = a.get("pairwise") or {}
            direct = a.get("grader_vs_clinicians") or {}
            base = {"grader": g["config_id"], "grader_label": g["label"], "group": group}
            pairwise_columns = {
                f"pairwise_{key}{end}": (pairwise.get(f"{key}_ci") or [None, None])[i]
                for key in ("grader", "clinicians", "difference")
                for i, end in enumerate(("_ci_low", "_ci_high"))
            } | {
                "pairwise_grader_f1": pairwise.get("grader_f1"),
                "pairwise_clinicians_f1": pairwise.get("clinicians_f1"),
                "pairwise_difference": pairwise.get("difference"),
                "pairwise_items": pairwise.get("n_pairs"),
            }
            out.append(
                {
                    **base,
                    "row": "pooled",
                    "macro_f1": direct.get("macro_f1"),
                    "kappa": direct.get("kappa"),
                    "kappa_ci_low": direct.get("kappa_ci_low"),
                    "kappa_ci_high": direct.get("kappa_ci_high"),
                    "n_items": direct.get("n_items"),
                    "loo_items": loo.get("n_items"),
                    "grader_f1": loo.get("grader_f1"),
                    "grader_ci_low": (loo.get("grader_ci") or [None, None])[0],
                    "grader_ci_high": (loo.get("grader_ci") or [None, None])[1],
                    "clinicians_f1": loo.get("clinicians_f1"),
                    "clinicians_ci_low": (loo.get("clinicians_ci") or [None, None])[0],
                    "clinicians_ci_high": (loo.get("clinicians_ci") or [None, None])[1],
                    "difference": loo.get("difference"),
                    "difference_ci_low": (loo.get("difference_ci") or [None, None])[0],
                    "difference_ci_high": (loo.get("difference_ci") or [None, None])[1],
                    "n_clusters": a.get("n_clusters"),
                    "missing_grader_verdicts": a.get("missing_grader_verdicts"),
                    "verdict": a.get("verdict"),
                    "no_verdict": a.get("no_verdict"),
                    **pairwise_columns,
                }
            )
            for r in a.get("per_clinician", []):
                out.append({**base, "row": r["rater"], **r})
    return out


def _review_rows(report: CorrelationReport) -> list[dict[str, Any]]:
    """One row per submitted review of the report's study: those analysed (with how many
    distinct ranks, and whether they carried no order) and those left out, with the reason;
    each with the learned metric's fold of its instruction."""
    folds = (report.results.get("learned_metric") or {}).get("fold_of_instruction") or {}
    reviews: dict[int, dict[str, Any]] = {}
    for row in report.results.get("responses", []):
        review = reviews.setdefault(
            row["review_id"],
            {
                "review_id": row["review_id"],
                "instruction_id": row["instruction_id"],
                "patient": row.get("patient"),
                "cluster": row.get("cluster"),
                "clinician": row["clinician"],
                "simulated": row.get("simulated"),
                "n_judgements": 0,
                "ranks": set(),
                "excluded": "",
            },
        )
        review["n_judgements"] += 1
        if row["rank"] is not None:
            review["ranks"].add(row["rank"])
    out = []
    for review in reviews.values():
        distinct = len(review.pop("ranks"))
        review.update(distinct_ranks=distinct, skipped=distinct < 2)
        out.append(review)
    for other in report.provenance.get("other_reviews", []):
        out.append({**other, "n_judgements": 0, "distinct_ranks": None, "skipped": None})
    for review in out:
        review["learned_fold"] = folds.get(review["instruction_id"])
    return sorted(out, key=lambda r: r["review_id"])


def _stored_rows(report: CorrelationReport, table: str) -> list[dict[str, Any]]:
    if table in SECTION_COLUMNS:
        return _section_rows(report, table)
    if table == "metrics":
        return metric_provenance(report)
    if table == "correlation":
        by_metric = {p["metric"]: p for p in metric_provenance(report)}
        return [
            {**row, **{c: by_metric.get(row["metric"], {}).get(c) for c in PROVENANCE_COLUMNS}}
            for row in report.results.get(table, [])
        ]
    return report.results.get(table, [])


def rows(report: CorrelationReport, table: str) -> list[dict[str, Any]]:
    """The table's rows, restricted to its documented columns (nothing else can slip out)."""
    cols = columns(report, table)
    out = [{c: row.get(c) for c in cols} for row in _stored_rows(report, table)]
    if table == "responses" and out and "simulated" not in report.results[table][0]:
        # A report computed before the column existed: derive it from the provenance.
        simulated = set(report.provenance.get("simulated_review_ids", []))
        for row in out:
            row["simulated"] = row["review_id"] in simulated
    return out


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # numbers stay numbers: "-0.25" is not a formula
    if isinstance(value, list):
        value = ";".join(map(str, value))
    if isinstance(value, dict):
        value = json.dumps(value, sort_keys=True)
    return csv_safe_cell(value)


def to_csv(report: CorrelationReport, table: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    cols = columns(report, table)
    context = _context(report)
    writer.writerow(cols + CONTEXT_COLUMNS)
    for row in rows(report, table):
        writer.writerow(
            [_cell(row[c]) for c in cols] + [_cell(context[c]) for c in CONTEXT_COLUMNS]
        )
    return out.getvalue()


def to_json(report: CorrelationReport, table: str) -> str:
    return json.dumps(document(report, table), indent=1)


def document(report: CorrelationReport, table: str) -> dict[str, Any]:
    """A table with enough context to cite: report id, dataset, parameters, when computed."""
    return {
        "report": report.pk,
        "dataset": report.dataset.name,
        "table": table,
        "parameters": _public_parameters(report),
        "computed_at": report.provenance.get("computed_at"),
        "simulated_reviews": report.provenance.get("counts", {}).get("reviews_simulated", 0),
        "metric_provenance": metric_provenance(report),
        "columns": columns(report, table),
        "rows": rows(report, table),
    }


def _public_parameters(report: CorrelationReport) -> dict[str, Any]:
    p = report.parameters
    keys = (
        "n_resamples",
        "seed",
        "confidence",
        "config_ids",
        "exclude_truncated",
        "study_id",
        "include_unblindable",
        "cluster",
        "min_clusters",
        "n_permutations",
        "learned_metric",
        "ppi_predictor",
        "include_gold",
    )
    out = {k: p.get(k) for k in keys}
    out["consensus"] = p.get("consensus", "reviews")
    clustering = report.results.get("clustering") or {}
    out["cluster_unit"] = clustering.get("unit")
    out["response_set"] = report.provenance.get("response_set")
    out["model_variants"] = report.provenance.get("model_variants")
    return out


def render(report: CorrelationReport, table: str, fmt: str) -> tuple[str, str]:
    """``(body, content_type)`` of one export."""
    if fmt == "csv":
        return to_csv(report, table), "text/csv; charset=utf-8"
    if fmt == "json":
        return to_json(report, table), "application/json"
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


def filename(report: CorrelationReport, table: str, fmt: str) -> str:
    return f"report-{report.pk}-{table}.{fmt}"


def report_summary(report: CorrelationReport, *, url: str = "") -> dict[str, Any]:
    """What the API lists about a report (no results tables)."""
    counts = report.provenance.get("counts", {})
    return {
        "id": report.pk,
        "title": str(report),
        "dataset": report.dataset.name,
        "status": report.status,
        "created_at": report.created_at.isoformat(),
        "finished_at": report.finished_at.isoformat() if report.finished_at else None,
        "parameters": _public_parameters(report),
        "reviews": counts.get("reviews"),
        "simulated_reviews": counts.get("reviews_simulated"),
        "url": url,
    }
