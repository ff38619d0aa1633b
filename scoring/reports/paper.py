"""The MedAlign paper's tables, rebuilt from a release's own clinician judgements.

Fleming et al., "MedAlign: A Clinician-Generated Dataset for Instruction Following with
Electronic Medical Records", AAAI-24 pp. 22021-22030 (arXiv 2308.14089). Its published figures
are kept here (``PUBLISHED``), each with the table or section it comes from, and set beside the
same statistic computed from the release's ``binary_correct`` and ``model_rank`` columns
(``scoring.reports.release_judgements``): correctness per model, mean rank and win rate
(Table 3, Figure 2), the context-length comparison (the "8.3%": 60.1% at 32k against 51.8% at
2k, percentage points), and the metric-clinician correlation (Table 4).

What cannot be rebuilt, and why, is said with the table rather than guessed: the paper's
inter-rater agreement (0.44) comes from 50 instructions that three clinicians reviewed, and
the release keeps one judgement per response without naming the clinicians.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from scoring.reports import statistics as st
from scoring.reports.analysis import clean
from scoring.reports.release_judgements import release_inputs
from scoring.reports.selectors import ReportInputs

CITATION = (
    "Fleming SL, Lozano A, et al. MedAlign: A Clinician-Generated Dataset for Instruction "
    "Following with Electronic Medical Records. AAAI 2024;38(20):22021-22030. arXiv:2308.14089."
)
SOURCE = (
    "the release's clinician-reviewed-model-responses.tsv: binary_correct (one clinician's "
    "verdict per response) and model_rank (1 = best, ties allowed)"
)


@dataclass(frozen=True)
class PaperModel:
    label: str  # as Table 3 and Figures 2-3 name it
    release_names: tuple[str, ...]  # model_name values seen in the release (third-party code)
    base_model: str
    context_length: int
    correct: float  # Table 3, % judged correct
    win_rate: float  # Table 3, WR: mean over opponents of the non-tied win share
    mean_rank: float  # Table 3, mean human rank (lower is better)


# Table 3 (AAAI-24 p. 22025). The release names come from code that reads the released file
# (HELM's loader and others); "gpt4-32k-vicuna-context" as GPT-4 (2k) follows Table 3's
# footnote (GPT-4 32k restricted with the Vicuna tokenizer).
PAPER_MODELS = (
    PaperModel("GPT-4 (32k + MR)", ("gpt4-32k-multistep-refinement",), "GPT-4 (MR)", 32768,
               65.0, 0.658, 2.80),
    PaperModel("GPT-4 (32k)", ("gpt4-32k",), "GPT-4", 32768, 60.1, 0.676, 2.75),
    PaperModel("GPT-4 (2k)", ("gpt4-32k-vicuna-context",), "GPT-4", 2048, 51.8, 0.598, 3.11),
    PaperModel("Vicuña-13B", ("vicuna_13B",), "Vicuña-13B", 2048, 35.0, 0.401, 3.92),
    PaperModel("Vicuña-7B", ("vicuna_7B",), "Vicuña-7B", 2048, 33.3, 0.398, 3.93),
    PaperModel("MPT-7B-Instruct", ("mpt_7B_instruct",), "MPT-7B", 2048, 31.7, 0.269, 4.49),
)  # fmt: skip

# The context-length result (section "The Importance of Context Length"): GPT-4 at 32k and 2k.
PAPER_CONTEXT = {"base_model": "GPT-4", "long": 32768, "short": 2048, "long_correct": 60.1,
                 "short_correct": 51.8, "difference_points": 8.3}  # fmt: skip

# Table 4 (AAAI-24 p. 22027): mean Kendall's tau between each metric's ranking and the human
# ranking, with the paper's 95% intervals. Keyed by this app's metric backend where one exists
# (the paper's GoogleBLEU is not sacreBLEU's BLEU, so BLEU has no published figure).
PAPER_METRICS = {
    "comet": ("COMET (source-augmented)", 0.37, 0.33, 0.41),
    "bertscore": ("BERTScore", 0.34, 0.30, 0.38),
    "meteor": ("METEOR", 0.32, 0.28, 0.36),
    "chrf": ("chrF++", 0.29, 0.25, 0.33),
    "rougeL": ("ROUGE-L", 0.27, 0.23, 0.31),
}
PAPER_INTER_RATER = (0.44, 0.34, 0.53)  # Table 4's "Inter-Rater Reliability" row


PAPER_LABELS = tuple(row.label for row in PAPER_MODELS)


def _paper_row(model_name: str, names: Mapping[str, str] | None = None) -> PaperModel | None:
    """The paper's model a dataset's ``model_name`` is: the admin's declaration (``names``:
    model name -> the paper's label) first, else the release spellings the paper's code used."""
    declared = (names or {}).get(model_name)
    for row in PAPER_MODELS:
        if declared is not None and row.label == declared:
            return row
    if declared is not None:
        return None
    for row in PAPER_MODELS:
        if model_name in row.release_names:
            return row
    return None


def paper_variants(
    model_names: list[str], names: Mapping[str, str] | None = None
) -> dict[str, tuple[str, int | None]]:
    """The paper's models present in a release, as base model and context length."""
    out: dict[str, tuple[str, int | None]] = {}
    for name in model_names:
        row = _paper_row(name, names)
        if row is not None:
            out[name] = (row.base_model, row.context_length)
    return out


def paper_matching(
    model_names: list[str], names: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Which of a dataset's model names are which of the paper's models, how each was matched,
    and what did not match: the page and ``paper_tables`` print it, so a spelling the paper's
    code did not use is seen, never a silent dash."""
    matched, unmatched = [], []
    for name in sorted(model_names):
        row = _paper_row(name, names)
        if row is None:
            unmatched.append(name)
        else:
            how = "declared" if name in (names or {}) else "release spelling"
            matched.append({"model": name, "paper_label": row.label, "how": how})
    found = {m["paper_label"] for m in matched}
    return {
        "matched": matched,
        "unmatched_models": unmatched,
        "paper_models_absent": [label for label in PAPER_LABELS if label not in found],
        "paper_labels": list(PAPER_LABELS),
    }


def _strict_win_rates(table: st.JudgementTable) -> dict[str, float]:
    """Table 3's WR: for each model, the mean over its opponents of the share of non-tied
    comparisons (same instruction) it won (Figure 2's cells; ties left out)."""
    models = sorted({str(m) for m in table.model})
    wins = {(a, b): 0 for a in models for b in models}
    for review in np.unique(table.review):
        rows = np.flatnonzero(table.review == review)
        for i in rows:
            for j in rows:
                if table.model[i] != table.model[j] and table.rank[i] < table.rank[j]:
                    wins[(str(table.model[i]), str(table.model[j]))] += 1
    out = {}
    for a in models:
        shares = [
            wins[(a, b)] / (wins[(a, b)] + wins[(b, a)])
            for b in models
            if b != a and wins[(a, b)] + wins[(b, a)] > 0
        ]
        out[a] = float(np.mean(shares)) if shares else math.nan
    return out


def paper_tables(
    inputs: ReportInputs,
    *,
    labels: dict[str, str],
    backends: dict[str, str],
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    cluster: str = "auto",
    min_clusters: int = st.MIN_CLUSTERS,
    names: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The paper's tables from the release judgements in ``inputs``; ``backends`` maps each
    metric key to its backend (for the published figure), ``labels`` to its label, ``names``
    the dataset's model names to the paper's labels (the admin's declarations)."""
    keys, unit = st.choose_clusters(
        np.asarray(inputs.instruction_code), np.asarray(inputs.patient), cluster
    )
    table = inputs.table.with_clusters(keys)
    boot = {
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "min_clusters": min_clusters,
    }
    leaderboard = st.leaderboard(table, **boot)
    win_rate = _strict_win_rates(table)
    models = []
    for row in sorted(leaderboard, key=lambda r: -(r["share_correct"] or 0)):
        paper = _paper_row(row["model"], names)
        models.append(
            {
                **row,
                "win_rate": win_rate.get(row["model"]),
                "paper_label": paper.label if paper else None,
                "paper_correct": paper.correct / 100 if paper else None,
                "paper_win_rate": paper.win_rate if paper else None,
                "paper_mean_rank": paper.mean_rank if paper else None,
            }
        )
    model_names = sorted({str(m) for m in table.model})
    variants = {**paper_variants(model_names, names), **inputs.variants}
    context = st.context_length_analysis(table, variants, **boot)
    for comparison in context["comparisons"]:
        is_paper = (
            comparison["base_model"] == PAPER_CONTEXT["base_model"]
            and comparison["long"] == PAPER_CONTEXT["long"]
            and comparison["short"] == PAPER_CONTEXT["short"]
        )
        comparison["paper_difference"] = (
            PAPER_CONTEXT["difference_points"] / 100 if is_paper else None
        )
    metrics = []
    for key, values in inputs.scores.items():
        corr = st.metric_correlation(table, values, **boot)
        published = PAPER_METRICS.get(backends.get(key, ""))
        metrics.append(
            {
                "metric": key,
                "label": labels.get(key, key),
                **corr,
                "paper_label": published[0] if published else None,
                "paper_tau": published[1] if published else None,
                "paper_ci_low": published[2] if published else None,
                "paper_ci_high": published[3] if published else None,
            }
        )
    metrics.sort(key=lambda m: -(m["mean_tau"] if math.isfinite(m["mean_tau"]) else -9.0))
    return clean(
        {
            "citation": CITATION,
            "source": SOURCE,
            "clustering": {"unit": unit, "n_clusters": int(np.unique(keys).shape[0])},
            "parameters": boot,
            "counts": {
                "instructions": int(np.unique(table.instruction).shape[0]),
                "responses": len(table),
                "models": len(model_names),
            },
            "matching": paper_matching(model_names, names),
            "models": models,
            "context_length": context,
            "metrics": metrics,
            "paper_models": [row.__dict__ for row in PAPER_MODELS],
            "paper_context": PAPER_CONTEXT,
            "paper_inter_rater": PAPER_INTER_RATER,
            "inter_rater_note": (
                "Not computable from a release: the paper's 0.44 comes from 50 instructions "
                "reviewed by three clinicians each, and the release keeps one judgement per "
                "response without naming the clinician."
            ),
        }
    )


def paper_tables_for(dataset: Any, *, n_resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """The paper's tables for a dataset's release judgements (every response that carries
    them, whatever study it is in); ``{"empty": reason}`` when the release carries none."""

    inputs = release_inputs(dataset=dataset, study=None)
    if len(inputs.table) == 0:
        return {
            "empty": (
                f"{dataset.name} carries no release judgements: import a release whose "
                "clinician-reviewed-model-responses.tsv has binary_correct and model_rank"
            )
        }
    labels = {m["key"]: m["label"] for m in inputs.metrics}
    backends = {m["key"]: m["backend"] for m in inputs.metrics}
    names = dict(dataset.paper_model_names.values_list("model_name", "paper_label"))
    return paper_tables(
        inputs, labels=labels, backends=backends, n_resamples=n_resamples, seed=seed, names=names
    )
