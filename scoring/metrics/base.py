"""Common types for the metric backends (plain Python: no Django imports anywhere in this package).

Identity and hashing
--------------------
``MetricBackend.identity()`` returns a JSON-serializable description of everything that determines
the numbers a backend produces: backend name, model identity (hub id + revision, or a local folder's
name plus the sha256 of its weight/config/tokenizer files), every option (defaults applied) and the
relevant library versions.  Machine-specific absolute paths are reported too, but only under the
top-level ``"location"`` key, which ``identity_hash()`` leaves out: the same model files and options
hash the same on every machine, whatever folder they were installed in.

Model cache
-----------
Loaded models live in a module-level, per-process cache (``_MODEL_CACHE``) filled lazily on the
first ``score()``: never at import, never per call.  A Celery prefork worker therefore loads after
the fork and keeps the model for all its tasks.  ``clear_model_cache()`` empties it (tests).
"""

from __future__ import annotations

import abc
import hashlib
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, ClassVar

__all__ = [
    "LOCATION_KEY",
    "MetricBackend",
    "MetricUnavailable",
    "Pair",
    "Scored",
    "cached_model",
    "canonical_json",
    "clear_model_cache",
    "file_sha256",
    "library_versions",
    "model_cache_info",
    "set_offline_env",
]

LOCATION_KEY = "location"


@dataclass(frozen=True)
class Pair:
    source: str  # the instruction (COMET src)
    hypothesis: str  # the model response
    reference: str  # the clinician reference answer
    # The patient's serialized record (scoring.generation.record_text.RecordText), given only to
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


def set_offline_env() -> None:
    """Default the Hugging Face libraries to offline mode (call before importing transformers)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def library_versions(*distributions: str) -> dict[str, str | None]:
    """Installed versions from package metadata (``bert_score.__version__`` is stale in 0.3.13)."""
    out: dict[str, str | None] = {}
    for dist in distributions:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


# --------------------------------------------------------------------------- file hashing

_HASH_CACHE: dict[tuple[str, int, int], str] = {}
_HASH_LOCK = threading.Lock()
_CHUNK = 1 << 20  # 1 MiB
_PROGRESS_EVERY = 64 * _CHUNK


def file_sha256(
    path: str | os.PathLike[str], *, progress: Callable[[int], None] | None = None
) -> str:
    """sha256 of a file, read in 1 MiB chunks; cached per (real path, size, mtime_ns).

    ``progress(bytes_read)`` is called every 64 MiB read and at the end (not when cached)."""
    real = os.path.realpath(path)
    st = os.stat(real)
    key = (real, st.st_size, st.st_mtime_ns)
    with _HASH_LOCK:
        cached = _HASH_CACHE.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    read = 0
    with open(real, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            read += len(chunk)
            if progress is not None and read % _PROGRESS_EVERY == 0:
                progress(read)
    if progress is not None:
        progress(read)
    value = digest.hexdigest()
    with _HASH_LOCK:
        _HASH_CACHE[key] = value
    return value


# --------------------------------------------------------------------------- model cache

_MODEL_CACHE: dict[tuple, Any] = {}
_MODEL_LOADS: dict[tuple, int] = {}
_CACHE_LOCK = threading.RLock()


def _reinit_locks_after_fork() -> None:  # a lock held by another thread at fork time stays held
    global _CACHE_LOCK, _HASH_LOCK
    _CACHE_LOCK = threading.RLock()
    _HASH_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_locks_after_fork)


def cached_model(key: tuple, loader: Callable[[], Any]) -> Any:
    """Return the per-process cached object for ``key``, calling ``loader()`` once if missing."""
    with _CACHE_LOCK:
        if key not in _MODEL_CACHE:
            _MODEL_CACHE[key] = loader()
            _MODEL_LOADS[key] = _MODEL_LOADS.get(key, 0) + 1
        return _MODEL_CACHE[key]


def clear_model_cache() -> None:
    """Drop every cached model (and the load counters) of this process."""
    with _CACHE_LOCK:
        _MODEL_CACHE.clear()
        _MODEL_LOADS.clear()


def model_cache_info() -> dict[str, int]:
    """``{"entries": models cached now, "loads": loads since the last clear_model_cache()}``."""
    with _CACHE_LOCK:
        return {"entries": len(_MODEL_CACHE), "loads": sum(_MODEL_LOADS.values())}


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
