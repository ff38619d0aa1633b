"""The private files' half of a backup: every file the configured storage holds (a local
folder, or a bucket through ``STORAGE_URL``), read and written through Django's storage API so
that one code path serves both."""

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from django.core.files import File
from django.core.files.storage import Storage

from medalign_site.backups.archive import BackupError

CHUNK = 1024 * 1024


def storage_names(storage: Storage, folder: str = "") -> Iterator[str]:
    """Every file's name in ``storage``, folders walked, in a stable order."""
    try:
        folders, files = storage.listdir(folder)
    except FileNotFoundError:  # a local private folder nothing was ever saved in
        return
    for name in sorted(files):
        yield f"{folder}/{name}" if folder else name
    for sub in sorted(folders):
        yield from storage_names(storage, f"{folder}/{sub}" if folder else sub)


class HashingReader:
    """Reads through to ``source``, hashing and counting what passes."""

    def __init__(self, source: IO[bytes]) -> None:
        self.source = source
        self.digest = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        data = self.source.read(size)
        self.digest.update(data)
        self.size += len(data)
        return data


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def stored_sha256(storage: Storage, name: str) -> str:
    digest = hashlib.sha256()
    with storage.open(name, "rb") as source:
        while block := source.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def storage_upload(storage: Storage, name: str, path: Path) -> None:
    with path.open("rb") as source:
        saved = storage.save(name, File(source, name=name))
    if saved != name:
        # The target held a file of that name after all: the row naming it would now point
        # at someone else's file.
        storage.delete(saved)
        raise BackupError(f"the target storage renamed {name} to {saved}: it is not empty")


def storage_delete(storage: Storage, names: list[str]) -> None:
    for name in names:
        # Best effort: the error raised after this already says the target is not to be used.
        with contextlib.suppress(Exception):
            storage.delete(name)


def storage_is_empty(storage: Storage) -> bool:
    return next(storage_names(storage), None) is None


def describe(storage: Storage) -> str:
    location: Any = getattr(storage, "bucket_name", None)
    if location:
        prefix = getattr(storage, "location", "")
        return f"s3://{location}/{prefix}".rstrip("/")
    return str(getattr(storage, "location", type(storage).__name__))
