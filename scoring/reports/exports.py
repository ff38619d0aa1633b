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
from scoring.reports.analysis import NOT_RECORDED

TABLES = ("correlation", "leaderboard", "responses", "metrics")
FORMATS = ("csv", "json")

CORRELATION_COLUMNS = [
    "metric",
    "label",
    "mean_tau",
    "ci_low",
    "ci_high",
    "n_reviews",
    "n_skipped",
    "n_instructions",
    "pairwise_accuracy",
    "pairwise_ci_low",
    "pairwise_ci_high",
    "n_pairs",
    "n_metric_ties",
    "system_tau",
    "system_p_value",
    "n_models",
    "n_scored",
]
LEADERBOARD_COLUMNS = [
    "model",
    "n",
    "n_correct_known",
    "share_correct",
    "correct_ci_low",
    "correct_ci_high",
    "mean_rank",
    "bt_strength",
    "bt_ci_low",
    "bt_ci_high",
    "n_comparisons",
]
RESPONSE_COLUMNS = [
    "review_id",
    "instruction_id",
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
# the report, its seed, and how many of its reviews were simulated.
CONTEXT_COLUMNS = ["report", "seed", "n_resamples", "simulated_reviews"]


def columns(report: CorrelationReport, table: str) -> list[str]:
    if table == "correlation":
        return CORRELATION_COLUMNS + PROVENANCE_COLUMNS
    if table == "leaderboard":
        return LEADERBOARD_COLUMNS
    if table == "metrics":
        return METRICS_COLUMNS
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
    return {
        "report": report.pk,
        "seed": report.parameters.get("seed"),
        "n_resamples": report.parameters.get("n_resamples"),
        "simulated_reviews": report.provenance.get("counts", {}).get("reviews_simulated", 0),
    }


def metric_provenance(report: CorrelationReport) -> list[dict[str, Any]]:
    """One row per metric: its evaluator's provenance; "not recorded" for anything missing
    (also for every field of a report computed before provenance was stored)."""
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
        for col in PROVENANCE_COLUMNS:
            row[col] = p.get(col, NOT_RECORDED)
        out.append(row)
    return out


def _stored_rows(report: CorrelationReport, table: str) -> list[dict[str, Any]]:
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
    keys = ("n_resamples", "seed", "confidence", "config_ids", "exclude_truncated")
    return {k: p.get(k) for k in keys}


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
