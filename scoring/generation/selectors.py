"""Reads for the generation pages: a run's responses and recent runs (progress:
``scoring.runs.selectors``; a patient's record as text: ``scoring.llm.records``)."""

from __future__ import annotations

from django.db.models import QuerySet

from review.models import ModelResponse
from scoring.models import GenerationRun

from .names import run_response_names


def generation_responses(run: GenerationRun, limit: int = 200) -> QuerySet[ModelResponse]:
    """The run's responses with their provenance, for the run page (no text is shown there)."""
    names = run_response_names(run.label, run.context_lengths)
    return (
        ModelResponse.objects.filter(instruction__dataset_id=run.dataset_id, model_name__in=names)
        .select_related("instruction")
        .only(
            "id",
            "model_name",
            "context_length",
            "truncation_policy",
            "names_own_model",
            "generation_metadata",
            "instruction__instruction_id",
        )
        .order_by("instruction__instruction_id", "context_length")[:limit]
    )


def generation_runs_recent(limit: int = 50) -> QuerySet[GenerationRun]:
    return GenerationRun.objects.select_related("dataset", "created_by")[:limit]
