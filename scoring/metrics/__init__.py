"""Metric backends for MedAlign Review (plain Python, no Django).

    from scoring.metrics import Pair, get_backend
    backend = get_backend("bertscore")          # options validated, defaults applied
    backend.check_available()                   # MetricUnavailable(reason) if it cannot run here
    backend.identity_hash()                     # what produced the numbers
    backend.score([Pair(source, hypothesis, reference)])  # -> [{"precision", "recall", "f1"}]
    backend.score_detailed(pairs)               # -> [Scored(values, truncated)]
    backend.provenance()                        # flat description for reports

Backends: ``bertscore``, ``comet`` (model queue), ``rougeL``, ``bleu``, ``chrf``, ``meteor``
(lexical; METEOR needs WordNet's files, see ``meteor``), ``jury`` (judge models).

Importing this package loads no model and imports neither torch nor transformers; model backends
load lazily on the first ``score()`` and cache the model per process (see ``base``).
"""

from __future__ import annotations

from typing import Any

from scoring.weights import clear_model_cache, model_cache_info

from . import embedding_cache
from .base import MetricBackend, MetricUnavailable, Pair, Scored
from .bertscore import BertScoreBackend
from .comet import CometBackend
from .jury import JuryBackend
from .lexical import BleuBackend, ChrfBackend, RougeLBackend
from .meteor import MeteorBackend

__all__ = [
    "BACKENDS",
    "BertScoreBackend",
    "BleuBackend",
    "ChrfBackend",
    "CometBackend",
    "JuryBackend",
    "MeteorBackend",
    "MetricBackend",
    "MetricUnavailable",
    "Pair",
    "RougeLBackend",
    "Scored",
    "backend_class",
    "clear_model_cache",
    "embedding_cache",
    "get_backend",
    "model_cache_info",
]

BACKENDS: dict[str, type[MetricBackend]] = {
    cls.name: cls
    for cls in (
        BertScoreBackend,
        CometBackend,
        RougeLBackend,
        BleuBackend,
        ChrfBackend,
        MeteorBackend,
        JuryBackend,
    )
}


def backend_class(name: str) -> type[MetricBackend]:
    """The backend class registered under ``name`` (ValueError naming the valid ones)."""
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        valid = ", ".join(BACKENDS)
        raise ValueError(f"unknown metric backend {name!r}; valid names: {valid}") from None


def get_backend(name: str, **options: Any) -> MetricBackend:
    """A configured backend instance; unknown name or option -> ValueError."""
    return backend_class(name)(**options)
