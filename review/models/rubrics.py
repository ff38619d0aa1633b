"""Rubrics: what a good answer to an instruction must contain, written and graded by clinicians.

After HealthBench (OpenAI, 2025): each instruction gets criteria written for it, each worth
-10..+10 points (negative for harm or error) with tags (``axis:accuracy``,
``axis:completeness``, ``theme:…``). The models:

- ``Rubric``: one *version* of one instruction's rubric. Its author writes it (the authoring
  assignment: an admin creates the draft naming its author, and may name its reviewer), a
  second clinician reviews it (edit, accept or send back), and only an accepted version is
  graded. An accepted version never changes: revising it starts the next version, a copy.
- ``Criterion``: one line of a version: text, points, tags, order.
- ``CriterionGrading``: one clinician asked to grade one instruction's responses (a study's
  response set) against one accepted rubric version: the grading assignment and its state, as
  ``Review`` is for ranking (draft with autosaved edits, then submitted; same save protocol).
- ``CriterionGrade``: one clinician's verdict on one (response, criterion) of a version:
  ``met`` true/false (for a negative criterion, "met" means the bad thing is present).
  Rows are written at submit only, so every row is a submitted grade; each names the rubric
  version it was made against (``rubric``, equal to ``criterion.rubric``), so analyses can be
  split per version and a later version never silently re-labels earlier grades.
"""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from .records import Instruction, ModelResponse
from .studies import Study

MIN_POINTS = -10
MAX_POINTS = 10


class Rubric(models.Model):
    """One version of an instruction's rubric.

    Status and allowed transitions (made in review.services.rubrics):
      draft     -> in_review  (the author submits it; at least one criterion)
      in_review -> accepted   (a second clinician, never the author, accepts it, possibly after
                               editing its criteria; the edits are audited)
      in_review -> sent_back  (the reviewer sends it back with a note saying why)
      sent_back -> in_review  (the author revises and submits again)
      accepted  -> (frozen)   revising starts version n+1 as a draft copy
    At most one version per instruction is open (not accepted) at a time. Versions imported
    from HealthBench JSONL arrive ``in_review``: a clinician still accepts them before use.
    """

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        IN_REVIEW = "in_review", "In review"
        ACCEPTED = "accepted", "Accepted"
        SENT_BACK = "sent_back", "Sent back"

    instruction = models.ForeignKey(Instruction, on_delete=models.CASCADE, related_name="rubrics")
    version = models.PositiveIntegerField()
    status = models.CharField(
        max_length=12, choices=Status.choices, default=Status.DRAFT, db_index=True
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="rubrics_authored",
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="rubrics_reviewed",
    )
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # Where it came from: "app" (written here) or "healthbench:<file name>" (imported).
    source = models.CharField(max_length=200, default="app")
    # HealthBench's prompt_id when imported, kept so an export gives the same id back.
    external_id = models.CharField(max_length=200, blank=True)
    # The reviewer's note when sending back (shown to the author), or when accepting.
    review_note = models.TextField(blank=True, max_length=2000)
    reviewer_edited = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    submitted_at = models.DateTimeField(null=True, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["instruction", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["instruction", "version"], name="unique_rubric_version"
            ),
            models.UniqueConstraint(
                fields=["instruction"],
                condition=~models.Q(status="accepted"),
                name="one_open_rubric_version",
            ),
            # The second clinician's review is the point: the author never reviews their own.
            models.CheckConstraint(
                condition=models.Q(author__isnull=True)
                | models.Q(reviewer__isnull=True)
                | ~models.Q(author=models.F("reviewer")),
                name="rubric_reviewer_not_author",
            ),
        ]

    def __str__(self) -> str:
        # Callers listing many select_related("instruction").
        return f"{self.instruction.instruction_id} v{self.version} ({self.get_status_display()})"


class Criterion(models.Model):
    """One criterion of a rubric version: met or not met by a response."""

    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="criteria")
    order = models.PositiveSmallIntegerField(default=0)
    text = models.TextField(max_length=2000)
    points = models.SmallIntegerField()
    tags = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["rubric", "order", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(points__gte=MIN_POINTS)
                & models.Q(points__lte=MAX_POINTS)
                & ~models.Q(points=0),
                name="criterion_points_range",
            )
        ]

    def __str__(self) -> str:
        return f"criterion {self.pk} ({self.points:+d}) of rubric {self.rubric_id}"


class CriterionGrading(models.Model):
    """One clinician grading one instruction's responses against one accepted rubric version.

    Status and allowed transitions (made in review.services.grading):
      draft     -> draft      (autosave: edits merged per (response, criterion), as for reviews)
      draft     -> submitted  (every criterion marked for every response)
    Submitting twice is a no-op that returns the same grading; a submitted one is read-only.
    Responses are shown under per-grading random handles in a CSPRNG order, as on the review
    page, so grading is blinded the same way.
    """

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted"

    study = models.ForeignKey(Study, on_delete=models.RESTRICT, related_name="gradings")
    instruction = models.ForeignKey(Instruction, on_delete=models.CASCADE, related_name="gradings")
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="gradings")
    clinician = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="gradings"
    )
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    status = models.CharField(
        max_length=12, choices=Status.choices, default=Status.DRAFT, db_index=True
    )
    shown_order = models.JSONField(default=list)  # response ids, in the order shown
    handles = models.JSONField(default=list)  # parallel to shown_order
    # {"fields": {"<handle>.<criterion id>": [met, edited_at_ms]}, "tabs": {tab: seq}}
    draft = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=0)  # bumped on every save
    started_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    submitted_at = models.DateTimeField(null=True, blank=True)
    time_spent_seconds = models.PositiveIntegerField(default=0)
    submission_token = models.UUIDField(default=uuid.uuid4, editable=False)
    # Autosave writes one audit row per grading per minute at most (as for reviews); the last.
    save_audited_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["clinician", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "rubric", "clinician"], name="unique_criterion_grading"
            )
        ]

    def __str__(self) -> str:
        return f"grading {self.pk} ({self.status})"

    @property
    def is_editable(self) -> bool:
        return self.status != self.Status.SUBMITTED


class CriterionGrade(models.Model):
    """A clinician's submitted verdict on one criterion for one response."""

    grading = models.ForeignKey(CriterionGrading, on_delete=models.CASCADE, related_name="grades")
    clinician = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    response = models.ForeignKey(ModelResponse, on_delete=models.PROTECT, related_name="+")
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="grades")
    criterion = models.ForeignKey(Criterion, on_delete=models.PROTECT, related_name="grades")
    met = models.BooleanField(null=True, blank=True)
    graded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["grading", "response", "criterion"]
        constraints = [
            models.UniqueConstraint(
                fields=["grading", "response", "criterion"], name="unique_criterion_grade"
            )
        ]
        indexes = [models.Index(fields=["rubric", "response"], name="criterion_grade_rubric")]

    def __str__(self) -> str:
        return f"grade of criterion {self.criterion_id} for response {self.response_id}"
