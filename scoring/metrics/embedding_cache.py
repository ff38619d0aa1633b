"""Embedding cache: a text is embedded once per model identity, whatever batch or run asks again.

Key: ``(namespace, sha256(text))``.  The namespace is the sha256 of what determines the vectors:
the model's file hashes (weights, config, tokenizer), the layer and the kind of vector (BERTScore
token vectors, COMET sentence vectors).  Options that only change how vectors are *combined*
(idf, baseline rescaling, reference aggregation, batch size) are not in it, so a second metric
configuration on the same model, or a new reference aggregation, costs no forward pass.

Two tiers, both per worker process and shared by every batch and run it executes:

* memory: an LRU of decoded entries bounded by bytes (``memory_bytes``);
* disk (optional, ``directory``): one file per entry, ``<dir>/<namespace[:16]>/<key[:2]>/<key>``,
  written atomically (temporary file + ``os.replace``) so concurrent worker processes never see
  half an entry.  A read touches the file's mtime; when the folder grows past ``max_bytes`` the
  least recently used files are deleted down to 90% of it.  A missing or corrupt file is a miss.

Entries hold the token ids (int32, for idf weights and truncation counts), the vectors (float32:
1e-6 parity with the libraries rules out float16) and whether the model cut the text.  Vectors
computed on a GPU differ from CPU ones by rounding (~1e-7), so the device is not in the key.

Plain Python: the Django side calls :func:`configure` with the settings.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "CacheEntry",
    "cache_info",
    "clear_memory",
    "configure",
    "get_many",
    "namespace_for",
    "put_many",
    "record_encoded",
    "text_key",
]

_MAGIC = b"MAE1"
_HEADER = struct.Struct("<4sIIIB")  # magic, n_ids, rows, dim, truncated


@dataclass(frozen=True)
class CacheEntry:
    ids: np.ndarray  # int32 token ids as fed to the model (after any truncation)
    vectors: np.ndarray  # float32, (rows, dim) token vectors or (dim,) sentence vector
    truncated: bool  # the model cut the text to its maximum input length

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.vectors.nbytes)

    def encode(self) -> bytes:
        vec = np.ascontiguousarray(self.vectors, dtype=np.float32)
        rows, dim = (1, vec.shape[0]) if vec.ndim == 1 else vec.shape
        flag = (2 if vec.ndim == 1 else 0) | int(self.truncated)
        head = _HEADER.pack(_MAGIC, len(self.ids), rows, dim, flag)
        return head + np.ascontiguousarray(self.ids, dtype=np.int32).tobytes() + vec.tobytes()

    @classmethod
    def decode(cls, blob: bytes) -> CacheEntry:
        magic, n_ids, rows, dim, flag = _HEADER.unpack_from(blob)
        if magic != _MAGIC:
            raise ValueError("not an embedding cache entry")
        offset = _HEADER.size
        ids = np.frombuffer(blob, dtype=np.int32, count=n_ids, offset=offset)
        offset += 4 * n_ids
        vec = np.frombuffer(blob, dtype=np.float32, count=rows * dim, offset=offset)
        if len(blob) != offset + 4 * rows * dim:
            raise ValueError("truncated embedding cache entry")
        vec = vec.reshape(dim) if flag & 2 else vec.reshape(rows, dim)
        return cls(ids=ids, vectors=vec, truncated=bool(flag & 1))


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def namespace_for(parts: dict) -> str:
    import json

    return hashlib.sha256(
        json.dumps(parts, sort_keys=True, separators=(",", ":")).encode("utf-8")
    ).hexdigest()


class _Cache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.directory: Path | None = None
        self.max_bytes = 2 << 30
        self.memory_bytes = 256 << 20
        self.memory: OrderedDict[tuple[str, str], CacheEntry] = OrderedDict()
        self.memory_used = 0
        self.disk_used: int | None = None  # estimate; rescanned before evicting
        self.stats = {
            "memory_hits": 0,
            "disk_hits": 0,
            "misses": 0,
            "writes": 0,
            "evicted": 0,
            "encoded": 0,  # texts that went through a model's forward pass in this process
        }

    # ---------------------------------------------------------------- memory tier
    def _remember(self, key: tuple[str, str], entry: CacheEntry) -> None:
        if self.memory_bytes <= 0 or entry.nbytes > self.memory_bytes:
            return
        old = self.memory.pop(key, None)
        if old is not None:
            self.memory_used -= old.nbytes
        self.memory[key] = entry
        self.memory_used += entry.nbytes
        while self.memory_used > self.memory_bytes and self.memory:
            _, dropped = self.memory.popitem(last=False)
            self.memory_used -= dropped.nbytes

    # ---------------------------------------------------------------- disk tier
    def _path(self, namespace: str, key: str) -> Path:
        assert self.directory is not None
        return self.directory / namespace[:16] / key[:2] / key

    def _read(self, namespace: str, key: str) -> CacheEntry | None:
        path = self._path(namespace, key)
        try:
            blob = path.read_bytes()
            entry = CacheEntry.decode(blob)
        except (OSError, ValueError, struct.error):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # LRU order for the size cap
        return entry

    def _write(self, namespace: str, key: str, entry: CacheEntry) -> None:
        path = self._path(namespace, key)
        blob = entry.encode()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
            os.replace(tmp, path)
        except OSError:
            return  # a full or read-only disk costs recomputation, never a failed batch
        self.stats["writes"] += 1
        if self.disk_used is None:
            self.disk_used = self._scan_size()
        self.disk_used += len(blob)
        if self.disk_used > self.max_bytes:
            self._evict()

    def _files(self) -> list[tuple[float, int, str]]:
        out = []
        assert self.directory is not None
        for root, _dirs, files in os.walk(self.directory):
            for name in files:
                full = os.path.join(root, name)
                try:
                    st = os.stat(full)
                except OSError:
                    continue
                out.append((st.st_mtime, st.st_size, full))
        return out

    def _scan_size(self) -> int:
        return sum(size for _, size, _ in self._files()) if self.directory else 0

    def _evict(self) -> None:
        files = sorted(self._files())  # oldest mtime first (other processes write here too)
        total = sum(size for _, size, _ in files)
        target = int(self.max_bytes * 0.9)
        for _mtime, size, full in files:
            if total <= target:
                break
            try:
                os.remove(full)
            except OSError:
                continue
            total -= size
            self.stats["evicted"] += 1
        self.disk_used = total


_CACHE = _Cache()


def _reinit_after_fork() -> None:
    _CACHE.lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_after_fork)


def configure(
    *, directory: str | os.PathLike[str] | None, max_bytes: int, memory_bytes: int
) -> None:
    """Where the disk tier lives (None: memory only) and its bounds.  Idempotent."""
    with _CACHE.lock:
        new_dir = Path(directory).resolve() if directory else None
        if new_dir != _CACHE.directory:
            _CACHE.directory = new_dir
            _CACHE.disk_used = None
            _CACHE.memory.clear()
            _CACHE.memory_used = 0
        _CACHE.max_bytes = int(max_bytes)
        _CACHE.memory_bytes = int(memory_bytes)
        while _CACHE.memory_used > _CACHE.memory_bytes and _CACHE.memory:
            _, dropped = _CACHE.memory.popitem(last=False)
            _CACHE.memory_used -= dropped.nbytes


def get_many(namespace: str, keys: Iterable[str]) -> dict[str, CacheEntry]:
    """The cached entries among ``keys`` (memory first, then disk)."""
    found: dict[str, CacheEntry] = {}
    with _CACHE.lock:
        for key in dict.fromkeys(keys):
            full = (namespace, key)
            entry = _CACHE.memory.get(full)
            if entry is not None:
                _CACHE.memory.move_to_end(full)
                _CACHE.stats["memory_hits"] += 1
                found[key] = entry
                continue
            if _CACHE.directory is not None:
                entry = _CACHE._read(namespace, key)
                if entry is not None:
                    _CACHE.stats["disk_hits"] += 1
                    _CACHE._remember(full, entry)
                    found[key] = entry
                    continue
            _CACHE.stats["misses"] += 1
    return found


def put_many(namespace: str, entries: dict[str, CacheEntry]) -> None:
    with _CACHE.lock:
        for key, entry in entries.items():
            _CACHE._remember((namespace, key), entry)
            if _CACHE.directory is not None:
                _CACHE._write(namespace, key, entry)


def record_encoded(n: int) -> None:
    """Count texts that went through a forward pass (tests prove reuse with it)."""
    with _CACHE.lock:
        _CACHE.stats["encoded"] += n


def clear_memory() -> None:
    """Forget the memory tier (tests: prove that the disk tier alone serves a new process)."""
    with _CACHE.lock:
        _CACHE.memory.clear()
        _CACHE.memory_used = 0


def cache_info() -> dict[str, object]:
    with _CACHE.lock:
        return {
            "directory": str(_CACHE.directory) if _CACHE.directory else None,
            "max_bytes": _CACHE.max_bytes,
            "memory_bytes": _CACHE.memory_bytes,
            "memory_used": _CACHE.memory_used,
            "memory_entries": len(_CACHE.memory),
            **_CACHE.stats,
        }
