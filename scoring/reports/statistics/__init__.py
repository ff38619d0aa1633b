"""Statistics relating automated metric scores to clinicians' judgements.

Pure numpy/scipy; no Django imports, so the package can be used from management commands,
notebooks and tests alike. One module per question:

- ``table``: the judgement table every statistic reads, and shared array helpers;
- ``resampling``: the cluster bootstrap (intervals, p-values);
- ``intervals``: the studentized cluster bootstrap every mean's interval is drawn with;
- ``correlation``: does a metric order responses as clinicians do (per-review tau-b, pairwise
  accuracy, system-level tau);
- ``agreement``: do clinicians agree with each other (human ceiling, Krippendorff's alpha);
- ``leaderboard``: which model do clinicians prefer (correct shares, Bradley-Terry, win rates);
- ``significance``: is a difference real (paired tests, position bias, context length);
- ``breakdown``: a statistic per category or specialty;
- ``ppi``: what clinicians plus a predictor say (prediction-powered estimates);
- ``power``: how many more reviews a question needs, with and without the predictor;
"""

from .agreement import (
    human_ceiling,
    krippendorff_alpha_ordinal,
    leave_one_clinician_out,
    source_agreement,
)
from .breakdown import breakdown
from .correlation import (
    metric_correlation,
    metric_correlations,
    pairwise_accuracy,
    per_review_tau,
    system_level_tau,
    tie_calibrated_accuracy,
)
from .intervals import (
    INTERVAL_METHOD,
    ClusterMean,
    cluster_ci,
    cluster_mean,
    cluster_means,
    studentized_totals,
)
from .leaderboard import (
    BT_BOOTSTRAP_TOL,
    BT_MAX_ITER,
    BT_TOL,
    BradleyTerryFit,
    bradley_terry,
    bradley_terry_fit,
    leaderboard,
    leaderboard_fit,
    style_controlled_bradley_terry,
    wilson_interval,
    win_rate_matrix,
)
from .resampling import (
    DEFAULT_RESAMPLES,
    MIN_CLUSTERS,
    cluster_bootstrap_ci,
    p_value_floor,
)
from .significance import (
    DEFAULT_PERMUTATIONS,
    context_length_analysis,
    mcnemar_exact,
    paired_bootstrap_test,
    paired_bootstrap_tests,
    perm_both_tests,
    position_bias,
)
from .table import Engine, JudgementTable, ReviewTaus, Scores, choose_clusters

__all__ = [
    "BT_BOOTSTRAP_TOL",
    "BT_MAX_ITER",
    "BT_TOL",
    "DEFAULT_PERMUTATIONS",
    "DEFAULT_RESAMPLES",
    "INTERVAL_METHOD",
    "MIN_CLUSTERS",
    "BradleyTerryFit",
    "ClusterMean",
    "Engine",
    "JudgementTable",
    "ReviewTaus",
    "Scores",
    "bradley_terry",
    "bradley_terry_fit",
    "breakdown",
    "choose_clusters",
    "cluster_bootstrap_ci",
    "cluster_ci",
    "cluster_mean",
    "cluster_means",
    "context_length_analysis",
    "human_ceiling",
    "krippendorff_alpha_ordinal",
    "leave_one_clinician_out",
    "leaderboard",
    "leaderboard_fit",
    "mcnemar_exact",
    "metric_correlation",
    "metric_correlations",
    "paired_bootstrap_test",
    "paired_bootstrap_tests",
    "p_value_floor",
    "pairwise_accuracy",
    "perm_both_tests",
    "per_review_tau",
    "position_bias",
    "studentized_totals",
    "style_controlled_bradley_terry",
    "source_agreement",
    "system_level_tau",
    "tie_calibrated_accuracy",
    "wilson_interval",
    "win_rate_matrix",
]
