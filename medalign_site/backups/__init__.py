"""Backups that restore: the database, the private files and a manifest, checked on the way back.

An archive (a tar stream, optionally encrypted to age public keys) holds:

    database.dump | database.sqlite3   pg_dump's custom format, or a copy of the SQLite file
    files/<name>                        every file of the private storage, by its storage name
    manifest.json                       written last: format, engine, when, and for every table
                                        its rows and sha256, every sequence's last value, every
                                        file's size and sha256, the dump's own sha256

``backup_create`` writes it whole or not at all, mode 600, never inside the application's
folder. ``backup_restore`` refuses a target (database or storage) that holds anything, unpacks
into a private folder and checks every unpacked file against the manifest before it touches
the target, so a corrupt archive leaves nothing behind; then it restores and fingerprints the
target again. Any difference fails the restore with each difference named, and the target is
emptied again (``keep_unverified`` keeps it for inspection).

The keys (``SECRET_KEY``, ``MFA_ENCRYPTION_KEY``) are not in the archive: the restored
installation needs the same ones (docs/operating/backups.md).
"""

import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.files.storage import Storage

from medalign_site.backups.archive import (
    BackupError,
    archive_extract,
    archive_file_write,
    identities_read,
    output_path_check,
    recipients_parse,
    staging_dir_make,
    staging_dir_remove,
    tar_writer,
)
from medalign_site.backups.databases import Fingerprints, database_for, engine_of
from medalign_site.backups.files import (
    HashingReader,
    describe,
    file_sha256,
    storage_delete,
    storage_is_empty,
    storage_names,
    storage_upload,
    stored_sha256,
)

__all__ = ["BackupError", "BackupResult", "RestoreResult", "backup_create", "backup_restore"]

FORMAT = "medalign-backup/1"
DUMP_NAMES = {"postgresql": "database.dump", "sqlite": "database.sqlite3"}


@dataclass(frozen=True)
class BackupResult:
    path: Path
    manifest: dict[str, Any]
    encrypted: bool


@dataclass(frozen=True)
class RestoreResult:
    manifest: dict[str, Any]
    tables: int
    rows: int
    files: int


@dataclass
class _Differences:
    items: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.items.append(text)


def backup_create(
    *,
    output: Path,
    database: Mapping[str, Any],
    storage: Storage,
    base_dir: Path,
    recipients: Sequence[str] = (),
) -> BackupResult:
    """Write a backup of ``database`` and every file of ``storage`` to the new file ``output``."""
    path = output_path_check(output, base_dir=base_dir)
    engine = engine_of(database)
    keys = recipients_parse(recipients)
    staging = staging_dir_make(path.parent, ".medalign-backup-", base_dir=base_dir)
    try:
        dump = staging / DUMP_NAMES[engine]
        tables = database_for(database).dump(dump)
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "database": {
                "engine": engine,
                "file": dump.name,
                "bytes": dump.stat().st_size,
                "sha256": file_sha256(dump),
                "tables": tables,
            },
            "storage": describe(storage),
            "files": {},
        }
        with archive_file_write(path) as out, tar_writer(out, keys) as tar:
            tar.add(dump, arcname=dump.name, recursive=False)
            dump.unlink()  # the plaintext copy goes as soon as it is in the archive
            for name in storage_names(storage):
                manifest["files"][name] = _file_into(tar, storage, name)
            data = json.dumps(manifest, indent=1, sort_keys=True).encode()
            info = tarfile.TarInfo("manifest.json")
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    finally:
        staging_dir_remove(staging)
    return BackupResult(path=path, manifest=manifest, encrypted=bool(keys))


def _file_into(tar: tarfile.TarFile, storage: Storage, name: str) -> dict[str, Any]:
    size = storage.size(name)
    info = tarfile.TarInfo(f"files/{name}")
    info.size, info.mode = size, 0o600
    with storage.open(name, "rb") as source:
        reader = HashingReader(source)
        tar.addfile(info, reader)  # read() is all tarfile uses
    if reader.size != size:
        raise BackupError(f"{name} changed while it was being backed up: run the backup again")
    return {"bytes": size, "sha256": reader.digest.hexdigest()}


def backup_restore(
    *,
    archive: Path,
    database: Mapping[str, Any],
    storage: Storage,
    base_dir: Path,
    staging_parent: Path,
    identity_files: Sequence[Path] = (),
    keep_unverified: bool = False,
) -> RestoreResult:
    """Restore ``archive`` into the empty ``database`` and ``storage`` and verify it."""
    if not archive.is_file():
        raise BackupError(f"{archive} is not a file")
    target = database_for(database)
    if not target.is_empty():
        raise BackupError(
            f"the target database {database['NAME']!r} is not empty: restore only into a new, "
            "empty database (createdb), never over one in use. Nothing was changed"
        )
    if not storage_is_empty(storage):
        raise BackupError(
            f"the target storage ({describe(storage)}) holds files: restore only into an empty "
            "folder or bucket. Nothing was changed"
        )
    identities = identities_read(identity_files)
    staging = staging_dir_make(staging_parent, "medalign-restore-", base_dir=base_dir)
    try:
        archive_extract(archive, staging, identities)
        manifest = _staged_check(staging, archive, engine_of(database))
        return _restore_verified(
            manifest, staging, target, storage, database, keep_unverified=keep_unverified
        )
    finally:
        staging_dir_remove(staging)


def _staged_check(staging: Path, archive: Path, engine: str) -> dict[str, Any]:
    """The manifest, once every unpacked file matches it; BackupError naming what does not."""
    try:
        manifest = json.loads((staging / "manifest.json").read_text())
    except (OSError, ValueError):
        raise BackupError(
            f"{archive} holds no readable manifest: it is not a complete backup. "
            "Nothing was restored"
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{archive} is not a backup this version reads ({FORMAT})")
    db = manifest["database"]
    if db["engine"] != engine:
        raise BackupError(
            f"{archive} holds a {db['engine']} database; the target is {engine}. "
            "Nothing was restored"
        )
    problems = _Differences()
    dump = staging / db["file"]
    if not dump.is_file() or file_sha256(dump) != db["sha256"]:
        problems.add(f"{db['file']}: missing or not the bytes the manifest names")
    expected = {f"files/{name}" for name in manifest["files"]}
    for name, entry in manifest["files"].items():
        path = staging / "files" / name
        if not path.is_file() or file_sha256(path) != entry["sha256"]:
            problems.add(f"files/{name}: missing or not the bytes the manifest names")
    files_dir = staging / "files"
    if files_dir.is_dir():
        for path in sorted(p for p in files_dir.rglob("*") if p.is_file()):
            if str(path.relative_to(staging)) not in expected:
                problems.add(f"{path.relative_to(staging)}: in the archive, not in the manifest")
    if problems.items:
        raise BackupError(
            f"{archive} is corrupt: its contents do not match its manifest. Nothing was "
            "restored.\n  " + "\n  ".join(problems.items)
        )
    return manifest


def _restore_verified(
    manifest: dict[str, Any],
    staging: Path,
    target: Any,
    storage: Storage,
    database: Mapping[str, Any],
    *,
    keep_unverified: bool,
) -> RestoreResult:
    before = target.schemas_and_extensions()
    uploaded: list[str] = []
    try:
        target.restore(staging / manifest["database"]["file"])
        for name in manifest["files"]:
            storage_upload(storage, name, staging / "files" / name)
            uploaded.append(name)
        problems = _verify(manifest, target.fingerprints(), storage)
    except BaseException:
        target.empty_again(before)
        storage_delete(storage, uploaded)
        raise
    if problems.items:
        if keep_unverified:
            outcome = (
                "The target database and storage were KEPT for inspection (--keep-unverified): "
                "never serve from them; drop the database and empty the storage when done."
            )
        else:
            target.empty_again(before)
            storage_delete(storage, uploaded)
            outcome = "The target database and storage were emptied again."
        raise BackupError(
            "RESTORE FAILED VERIFICATION: what was restored differs from the backup's "
            "manifest.\n  " + "\n  ".join(problems.items) + f"\n{outcome}"
        )
    tables = {k: v for k, v in manifest["database"]["tables"].items() if "rows" in v}
    return RestoreResult(
        manifest=manifest,
        tables=len(tables),
        rows=sum(int(v["rows"]) for v in tables.values()),
        files=len(manifest["files"]),
    )


def _verify(manifest: dict[str, Any], found: Fingerprints, storage: Storage) -> _Differences:
    problems = _Differences()
    expected: Fingerprints = manifest["database"]["tables"]
    for name in sorted(set(expected) | set(found)):
        want, got = expected.get(name), found.get(name)
        if want is None:
            problems.add(f"{name}: in the restored database, not in the backup")
        elif got is None:
            problems.add(f"{name}: in the backup, missing from the restored database")
        elif "rows" in want and want["rows"] != got.get("rows"):
            problems.add(f"{name}: {want['rows']} rows in the backup, {got.get('rows')} restored")
        elif want != got:
            problems.add(f"{name}: restored rows differ from the backup's (sha256)")
    stored = set(storage_names(storage))
    for name, entry in manifest["files"].items():
        if name not in stored:
            problems.add(f"files/{name}: missing from the restored storage")
        elif stored_sha256(storage, name) != entry["sha256"]:
            problems.add(f"files/{name}: restored bytes differ from the backup's (sha256)")
    for name in sorted(stored - set(manifest["files"])):
        problems.add(f"files/{name}: in the restored storage, not in the backup")
    return problems
