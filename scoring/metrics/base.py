"""Common types for the metric backends (plain Python: no Django imports anywhere in this package).

Identity and hashing
--------------------
``MetricBackend.identity()`` returns a JSON-serializable description of everything that determines
the numbers a backend produces: backend name, model identity (hub id + revision, or a local folder's
name plus the sha256 of its weight/config/tokenizer files), every option (defaults applied) and the
relevant library versions.  Machine-specific absolute paths are reported too, but only under the
top-level ``"location"`` key, which ``identity_hash()`` leaves out: the same model files and options
hash the same on every machine, whatever folder they were installed in.

Models load through ``scoring.weights`` (once per process, lazily on the first ``score()``).
"""

from __future__ import annotations

import abc
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from scoring.weights import canonical_json

__all__ = [
    "LOCATION_KEY",
    "MetricBackend",
    "MetricUnavailable",
    "Pair",
    "Scored",
]

LOCATION_KEY = "location"


@dataclass(frozen=True)
class Pair:
    source: str  # the instruction (COMET src)
    hypothesis: str  # the model response
    reference: str  # the clinician reference answer
    # The patient's serialized record (scoring.llm.record_text.RecordText), given only to
    # a backend that reads it (``reads_record``: the LLM jury); left out of equality and hashing.
    record: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Scored:
    """One pair's values, and whether the metric's model cut the candidate, source or reference
    to fit its maximum input length (the score then judged only part of the text)."""

    values: dict[str, float]
    truncated: bool = False


class MetricUnavailable(Exception):
    """Raised with a human-readable reason when a backend cannot load (e.g. no COMET checkpoint)."""


# --------------------------------------------------------------------------- backend base


class MetricBackend(abc.ABC):
    """One metric.  Subclasses declare ``option_defaults`` (the only accepted options) and may
    override ``_validate`` to check/normalize them."""

    name: ClassVar[str]  # registry key: "bertscore", "comet", "rougeL", "bleu", "chrf", "meteor"
    primary: ClassVar[str]  # key of the headline value in score dicts
    kind: ClassVar[str]  # "model" (gpu queue) or "lexical" (cpu queue)
    option_defaults: ClassVar[Mapping[str, Any]] = {}
    reads_record: ClassVar[bool] = False  # wants each Pair's ``record`` (serializing costs)

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(self.option_defaults))
        if unknown:
            valid = ", ".join(sorted(self.option_defaults)) or "(none)"
            raise ValueError(
                f"unknown option(s) for metric {self.name!r}: {', '.join(unknown)}; valid: {valid}"
            )
        merged = {**self.option_defaults, **options}
        self.options: dict[str, Any] = self._validate(merged)

    def _validate(self, options: dict[str, Any]) -> dict[str, Any]:
        return options

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options!r})"

    @abc.abstractmethod
    def identity(self) -> dict[str, Any]:
        """JSON-serializable, deterministic description (see module docstring)."""

    def identity_hash(self) -> str:
        """sha256 of the canonical JSON of ``identity()`` without its ``"location"`` key."""
        ident = {k: v for k, v in self.identity().items() if k != LOCATION_KEY}
        return hashlib.sha256(canonical_json(ident).encode("utf-8")).hexdigest()

    @abc.abstractmethod
    def check_available(self) -> None:
        """Raise ``MetricUnavailable(reason)`` if the backend cannot score here (cheap checks)."""

    @abc.abstractmethod
    def score(self, pairs: Sequence[Pair]) -> list[dict[str, float]]:
        """One dict per pair, same order."""

    def score_detailed(self, pairs: Sequence[Pair]) -> list[Scored]:
        """Like ``score`` with the truncation flag; lexical metrics never truncate."""
        return [Scored(values) for values in self.score(pairs)]

    def provenance(self) -> dict[str, Any]:
        """Flat, human-readable description for reports (see ``scoring.models.MetricConfig``)."""
        ident = self.identity()
        return {
            "metric": self.name,
            "options": ident.get("options", {}),
            "library_versions": ident.get("versions", {}),
        }

    @staticmethod
    def _check_pairs(pairs: Sequence[Pair]) -> list[Pair]:
        pairs = list(pairs)
        for i, pair in enumerate(pairs):
            for name in ("source", "hypothesis", "reference"):
                if not isinstance(getattr(pair, name, None), str):
                    raise TypeError(f"pairs[{i}].{name} must be a str")
        return pairs
