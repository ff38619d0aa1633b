"""Correlation reports and what they read besides scores: model variants, the paper's model
names, learned metrics; the API tokens researchers export them with."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from review.models import Dataset


class CorrelationReport(models.Model):
    """A stored snapshot of the metric–clinician analysis with its parameters and provenance."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="reports")
    title = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    parameters = models.JSONField(default=dict)  # resamples, seed, confidence, configs, filters
    provenance = models.JSONField(default=dict)  # dataset, configs, versions, reviews included
    results = models.JSONField(default=dict)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title or f"Report {self.pk}"


class ApiToken(models.Model):
    """A researcher's read-only API token. Only a hash is stored; the key is shown once."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # API_TOKEN_DAYS after creation; a token without one (none since the migration) is refused.
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class ModelVariant(models.Model):
    """A researcher's declaration: this model name is ``base_model`` at ``context_length``.

    MedAlign compares one base model at several context lengths (GPT-4 at 32k and at 2k tokens);
    responses only carry model names, so reports need to be told which names are the same model.
    Declared here (Django admin) per dataset, or read from a ``base_model`` column of the import
    (kept in ``ModelResponse.generation_metadata``); a declaration here wins. An empty
    ``context_length`` means "the context length the responses were imported with".
    """

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="model_variants")
    model_name = models.CharField(max_length=100)
    base_model = models.CharField(max_length=100)
    context_length = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["dataset", "base_model", "context_length", "model_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "model_name"], name="unique_model_variant_per_dataset"
            )
        ]

    def __str__(self) -> str:
        return f"{self.model_name} = {self.base_model} @ {self.context_length or 'imported'}"


class PaperModelName(models.Model):
    """An admin's declaration: this dataset's ``model_name`` is the MedAlign paper's model
    ``paper_label`` (one of ``scoring.reports.paper.PAPER_MODELS``' labels, checked by the
    service that writes it).

    The paper's tables are set beside a release's by model name; a release whose names are
    spelled differently from the ones the paper's code used ("gpt-4-32k" for "gpt4-32k")
    matched nothing and every published figure became a dash. A declaration here wins over
    the built-in spellings. Written by ``scoring.reports.services.paper_model_names_set``
    (the paper-tables page, ``paper_tables --map``), audited.
    """

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="paper_model_names")
    model_name = models.CharField(max_length=100)
    paper_label = models.CharField(max_length=60)

    class Meta:
        ordering = ["dataset", "model_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "model_name"], name="unique_paper_model_name_per_dataset"
            )
        ]

    def __str__(self) -> str:
        return f"{self.model_name} = {self.paper_label} (paper)"


class LearnedMetricModel(models.Model):
    """A pairwise ranking model fitted on a dataset's clinician rankings
    (``scoring.reports.learned``).

    Stored as plain numbers (scaler, coefficients, feature names), never a pickle, with what it
    was trained on and with: the report, how many reviews and pairs, the metric configurations
    whose scores are features, the embedding model and its weights hash, library versions. It
    ranks a new model's responses without review: ``LinearRanker.from_dict(parameters)``.
    """

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="learned_models")
    report = models.ForeignKey(
        CorrelationReport, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    feature_names = models.JSONField(default=list)
    parameters = models.JSONField(default=dict)  # LinearRanker.as_dict()
    provenance = models.JSONField(default=dict)
    n_reviews = models.PositiveIntegerField(default=0)
    n_pairs = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Learned metric {self.pk} ({self.n_reviews} reviews)"
