"""What a report may be asked for: the parameters a request may set, checked and completed with
their defaults before a report row is created (the page's form, the API and ``report`` share
them)."""

import secrets
from typing import Any

from scoring.reports import statistics as st
from scoring.reports import truth
from scoring.reports.errors import ReportError
from scoring.reports.statistics.consensus import CONSENSUS_METHODS

REPORT_MAX_RESAMPLES = 100_000
REPORT_TABLES = ("correlation", "leaderboard", "responses", "metrics")
CLUSTER_CHOICES = ("auto", "patient", "instruction")
# Where the judgements come from: clinicians reviewing in this app, or the judgements shipped
# with the release (``binary_correct``/``model_rank``; scoring.reports.release_judgements).
SOURCES = ("app", "release")
SOURCE_LABELS = {
    "app": "reviews made in this app",
    "release": "the release's own clinician judgements (binary_correct, model_rank)",
}


def report_parameters(
    *,
    n_resamples: int,
    seed: int | None,
    confidence: float,
    config_ids: list[int] | None,
    exclude_truncated: bool = False,
    learned_metric: bool = False,
    study_id: int | None = None,
    include_unblindable: bool = False,
    cluster: str = "auto",
    min_clusters: int = st.MIN_CLUSTERS,
    n_permutations: int = st.DEFAULT_PERMUTATIONS,
    source: str = "app",
    ppi_predictor: str = "auto",
    consensus: str = truth.DEFAULT_CONSENSUS,
    include_gold: bool = False,
) -> dict[str, Any]:
    if consensus not in CONSENSUS_METHODS:
        raise ReportError(f"the consensus is one of {', '.join(CONSENSUS_METHODS)}")
    if source not in SOURCES:
        raise ReportError(f"the judgements come from {' or '.join(SOURCES)}")
    if not 1 <= int(n_resamples) <= REPORT_MAX_RESAMPLES:
        raise ReportError(f"resamples must be between 1 and {REPORT_MAX_RESAMPLES:,}")
    if cluster not in CLUSTER_CHOICES:
        raise ReportError(f"cluster by {' or '.join(CLUSTER_CHOICES)}")
    if not 2 <= int(min_clusters) <= 1000:
        raise ReportError("the fewest clusters for an interval must be from 2 to 1,000")
    if not 99 <= int(n_permutations) <= 100_000:
        raise ReportError("permutations must be from 99 to 100,000")
    if not 0.5 <= float(confidence) < 1.0:
        raise ReportError("confidence must be at least 0.5 and below 1")
    if seed is not None and not 0 <= int(seed) < 2**32:
        raise ReportError("seed must be a whole number from 0 to 4294967295")
    # A seed is always recorded, drawn at random when none is given, so any report can be
    # recomputed exactly (same cluster draws) from its parameters.
    return {
        "n_resamples": int(n_resamples),
        "seed": int(seed) if seed is not None else secrets.randbelow(2**31),
        "seed_given": seed is not None,
        "confidence": float(confidence),
        "config_ids": sorted(int(c) for c in config_ids) if config_ids else None,
        "exclude_truncated": bool(exclude_truncated),
        "learned_metric": bool(learned_metric),
        # The study whose reviews (and so whose response set) the report analyses.
        "study_id": study_id,
        # Reviews by accounts that could read model names are left out unless asked for.
        "include_unblindable": bool(include_unblindable),
        # The resampling unit: "auto" clusters by patient when instructions share patients.
        "cluster": cluster,
        "min_clusters": int(min_clusters),
        "n_permutations": int(n_permutations),
        # Whose judgements: reviews made in the app, or the release's own (never mixed).
        "source": source,
        # The predictor of the prediction-powered estimates: "auto", "none", "learned" or a
        # metric key (scoring.reports.prediction).
        "ppi_predictor": (ppi_predictor or "auto").strip()[:100],
        # Which truth metrics are scored against (scoring.reports.truth), and whether the
        # reviews of gold items (quality checks) are analysed too.
        "consensus": consensus,
        "include_gold": bool(include_gold),
    }
