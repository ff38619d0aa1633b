"""Reviewing quality: gold and calibration items, exclusions, adjudications.

- A ``GoldItem`` is an instruction of a study whose verdicts are known, per response
  (``GoldJudgement``): from the release's own clinician labels, or set by a senior clinician
  with a reason. Used blind (``Use.GOLD``: mixed into clinicians' queues at the study's rate,
  indistinguishable from any other review) or openly (``Use.CALIBRATION``: a new clinician's
  first reviews, each followed by the reference judgement and its reason).
- A ``ClinicianExclusion`` is an admin's decision, with a reason, to leave a clinician's reviews
  of a study out of reports. Nothing excludes anyone automatically.
- An ``Adjudication`` resolves a disagreement between clinicians on one instruction: an
  adjudicator (``Role.ADJUDICATOR``) who wrote none of its reviews records the resolved
  judgement with a reason.
"""

from django.conf import settings
from django.db import models
from django.utils import timezone

from .records import Instruction, ModelResponse
from .reviews import Review
from .studies import Study


class QualityPolicy(models.Model):
    """What an admin set for a study's quality checks. A study without a row uses the
    defaults below (no gold mixed in)."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="quality_policy")
    # The share of each clinician's queue (regular and gold assignments of the study) that is
    # gold, kept as assignments are made: 0 mixes in none.
    gold_rate = models.FloatField(default=0.0)
    # Two reviews of an instruction whose Kendall's tau-b falls below this disagree on the
    # ranking (a split correctness verdict is a disagreement whatever the tau).
    adjudication_tau = models.FloatField(default=0.0)
    # Reviews per rolling window of the drift signal.
    drift_window = models.PositiveIntegerField(default=10)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "quality policies"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(gold_rate__gte=0) & models.Q(gold_rate__lte=0.5),
                name="gold_rate_in_0_half",
            ),
            models.CheckConstraint(
                condition=models.Q(adjudication_tau__gte=-1) & models.Q(adjudication_tau__lte=1),
                name="adjudication_tau_in_range",
            ),
        ]

    def __str__(self) -> str:
        return f"quality policy of study {self.study_id}"


class GoldItem(models.Model):
    """An instruction of a study with a reference judgement of each of its responses.

    Status: active until retired (an admin, with the change audited); a retired item gets no
    new assignments, and the reviews made of it keep being compared with its reference.
    """

    class Use(models.TextChoices):
        GOLD = "gold", "Gold (blind, mixed into queues)"
        CALIBRATION = "calibration", "Calibration (with feedback)"

    class Source(models.TextChoices):
        RELEASE = "release", "The release's own clinician labels"
        SENIOR = "senior", "Set by a senior clinician"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="gold_items")
    instruction = models.ForeignKey(Instruction, on_delete=models.CASCADE, related_name="+")
    use = models.CharField(max_length=12, choices=Use.choices)
    source = models.CharField(max_length=12, choices=Source.choices)
    # Why the reference is right: shown to a calibrating clinician beside their judgement.
    reason = models.TextField(blank=True, max_length=5000)
    # The senior clinician whose judgement it is (source "senior").
    senior = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study", "instruction"]
        constraints = [
            models.UniqueConstraint(fields=["study", "instruction"], name="unique_gold_item")
        ]

    def __str__(self) -> str:
        return f"{self.use} item: instruction {self.instruction_id} in study {self.study_id}"


class GoldJudgement(models.Model):
    """The reference judgement of one response of a gold or calibration item."""

    item = models.ForeignKey(GoldItem, on_delete=models.CASCADE, related_name="judgements")
    response = models.ForeignKey(ModelResponse, on_delete=models.CASCADE, related_name="+")
    rank = models.PositiveSmallIntegerField(null=True, blank=True)
    is_correct = models.BooleanField(null=True, blank=True)

    class Meta:
        ordering = ["item", "response"]
        constraints = [
            models.UniqueConstraint(fields=["item", "response"], name="unique_gold_judgement")
        ]

    def __str__(self) -> str:
        return f"reference for response {self.response_id}"


class ClinicianExclusion(models.Model):
    """An admin's decision to leave a clinician's reviews of a study out of reports.

    Status and allowed transitions (review.services.quality):
      active -> lifted  (an admin, with a reason)
    Both are audited and never deleted; a clinician has at most one active exclusion per study.
    Reports list every active exclusion with its reason and the reviews it left out.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="exclusions")
    clinician = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField(max_length=2000)
    excluded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    excluded_at = models.DateTimeField(default=timezone.now)
    lifted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    lifted_at = models.DateTimeField(null=True, blank=True)
    lift_reason = models.TextField(blank=True, max_length=2000)

    class Meta:
        ordering = ["study", "-excluded_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "clinician"],
                condition=models.Q(lifted_at__isnull=True),
                name="one_active_exclusion",
            )
        ]

    def __str__(self) -> str:
        return f"exclusion of {self.clinician_id} from study {self.study_id}"

    @property
    def is_active(self) -> bool:
        return self.lifted_at is None


class Adjudication(models.Model):
    """An adjudicator's resolution of the clinicians' disagreement on one instruction.

    Status and allowed transitions (made in review.services.adjudications):
      draft     -> draft      (autosave, the review page's protocol: edits merged per field)
      draft     -> submitted  (every response ranked and marked, and a reason)
    A submitted adjudication is read-only. The adjudicator never wrote any review of the
    instruction in the study (refused when assigning and when opening).
    """

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="adjudications")
    instruction = models.ForeignKey(Instruction, on_delete=models.CASCADE, related_name="+")
    adjudicator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="adjudications"
    )
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    # The disagreeing reviews, and in which order the page shows them ("Reviewer 1", …):
    # drawn with the CSPRNG, so the numbering says nothing about who wrote which.
    reviews = models.ManyToManyField(Review, related_name="adjudications")
    reviewer_order = models.JSONField(default=list)
    # What made it a disagreement: {"split": [response ids], "min_tau": x, "threshold": t}.
    evidence = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=12, choices=Status.choices, default=Status.DRAFT, db_index=True
    )
    # As on a Review: response ids in the order shown, and the per-adjudication handles.
    shown_order = models.JSONField(default=list)
    handles = models.JSONField(default=list)
    reason = models.TextField(blank=True, max_length=5000)
    draft = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    edited_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    time_spent_seconds = models.PositiveIntegerField(default=0)
    save_audited_at = models.DateTimeField(null=True, blank=True)
    # The adjudicator could also read model names (researcher, admin or staff access).
    adjudicator_could_unblind = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["study", "instruction"], name="unique_adjudication")
        ]

    def __str__(self) -> str:
        return f"Adjudication {self.pk} ({self.status})"

    @property
    def is_editable(self) -> bool:
        return self.status != self.Status.SUBMITTED


class AdjudicatedJudgement(models.Model):
    """The resolved judgement of one response, written when the adjudication is submitted."""

    adjudication = models.ForeignKey(
        Adjudication, on_delete=models.CASCADE, related_name="judgements"
    )
    response = models.ForeignKey(ModelResponse, on_delete=models.PROTECT, related_name="+")
    position = models.PositiveSmallIntegerField()
    rank = models.PositiveSmallIntegerField(null=True, blank=True)
    is_correct = models.BooleanField(null=True, blank=True)
    tags = models.JSONField(default=list, blank=True)  # error-tag slugs
    comment = models.TextField(blank=True, max_length=5000)

    class Meta:
        ordering = ["adjudication", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["adjudication", "response"], name="unique_adjudicated_judgement"
            )
        ]

    def __str__(self) -> str:
        return f"resolved judgement {self.pk} of adjudication {self.adjudication_id}"
