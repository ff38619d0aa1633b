"""A response's generation provenance as flat export columns (reports' per-response table).

Generated responses carry it in ``generation_metadata["generation"]`` (``scoring.generation.work``);
imported ones have their context length and truncation policy from the release and nothing else.
Ids, hashes, versions and numbers only: never the prompt, the record or the response text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from review.models import ModelResponse

GENERATION_COLUMNS = [
    "context_length",
    "truncation_policy",
    "generation_run",
    "generation_model",
    "generation_weights_sha256",
    "generation_endpoint",
    "generation_tokens_kept",
    "generation_prompt_tokens",
    "generation_completion_tokens",
    "generation_prompt_sha256",
    "generation_serialization",
    "generation_template",
    "generation_max_new_tokens",
    "generation_temperature",
    "generation_top_p",
    "generation_seed",
]


def provenance_columns(metadata: dict[str, Any] | None) -> dict[str, Any]:
    gen = (metadata or {}).get("generation")
    if not isinstance(gen, dict):
        return {}
    raw_model, raw_params = gen.get("model"), gen.get("params")
    model: dict[str, Any] = raw_model if isinstance(raw_model, dict) else {}
    params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
    return {
        "generation_run": gen.get("run"),
        "generation_model": model.get("model"),
        "generation_weights_sha256": model.get("weights_sha256"),
        "generation_endpoint": model.get("endpoint"),
        "generation_tokens_kept": gen.get("tokens_kept"),
        "generation_prompt_tokens": gen.get("prompt_tokens"),
        "generation_completion_tokens": gen.get("completion_tokens"),
        "generation_prompt_sha256": gen.get("prompt_sha256"),
        "generation_serialization": gen.get("serialization_version"),
        "generation_template": gen.get("template_version"),
        "generation_max_new_tokens": params.get("max_new_tokens"),
        "generation_temperature": params.get("temperature"),
        "generation_top_p": params.get("top_p"),
        "generation_seed": params.get("seed"),
    }


def add_generation_columns(rows: Iterable[dict[str, Any]]) -> None:
    """Fill ``GENERATION_COLUMNS`` on per-response rows (keyed by ``response_id``), one query."""
    rows = list(rows)
    ids = {row["response_id"] for row in rows}
    found = {
        pk: (length, policy, meta)
        for pk, length, policy, meta in ModelResponse.objects.filter(pk__in=ids).values_list(
            "pk", "context_length", "truncation_policy", "generation_metadata"
        )
    }
    for row in rows:
        length, policy, meta = found.get(row["response_id"], (None, "", None))
        row.update(dict.fromkeys(GENERATION_COLUMNS))
        row["context_length"] = length
        row["truncation_policy"] = policy or None
        row.update(provenance_columns(meta))
