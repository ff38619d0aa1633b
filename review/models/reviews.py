"""Assignments and clinicians' judgements of model responses."""

import secrets
import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from .records import Instruction, ModelResponse
from .studies import Study


def new_handle() -> str:
    """A response handle: 64 random bits, URL-safe (11 characters)."""
    return secrets.token_urlsafe(8)


class ErrorTag(models.Model):
    """An error category a clinician can attach to a response. Admins edit the list."""

    slug = models.SlugField(max_length=50, unique=True)
    label = models.CharField(max_length=100)
    description = models.CharField(max_length=300, blank=True)
    is_active = models.BooleanField(default=True)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["order", "label"]

    def __str__(self) -> str:
        return self.label


class Assignment(models.Model):
    """A clinician asked to review an instruction in a study. Never the same pair twice in one
    study; a new round (another study) may ask again, with its own response set.

    ``purpose`` says why (review.models.quality): an ordinary review; a gold item, mixed blind
    into the queue (nothing the clinician receives differs; reports leave it out unless asked);
    or a calibration item, which the clinician knows as one and gets feedback on.
    """

    class Purpose(models.TextChoices):
        REVIEW = "review", "Review"
        GOLD = "gold", "Gold item (blind)"
        CALIBRATION = "calibration", "Calibration"

    study = models.ForeignKey(Study, on_delete=models.RESTRICT, related_name="assignments")
    instruction = models.ForeignKey(
        Instruction, on_delete=models.CASCADE, related_name="assignments"
    )
    clinician = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="assignments"
    )
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    purpose = models.CharField(max_length=12, choices=Purpose.choices, default=Purpose.REVIEW)

    class Meta:
        ordering = ["clinician", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "instruction", "clinician"], name="unique_study_assignment"
            )
        ]

    def __str__(self) -> str:
        return f"{self.clinician} → {self.instruction}"


class Review(models.Model):
    """One clinician's judgement of one instruction's responses.

    Status and allowed transitions (made in review.services.reviews):
      draft     -> draft      (autosave; every change, debounced in the browser)
      draft     -> submitted  (every response ranked and marked, or "cannot assess" with reason)
      submitted -> reopened   (admin only; the clinician may edit again)
      reopened  -> submitted
    A submitted review is read-only. Submitting twice is a no-op that returns the same review.
    """

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted"
        REOPENED = "reopened", "Reopened"

    class CannotAssess(models.TextChoices):
        NONE = "", "—"
        RECORD_LACKS_INFORMATION = "record_lacks_information", "The record lacks the information"
        INSTRUCTION_NOT_APPLICABLE = "instruction_not_applicable", "The instruction does not apply"
        OTHER = "other", "Other"

    assignment = models.OneToOneField(Assignment, on_delete=models.PROTECT, related_name="review")
    status = models.CharField(
        max_length=12, choices=Status.choices, default=Status.DRAFT, db_index=True
    )
    # Response ids in the order shown (labels A, B, … follow it); stored for position-bias analysis.
    shown_order = models.JSONField(default=list)
    # What the browser calls each response, parallel to shown_order: random per review, so a
    # handle carries neither the database id nor the import order (either would let a
    # clinician tell the models apart across instructions).
    handles = models.JSONField(default=list)
    cannot_assess = models.CharField(
        max_length=40, choices=CannotAssess.choices, blank=True, default=""
    )
    cannot_assess_note = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=0)  # bumped on every save: stale-draft guard
    started_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    submitted_at = models.DateTimeField(null=True, blank=True)
    time_spent_seconds = models.PositiveIntegerField(default=0)
    reopened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    reopened_at = models.DateTimeField(null=True, blank=True)
    # Why an admin reopened it, shown to the clinician in the queue and on the review page.
    # Kept after the clinician submits again, as the record of the last reopening.
    reopen_reason = models.TextField(blank=True, max_length=2000)
    submission_token = models.UUIDField(default=uuid.uuid4, editable=False)
    # Edits not yet submitted, merged per response and field (review.services.reviews):
    # {"fields": {"<handle>.<field>" | "<field>": [value, edited_at_ms]}, "tabs": {tab: seq}}.
    # Judgement rows hold the last submitted values; the page shows rows overlaid with this.
    draft = models.JSONField(default=dict, blank=True)
    # The first edit: until then the queue shows the review as new, whatever was opened.
    edited_at = models.DateTimeField(null=True, blank=True)
    # Autosave writes one audit row per review per minute at most; the last one's time.
    save_audited_at = models.DateTimeField(null=True, blank=True)
    # The reviewer also held researcher access while reviewing: they could map responses to
    # models through the exports, so reports leave the review out unless a researcher
    # includes such reviews knowingly.
    reviewer_could_unblind = models.BooleanField(default=False)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return f"Review {self.pk} ({self.status})"

    @property
    def is_editable(self) -> bool:
        return self.status != self.Status.SUBMITTED


class ResponseJudgement(models.Model):
    """A clinician's judgement of one response inside a review. Rank 1 is best; ties allowed."""

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="judgements")
    response = models.ForeignKey(ModelResponse, on_delete=models.PROTECT, related_name="+")
    position = models.PositiveSmallIntegerField()  # 0-based position shown (label = "ABC…"[pos])
    rank = models.PositiveSmallIntegerField(null=True, blank=True)
    is_correct = models.BooleanField(null=True, blank=True)
    error_tags = models.ManyToManyField(ErrorTag, blank=True, related_name="+")
    comment = models.TextField(blank=True, max_length=5000)

    # The slugs of its error tags, set by review.services.reviews.review_judgements (one query
    # for a review's rows, one for all their tags) on the rows it returns.
    tag_slugs: list[str]

    class Meta:
        ordering = ["review", "position"]
        constraints = [
            models.UniqueConstraint(fields=["review", "response"], name="unique_judgement"),
            models.CheckConstraint(
                condition=models.Q(rank__isnull=True) | models.Q(rank__gte=1),
                name="rank_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"Judgement {self.pk} of review {self.review_id}"

    @property
    def label(self) -> str:
        return response_label(self.position)


def response_label(position: int) -> str:
    """Neutral label for the response shown at ``position``: A, B, …, Z, AA, AB…"""
    letters = ""
    n = position
    while True:
        letters = chr(ord("A") + n % 26) + letters
        n = n // 26 - 1
        if n < 0:
            return letters
