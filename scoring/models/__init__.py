"""The scoring app's models, one module a question (Django loads them from this package).

- ``runs``: the abstract run and batch every kind of run shares (``scoring.runs`` drives them);
- ``scoring``: metric configurations, scoring runs, scores;
- ``reports``: correlation reports, model variants, the paper's names, learned metrics, tokens;
- ``generation``: model servers, prompt templates, generation runs;
- ``grading``: rubric grading runs and their verdicts.
"""

from .generation import GenerationBatch, GenerationEndpoint, GenerationRun, GenerationTemplate
from .grading import GraderVerdict, GradingBatch, GradingRun
from .reports import ApiToken, CorrelationReport, LearnedMetricModel, ModelVariant, PaperModelName
from .runs import BatchBase, RunBase
from .scoring import MetricConfig, MetricScore, ScoringBatch, ScoringRun

__all__ = [
    "ApiToken",
    "BatchBase",
    "CorrelationReport",
    "GenerationBatch",
    "GenerationEndpoint",
    "GenerationRun",
    "GenerationTemplate",
    "GraderVerdict",
    "GradingBatch",
    "GradingRun",
    "LearnedMetricModel",
    "MetricConfig",
    "MetricScore",
    "ModelVariant",
    "PaperModelName",
    "RunBase",
    "ScoringBatch",
    "ScoringRun",
]
