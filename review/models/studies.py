"""Studies: the frozen design clinicians review under.

A study fixes, for one dataset, which responses each instruction is reviewed with (its response
set) and how instructions are assigned. Responses reach a study only through an admin's audited
step (``review.services.studies``): an import's responses, a completed generation run's, or one
model's; a generation run by itself only produces candidates. Once any review of an instruction
in a study has started, that instruction's response set never changes: a different set is a new
study (a new round, with its own assignments).
"""

from django.conf import settings
from django.db import models
from django.utils import timezone

from .records import Dataset, Instruction, ModelResponse


class Study(models.Model):
    """One round of review over a dataset.

    ``assignment_mode`` and ``assignment_params`` record how instructions were assigned
    (uniform with an overlap; adaptive with its sampling probabilities), so every report can say
    what design produced its judgements.
    """

    class AssignmentMode(models.TextChoices):
        UNIFORM = "uniform", "Uniform (every instruction, a fixed overlap)"
        ADAPTIVE = "adaptive", "Adaptive (sampling probabilities recorded)"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="studies")
    round = models.PositiveIntegerField()
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    assignment_mode = models.CharField(
        max_length=12, choices=AssignmentMode.choices, default=AssignmentMode.UNIFORM
    )
    assignment_params = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["dataset", "round"]
        verbose_name_plural = "studies"
        constraints = [
            models.UniqueConstraint(fields=["dataset", "round"], name="unique_study_round")
        ]

    def __str__(self) -> str:
        return f"{self.dataset.name} · {self.name}"


class StudyResponse(models.Model):
    """A response in a study's response set. ``instruction`` repeats the response's own, so
    the review page reads one instruction's set from one index."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="responses")
    instruction = models.ForeignKey(Instruction, on_delete=models.CASCADE, related_name="+")
    response = models.ForeignKey(ModelResponse, on_delete=models.RESTRICT, related_name="studies")
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    added_at = models.DateTimeField(default=timezone.now)
    # How it joined: "import", "generation run 12", "model gpt-4"; shown to admins.
    source = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["study", "instruction", "response"]
        constraints = [
            models.UniqueConstraint(fields=["study", "response"], name="unique_study_response")
        ]
        indexes = [models.Index(fields=["study", "instruction"], name="study_response_instr")]

    def __str__(self) -> str:
        return f"response {self.response_id} in study {self.study_id}"


class SamplingDraw(models.Model):
    """An instruction's turn in an adaptive study (``review.services.adaptive``).

    Each instruction of an adaptive study is walked once, in the wave its place in the
    study's seeded order puts it: it gets the probability ``probability`` of being reviewed,
    fixed from what was known before the wave, and is reviewed when ``draw`` (a uniform number
    from the study's seed) falls below it. The estimates weight its reviews by
    ``1 / probability`` (active inference), so the probability is kept for ever.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="draws")
    instruction = models.ForeignKey(Instruction, on_delete=models.CASCADE, related_name="+")
    wave = models.PositiveIntegerField()  # 1, 2, …
    probability = models.FloatField()
    draw = models.FloatField()
    drawn = models.BooleanField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["study", "wave", "instruction"]
        constraints = [
            models.UniqueConstraint(fields=["study", "instruction"], name="unique_sampling_draw"),
            models.CheckConstraint(
                condition=models.Q(probability__gt=0) & models.Q(probability__lte=1),
                name="sampling_probability_in_0_1",
            ),
        ]

    def __str__(self) -> str:
        return f"instruction {self.instruction_id} in wave {self.wave} (p={self.probability:.3f})"
