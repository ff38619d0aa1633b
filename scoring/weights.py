"""Model weights on this machine: found offline, hashed once, loaded once per process.

Every model this app runs (the metric backends, the generation and jury backends, the grader)
is read from local files and never downloaded at run time: ``set_offline_env`` puts the Hugging
Face libraries in offline mode before they are imported.

Loaded models live in a module-level, per-process cache filled lazily on first use: never at
import, never per call. A Celery prefork worker therefore loads after the fork and keeps the
model for all its tasks; ``clear_model_cache()`` empties it (tests). Files are hashed (sha256)
once per (real path, size, mtime) so that every score and generation records what produced it.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from importlib import metadata
from typing import Any


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

_MODEL_CACHE: dict[tuple[Any, ...], Any] = {}
_MODEL_LOADS: dict[tuple[Any, ...], int] = {}
_CACHE_LOCK = threading.RLock()


def _reinit_locks_after_fork() -> None:  # a lock held by another thread at fork time stays held
    global _CACHE_LOCK, _HASH_LOCK
    _CACHE_LOCK = threading.RLock()
    _HASH_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_locks_after_fork)


def cached_model(key: tuple[Any, ...], loader: Callable[[], Any]) -> Any:
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
