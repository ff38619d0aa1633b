"""Rubric grading by a model: runs, their batches and the verdicts they store."""

from django.db import models
from django.utils import timezone

from review.models import Dataset, ModelResponse

from .runs import BatchBase, RunBase
from .scoring import MetricConfig


class GradingRun(RunBase):
    """A dataset's responses graded against their instructions' accepted rubrics by a model
    (``scoring.grading.runs``).

    Status and allowed transitions: ``RunBase`` (made in ``scoring.runs.machinery``); a batch
    whose worker died is queued again by the sweep, and resume grades only what is missing.
    ``config`` is the grader's identity (a ``MetricConfig`` of backend ``rubric-grader``: the
    model's weights hash or endpoint and model name, the prompt's version, every option);
    ``backend_spec`` is how a worker reaches the model. ``total`` counts (response, criterion)
    pairs of the latest accepted rubric version of each instruction when the run was created.
    """

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="grading_runs")
    config = models.ForeignKey(MetricConfig, on_delete=models.PROTECT, related_name="+")
    model_key = models.CharField(max_length=120)  # "local:<folder>" | "endpoint:<id>"
    backend_spec = models.JSONField(default=dict)
    options = models.JSONField(default=dict)  # record_tokens, max_new_tokens, seed, retries

    class Meta(RunBase.Meta):
        pass

    def __str__(self) -> str:
        return f"Grading run {self.pk} ({self.status})"


class GradingBatch(BatchBase):
    """Response ids (``item_ids``) whose rubric criteria one Celery task grades."""

    run = models.ForeignKey(GradingRun, on_delete=models.CASCADE, related_name="batches")

    class Meta(BatchBase.Meta):
        ordering = ["run", "id"]
        indexes = [*BatchBase.Meta.indexes, models.Index(fields=["run", "status"])]

    def __str__(self) -> str:
        return f"Grading batch {self.pk} of run {self.run_id} ({self.status})"


class GraderVerdict(models.Model):
    """A model grader's verdict on one (response, criterion). Unique per grader: never asked twice.

    ``criteria_met`` is null when the grader's answer did not parse: missing, never "not met".
    ``rubric`` is the version the criterion belongs to (as on clinicians' grades), so scores
    and agreement can be split per version. The prompt itself holds patient text: only its
    sha256 is kept, with the grader's identity (``config``) and the prompt's version there.
    """

    config = models.ForeignKey(MetricConfig, on_delete=models.PROTECT, related_name="verdicts")
    response = models.ForeignKey(ModelResponse, on_delete=models.CASCADE, related_name="+")
    rubric = models.ForeignKey("review.Rubric", on_delete=models.PROTECT, related_name="+")
    criterion = models.ForeignKey(
        "review.Criterion", on_delete=models.PROTECT, related_name="grader_verdicts"
    )
    criteria_met = models.BooleanField(null=True)
    explanation = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    prompt_sha256 = models.CharField(max_length=64)
    finish_reason = models.CharField(max_length=20, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["config", "response", "criterion"], name="unique_grader_verdict"
            )
        ]
        indexes = [models.Index(fields=["config", "rubric"], name="grader_verdict_rubric")]

    def __str__(self) -> str:
        return f"verdict of {self.config_id} on {self.response_id}/{self.criterion_id}"
