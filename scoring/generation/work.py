"""Generating one batch of responses: prompts built, the model called, responses written once.

``generate_responses`` is what a generation batch does (``scoring.generation.runs``), and what the
command line's ``--inline`` and the tests call. It is idempotent: a response is unique per
(instruction, model name) and the model name carries the context length
(``response_model_name``), so an instruction that already has its response is skipped and each
new one is inserted with ``ignore_conflicts`` as soon as it is generated: a worker killed mid-batch
keeps what it finished, and its batch run again writes only what is missing.

Provenance, in ``ModelResponse.generation_metadata["generation"]`` (and the response's own
``context_length``, ``truncation_policy``, ``generation_length`` = max new tokens):
``run``, ``model`` (the backend's identity: weights sha256, or endpoint + model name; tokenizer
sha256), ``served_model``, ``context_length``, ``tokens_kept`` (record tokens in the prompt),
``prompt_tokens``, ``completion_tokens``, ``finish_reason``, ``truncation_policy``,
``record_truncated``, ``record_chars_total``/``record_chars_kept``, ``visits_selected``/
``visits_total`` (bm25), ``serialization_version``, ``template_version``, ``prompt_sha256``,
``params`` (max_new_tokens, temperature, top_p, seed), ``seconds``, ``generated_at``; ``prompt``
only when ``GENERATION_STORE_PROMPTS`` is set. ``generation_metadata["base_model"]`` names the
model for the context-length analysis (``scoring.reports.selectors.model_variants``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils import timezone

from review.blinding import names_a_model
from review.models import Instruction, ModelResponse
from scoring.llm.backends import GenerationBackend, GenerationParams, backend_from_spec
from scoring.llm.prompts import PromptTemplate, build_prompt
from scoring.llm.record_text import SERIALIZATION_VERSION
from scoring.llm.records import record_text

from .names import response_model_name

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GenerationJob:
    """What a batch generates with (stored on its run)."""

    backend_spec: dict[str, Any]
    model_identity: dict[str, Any]
    label: str
    context_length: int
    policy: str
    template: PromptTemplate
    params: GenerationParams
    run_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def model_name(self) -> str:
        return response_model_name(self.label, self.context_length)


def generate_responses(
    *, job: GenerationJob, instruction_ids: Iterable[int], backend: GenerationBackend | None = None
) -> int:
    """Generate the missing responses of ``instruction_ids``; returns how many were written."""
    ids = list(instruction_ids)
    done = set(
        ModelResponse.objects.filter(instruction_id__in=ids, model_name=job.model_name).values_list(
            "instruction_id", flat=True
        )
    )
    todo = [i for i in ids if i not in done]
    if not todo:
        return 0
    backend = backend or backend_from_spec(job.backend_spec)
    tokenizer = backend.tokenizer()
    instructions = {
        i.pk: i for i in Instruction.objects.filter(pk__in=todo).select_related("patient")
    }
    written = 0
    for instruction_id in todo:  # the batch's order: one prompt at a time, never padded together
        instruction = instructions.get(instruction_id)
        if instruction is None or instruction.patient is None:
            continue  # deleted, or its record was never loaded: planning leaves these out
        built = build_prompt(
            record=record_text(instruction.patient),
            question=instruction.question,
            template=job.template,
            tokenizer=tokenizer,
            context_length=job.context_length,
            max_new_tokens=job.params.max_new_tokens,
            policy=job.policy,
        )
        out = backend.generate(built.prompt, job.params)
        provenance: dict[str, Any] = {
            "run": job.run_id,
            "model": job.model_identity,
            "served_model": out.served_model,
            "context_length": job.context_length,
            "tokens_kept": built.record_tokens_kept,
            "prompt_tokens": built.prompt_tokens,
            "completion_tokens": out.completion_tokens,
            "finish_reason": out.finish_reason,
            "truncation_policy": job.policy,
            "record_truncated": built.record_truncated,
            "record_chars_total": built.record_chars_total,
            "record_chars_kept": built.record_chars_kept,
            "visits_selected": built.visits_selected,
            "visits_total": built.visits_total,
            "serialization_version": SERIALIZATION_VERSION,
            "template_version": job.template.version,
            "prompt_sha256": built.sha256,
            "params": job.params.as_dict(),
            "seconds": round(out.seconds, 4),
            "generated_at": timezone.now().isoformat(),
        }
        if settings.GENERATION_STORE_PROMPTS:
            provenance["prompt"] = built.prompt
        response = ModelResponse(
            instruction=instruction,
            model_name=job.model_name,
            text=out.text,
            context_length=job.context_length,
            truncation_policy=job.policy,
            generation_length=job.params.max_new_tokens,
            generation_metadata={"base_model": job.label, "generation": provenance},
            # Masked for clinicians (review.blinding) like an imported response that names a model.
            names_own_model=names_a_model(out.text, (job.label, out.served_model or job.label)),
        )
        written += len(ModelResponse.objects.bulk_create([response], ignore_conflicts=True))
    return written
