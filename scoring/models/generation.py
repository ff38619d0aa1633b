"""Generation: the allowlisted model servers, prompt templates, runs and their batches."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from review.models import Dataset

from .runs import BatchBase, RunBase


class GenerationEndpoint(models.Model):
    """An OpenAI-compatible model server inside the institution: the allowlist.

    The data use agreement forbids sending records to third-party services, so generation and
    jury backends refuse any endpoint not listed here and enabled, before connecting
    (``scoring.llm.backends.check_endpoint``). Empty by default; maintained by admins in
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
    """A dataset's instructions answered by one model at one or more context lengths.

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
