"""What a scoring run needs from the metric backends: their options from settings, presets,
which metrics can run here, the backends cached per process, and the stored identity of a
configuration (``MetricConfig``) every score records. (``scoring.metrics`` itself imports no
Django; this is where settings and models meet it.)
"""

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from scoring.metrics import MetricBackend, MetricUnavailable, embedding_cache, get_backend
from scoring.models import MetricConfig

METRIC_LABELS = {
    "bertscore": "BERTScore F1",
    "comet": "COMET",
    "rougeL": "ROUGE-L F",
    "bleu": "BLEU",
    "chrf": "chrF++",
    "meteor": "METEOR",
    "jury": "LLM jury",
}
# The jury is not a default: it runs only with judges configured (JURY_JUDGES) and asks each
# judge model for every response.
DEFAULT_METRICS = ("bertscore", "comet", "rougeL", "bleu", "chrf", "meteor")


class ScoringError(Exception):
    """A scoring request that cannot be carried out, with a message for the user."""


def backend_options(name: str) -> dict[str, Any]:
    """Options for a backend from settings (the model choices an operator makes)."""
    if name == "bertscore":
        options: dict[str, Any] = {}
        if settings.BERTSCORE_MODEL:
            options["model"] = settings.BERTSCORE_MODEL
        if settings.BERTSCORE_NUM_LAYERS:
            options["num_layers"] = settings.BERTSCORE_NUM_LAYERS
        return options
    if name == "comet":
        return {"checkpoint": settings.COMET_MODEL or None}
    if name == "meteor":
        return {"wordnet": settings.METEOR_WORDNET_DIR or None}
    if name == "jury":
        return {"judges": list(settings.JURY_JUDGES)}
    return {}


def _configure_embedding_cache() -> None:
    embedding_cache.configure(
        directory=settings.SCORING_EMBEDDING_CACHE_DIR
        if settings.SCORING_EMBEDDING_CACHE_MB
        else None,
        max_bytes=settings.SCORING_EMBEDDING_CACHE_MB << 20,
        memory_bytes=settings.SCORING_EMBEDDING_MEMORY_MB << 20,
    )


# Backends are kept per process: a batch reuses the resolved model, hashes and loaded weights
# instead of validating and resolving them again (no per-batch overhead beyond the database).
_BACKENDS: dict[str, MetricBackend] = {}


def backend_for(name: str, options: dict[str, Any] | None = None) -> MetricBackend:
    """The backend ``name`` with ``options`` (default: from settings), cached per process."""
    _configure_embedding_cache()
    options = backend_options(name) if options is None else options
    key = json.dumps([name, options], sort_keys=True, default=str)
    backend = _BACKENDS.get(key)
    if backend is None:
        backend = _BACKENDS[key] = get_backend(name, **options)
    return backend


# --- presets ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preset:
    key: str
    label: str
    description: str
    # backend name -> options replacing the settings (None: this server's settings)
    metrics: dict[str, dict[str, Any] | None]
    # model id -> what must be in the local Hugging Face cache for it (COMET loads its encoder's
    # config and tokenizer as well)
    cache_needs: dict[str, tuple[str, ...]]


PRESETS: dict[str, Preset] = {
    "medalign-helm": Preset(
        key="medalign-helm",
        label="MedAlign/HELM",
        description=(
            "The metrics MedAlign's and HELM's code used: BERTScore F1 with "
            "distilbert-base-uncased, COMET Unbabel/wmt22-comet-da, chrF++, ROUGE-L, BLEU and "
            "METEOR (NLTK, with this server's WordNet)."
        ),
        metrics={
            "bertscore": {"model": "distilbert-base-uncased"},
            "comet": {"checkpoint": "Unbabel/wmt22-comet-da"},
            "chrf": {},
            "rougeL": {},
            "bleu": {},
            "meteor": None,  # WordNet is no cached model: this server's METEOR_WORDNET_DIR
        },
        cache_needs={
            "distilbert-base-uncased": ("distilbert-base-uncased",),
            "Unbabel/wmt22-comet-da": ("Unbabel/wmt22-comet-da", "xlm-roberta-large"),
        },
    )
}


def _in_hf_cache(repo_id: str) -> bool:
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id=repo_id, local_files_only=True)
    except Exception:  # LocalEntryNotFoundError (an OSError), bad id, ...
        return False
    return True


def preset_missing(preset: Preset) -> list[str]:
    """Model ids the preset needs that are not in the local Hugging Face cache."""
    needed = dict.fromkeys(repo for repos in preset.cache_needs.values() for repo in repos)
    return [repo for repo in needed if not _in_hf_cache(repo)]


def preset_missing_message(preset: Preset, missing: list[str]) -> str:
    """What is missing and how to bring it (this server cannot download models)."""
    names = ", ".join(missing)
    return (
        f"The {preset.label} preset needs models that are not in this server's Hugging Face "
        f"cache: {names}. Models cannot be downloaded here: on a machine with internet access "
        f"run `huggingface-cli download <id>` for each of {names}, then copy the "
        "`models--…` folders from its `~/.cache/huggingface/hub` into this server's cache "
        "(`$HF_HOME/hub`, default `~/.cache/huggingface/hub`) and start the run again."
    )


@dataclass(frozen=True)
class MetricStatus:
    name: str
    label: str
    available: bool
    reason: str = ""


def metric_statuses(names: Iterable[str] = DEFAULT_METRICS) -> list[MetricStatus]:
    """Which metrics can run here, and why not (e.g. no COMET checkpoint configured)."""
    out = []
    for name in names:
        try:
            backend_for(name).check_available()
        except (MetricUnavailable, ValueError) as exc:
            out.append(MetricStatus(name, METRIC_LABELS.get(name, name), False, str(exc)))
        else:
            out.append(MetricStatus(name, METRIC_LABELS.get(name, name), True))
    return out


def metric_config_get_or_create(
    *, backend: MetricBackend, aggregate: str, options: dict[str, Any] | None = None
) -> MetricConfig:
    """The stored identity of a backend's configuration plus the reference aggregation, with
    its provenance (``MetricConfig.provenance``) and the options that rebuild the backend in a
    worker (``identity["backend_options"]``, not part of the hash)."""
    identity = {
        **backend.identity(),
        "reference_aggregate": aggregate,
        "backend_options": options if options is not None else backend_options(backend.name),
    }
    identity_hash = hashlib.sha256(
        json.dumps({"backend": backend.identity_hash(), "aggregate": aggregate}).encode()
    ).hexdigest()
    provenance = {**backend.provenance(), "reference_aggregation": aggregate}
    config, created = MetricConfig.objects.get_or_create(
        identity_hash=identity_hash,
        defaults={
            "backend": backend.name,
            "identity": identity,
            "provenance": provenance,
            "label": f"{METRIC_LABELS.get(backend.name, backend.name)} ({aggregate} reference)",
        },
    )
    if not created and not config.provenance:  # a config stored before provenance existed
        config.provenance = provenance
        config.save(update_fields=["provenance"])
    return config
