"""Backups that restore (medalign_site/backups): the archive and its manifest, refusals, a
corrupt or tampered archive, encryption, and the round trip into an empty database and storage.

They run on the suite's database: PostgreSQL in CI (pg_dump and pg_restore), SQLite by default
(SQLite's backup API); what only PostgreSQL has is skipped on SQLite with the reason.
"""

import io
import json
import os
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, default_storage
from django.core.management import CommandError, call_command
from django.db import connection

from medalign_site.backups import BackupError, backup_create, backup_restore
from medalign_site.backups import archive as archive_module
from medalign_site.backups import databases as backup_databases
from medalign_site.backups.databases import database_for
from review.models import Role, User
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)
BASE_DIR = Path(django_settings.BASE_DIR)


def _only_postgres(reason: str) -> None:
    if connection.vendor != "postgresql":
        pytest.skip(f"PostgreSQL only: {reason}")


@pytest.fixture(autouse=True)
def _study(settings, tmp_path):
    """Two approved accounts, their certificates in a private folder of this test's own."""
    settings.MEDIA_ROOT = settings.PRIVATE_STORAGE_ROOT = tmp_path / "private"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    factories.make_user("backup-clinician@example.edu", roles=[Role.CLINICIAN])
    factories.make_user("backup-admin@example.edu", roles=[Role.ADMIN])
    default_storage.save("rubrics/notes.txt", ContentFile(b"not a certificate, kept all the same"))


@pytest.fixture
def source() -> dict:
    return dict(connection.settings_dict)


@pytest.fixture(scope="module")
def _postgres_target(django_db_setup, django_db_blocker):
    """One empty database on the suite's server for the module's restores (PostgreSQL)."""
    if connection.vendor != "postgresql":
        yield None
        return
    import psycopg

    source = dict(connection.settings_dict)
    name = f"{source['NAME']}_restore"[:63]
    admin = backup_databases.Postgres({**source, "NAME": "postgres"})

    def run(statement: str) -> None:
        with psycopg.connect(admin.conninfo(with_password=True), autocommit=True) as conn:
            conn.execute(statement)

    run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    run(f'CREATE DATABASE "{name}"')
    yield {**source, "NAME": name}
    run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def target(source, tmp_path, _postgres_target):
    """An empty database: on the same server (PostgreSQL), or a new file (SQLite)."""
    if _postgres_target is None:
        yield {**source, "NAME": str(tmp_path / "restored.sqlite3")}
        return
    restored = database_for(_postgres_target)
    before = restored.schemas_and_extensions()
    yield _postgres_target
    restored.empty_again(before)  # what a test restored goes, for the next one
    assert restored.is_empty()


@pytest.fixture
def target_storage(tmp_path) -> FileSystemStorage:
    return FileSystemStorage(location=tmp_path / "restored-private")


@pytest.fixture
def backups(tmp_path) -> Path:
    folder = tmp_path / "backups"
    folder.mkdir(mode=0o700)
    return folder


def _backup(source, backups: Path, name: str = "b.tar", **kwargs):
    return backup_create(
        output=backups / name,
        database=source,
        storage=default_storage,
        base_dir=BASE_DIR,
        **kwargs,
    )


def _restore(archive: Path, target, target_storage, tmp_path, **kwargs):
    staging = tmp_path / "staging"
    staging.mkdir(exist_ok=True)
    return backup_restore(
        archive=archive,
        database=target,
        storage=target_storage,
        base_dir=BASE_DIR,
        staging_parent=staging,
        **kwargs,
    )


def _files(storage) -> dict[str, bytes]:
    from medalign_site.backups.files import storage_names

    return {name: storage.open(name, "rb").read() for name in storage_names(storage)}


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


# --- the archive ---------------------------------------------------------------------------------
def test_the_archive_is_mode_600_with_a_manifest_of_every_table_and_file(source, backups) -> None:
    result = _backup(source, backups)

    assert stat.S_IMODE(result.path.stat().st_mode) == 0o600
    assert sorted(os.listdir(backups)) == ["b.tar"]  # no staging or partial file left
    members = _members(result.path)
    manifest = json.loads(members["manifest.json"])
    assert manifest == result.manifest
    tables = manifest["database"]["tables"]
    assert tables["review_user"]["rows"] == User.objects.count() == 2
    assert tables["review_accessapplication"]["rows"] == 2
    assert tables["django_migrations"]["rows"] > 0
    stored = _files(default_storage)
    assert len(stored) == 3  # two certificates and the other private file
    import hashlib

    assert manifest["files"] == {
        name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name, data in stored.items()
    }
    assert {f"files/{name}": data for name, data in stored.items()}.items() <= members.items()


def test_a_path_inside_the_application_folder_is_refused(source) -> None:
    inside = BASE_DIR / "var" / "backup-inside.tar"

    with pytest.raises(BackupError, match="inside the application's folder"):
        _backup(source, inside.parent, inside.name)

    assert not inside.exists()
    assert not list(inside.parent.glob(".medalign-backup-*"))


def test_an_existing_file_is_never_overwritten(source, backups) -> None:
    (backups / "b.tar").write_bytes(b"yesterday's backup")

    with pytest.raises(BackupError, match="never overwrites"):
        _backup(source, backups)

    assert (backups / "b.tar").read_bytes() == b"yesterday's backup"


def test_the_backup_command_writes_mode_600_and_refuses_the_repository(backups) -> None:
    out = io.StringIO()
    call_command("backup", str(backups / "cmd.tar"), stdout=out)

    assert stat.S_IMODE((backups / "cmd.tar").stat().st_mode) == 0o600
    assert "not encrypted" in out.getvalue()
    with pytest.raises(CommandError, match="inside the application's folder"):
        call_command("backup", str(BASE_DIR / "cmd.tar"))


# --- the round trip --------------------------------------------------------------------------------
def test_a_backup_restores_every_row_and_file_into_an_empty_target(
    source, target, target_storage, backups, tmp_path
) -> None:
    archive = _backup(source, backups).path

    result = _restore(archive, target, target_storage, tmp_path)

    assert database_for(target).fingerprints() == database_for(source).fingerprints()
    assert _files(target_storage) == _files(default_storage)
    assert result.files == 3 and result.rows > 0
    assert not list((tmp_path / "staging").iterdir())  # nothing unpacked is left behind


def test_a_backup_taken_while_the_app_writes_matches_its_manifest(
    source, target, target_storage, backups, tmp_path, monkeypatch
) -> None:
    _only_postgres("pg_dump shares its snapshot with the manifest (SQLite copies one file)")
    # A sign-up lands after pg_dump has finished and before the tables are fingerprinted: the
    # manifest must describe the dump, not the database a moment later.
    real_run = subprocess.run

    def run_then_write(args, **kwargs):
        done = real_run(args, **kwargs)
        if args[0] == "pg_dump":
            import psycopg

            info = database_for(source).conninfo(with_password=True)
            with psycopg.connect(info, autocommit=True) as other:
                other.execute(
                    "UPDATE review_user SET full_name = 'Changed after the dump' "
                    "WHERE email = 'backup-admin@example.edu'"
                )
        return done

    monkeypatch.setattr(backup_databases.subprocess, "run", run_then_write)
    archive = _backup(source, backups).path
    monkeypatch.setattr(backup_databases.subprocess, "run", real_run)

    _restore(archive, target, target_storage, tmp_path)  # verifies against the manifest

    import psycopg

    with psycopg.connect(database_for(target).conninfo(with_password=True)) as conn:
        names = {r[0] for r in conn.execute("SELECT full_name FROM review_user")}
    assert "Changed after the dump" not in names


# --- refusals ----------------------------------------------------------------------------------------
def test_restore_refuses_a_database_that_is_not_empty(
    source, target_storage, backups, tmp_path
) -> None:
    archive = _backup(source, backups).path
    before = database_for(source).fingerprints()

    with pytest.raises(BackupError, match="is not empty"):
        _restore(archive, source, target_storage, tmp_path)

    assert database_for(source).fingerprints() == before
    assert _files(target_storage) == {}


def test_restore_refuses_a_storage_that_holds_files(
    source, target, target_storage, backups, tmp_path
) -> None:
    archive = _backup(source, backups).path
    target_storage.save("certificates/someone-else", ContentFile(b"%PDF-1.4 theirs"))

    with pytest.raises(BackupError, match="holds files"):
        _restore(archive, target, target_storage, tmp_path)

    assert database_for(target).is_empty()


def test_the_restore_command_refuses_the_database_it_runs_on(backups) -> None:
    call_command("backup", str(backups / "cmd.tar"), stdout=io.StringIO())

    with pytest.raises(CommandError, match="is not empty"):
        call_command("restore", str(backups / "cmd.tar"), stdout=io.StringIO())


# --- corrupt and tampered archives ---------------------------------------------------------------------
def _flip_byte_of(archive: Path, member_name: str) -> None:
    with tarfile.open(archive) as tar:
        member = tar.getmember(member_name)
        offset = member.offset_data + member.size // 2
    with archive.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def _assert_target_untouched(target, target_storage, tmp_path) -> None:
    assert database_for(target).is_empty()
    assert _files(target_storage) == {}
    assert not list((tmp_path / "staging").iterdir())


def test_a_corrupt_dump_is_refused_before_the_target_is_touched(
    source, target, target_storage, backups, tmp_path
) -> None:
    archive = _backup(source, backups).path
    dump_name = json.loads(_members(archive)["manifest.json"])["database"]["file"]
    _flip_byte_of(archive, dump_name)

    with pytest.raises(BackupError, match="is corrupt") as refused:
        _restore(archive, target, target_storage, tmp_path)

    assert dump_name in str(refused.value)
    assert "Nothing was restored" in str(refused.value)
    _assert_target_untouched(target, target_storage, tmp_path)


def test_a_corrupt_private_file_is_refused_before_the_target_is_touched(
    source, target, target_storage, backups, tmp_path
) -> None:
    archive = _backup(source, backups).path
    _flip_byte_of(archive, "files/rubrics/notes.txt")

    with pytest.raises(BackupError, match="files/rubrics/notes.txt"):
        _restore(archive, target, target_storage, tmp_path)

    _assert_target_untouched(target, target_storage, tmp_path)


def test_a_truncated_archive_is_refused_with_a_clear_message(
    source, target, target_storage, backups, tmp_path
) -> None:
    archive = _backup(source, backups).path
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 3])

    with pytest.raises(BackupError, match="corrupt or truncated|no readable manifest"):
        _restore(archive, target, target_storage, tmp_path)

    _assert_target_untouched(target, target_storage, tmp_path)


def test_a_manifest_the_restored_data_disagrees_with_fails_loudly_and_empties_the_target(
    source, target, target_storage, backups, tmp_path
) -> None:
    # The archive's files match its manifest, but the manifest claims a row the dump lacks:
    # what the target holds after the restore is not what the backup said.
    archive = _backup(source, backups).path
    members = _members(archive)
    manifest = json.loads(members["manifest.json"])
    manifest["database"]["tables"]["review_user"]["rows"] += 1
    members["manifest.json"] = json.dumps(manifest).encode()
    tampered = backups / "tampered.tar"
    with tarfile.open(tampered, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

    with pytest.raises(BackupError, match="RESTORE FAILED VERIFICATION") as failed:
        _restore(tampered, target, target_storage, tmp_path)

    assert "review_user: 3 rows in the backup, 2 restored" in str(failed.value)
    assert "emptied again" in str(failed.value)
    _assert_target_untouched(target, target_storage, tmp_path)


# --- encryption --------------------------------------------------------------------------------------
def _key_pair(path: Path) -> str:
    from pyrage import x25519

    identity = x25519.Identity.generate()
    path.write_text(f"# public key: {identity.to_public()}\n{identity}\n")
    path.chmod(0o600)
    return str(identity.to_public())


def test_an_encrypted_backup_restores_with_its_key_and_only_with_it(
    source, target, target_storage, backups, tmp_path
) -> None:
    public = _key_pair(tmp_path / "key.txt")
    _key_pair(tmp_path / "other.txt")
    result = _backup(source, backups, "b.tar.age", recipients=[public])

    data = result.path.read_bytes()
    assert data.startswith(b"age-encryption.org/v1\n") and result.encrypted
    assert b"review_user" not in data and b"backup-admin@example.edu" not in data
    assert stat.S_IMODE(result.path.stat().st_mode) == 0o600
    with pytest.raises(BackupError, match="is encrypted"):
        _restore(result.path, target, target_storage, tmp_path)
    with pytest.raises(BackupError, match="not encrypted to the key given"):
        _restore(
            result.path, target, target_storage, tmp_path, identity_files=[tmp_path / "other.txt"]
        )
    _assert_target_untouched(target, target_storage, tmp_path)

    _restore(result.path, target, target_storage, tmp_path, identity_files=[tmp_path / "key.txt"])

    assert database_for(target).fingerprints() == database_for(source).fingerprints()
    assert _files(target_storage) == _files(default_storage)


def test_a_changed_byte_in_an_encrypted_archive_is_refused(
    source, target, target_storage, backups, tmp_path
) -> None:
    public = _key_pair(tmp_path / "key.txt")
    archive = _backup(source, backups, "b.tar.age", recipients=[public]).path
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0x01
    archive.write_bytes(bytes(data))

    with pytest.raises(BackupError, match="corrupt or truncated"):
        _restore(archive, target, target_storage, tmp_path, identity_files=[tmp_path / "key.txt"])

    _assert_target_untouched(target, target_storage, tmp_path)


def test_a_recipient_that_is_not_an_age_key_is_refused_before_anything_is_written(
    source, backups
) -> None:
    with pytest.raises(BackupError, match="not an age public key"):
        _backup(source, backups, recipients=["ssh-rsa AAAA not-a-key"])

    assert os.listdir(backups) == []


def test_a_failed_encryption_leaves_no_archive(source, backups, tmp_path, monkeypatch) -> None:
    # The disk fills up a few bytes into the encrypted archive: the backup must stop with the
    # reason, not wait on the tar it can no longer hand over, and leave nothing behind.
    import pyrage

    def full_disk(reader, out, recipients):
        reader.read(10)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pyrage, "encrypt_io", full_disk)
    public = _key_pair(tmp_path / "key.txt")

    with pytest.raises(BackupError, match="encryption failed"):
        _backup(source, backups, "b.tar.age", recipients=[public])

    assert os.listdir(backups) == []


def test_private_files_in_a_bucket_are_backed_up_and_restored(
    source, target, target_storage, backups, tmp_path
) -> None:
    # STORAGE_URL's bucket as the source: every object under its prefix, whatever the folder.
    from django.core.files.storage import storages

    from medalign_site.storage_url import storage_from_url
    from tests import s3

    with s3.moto_endpoint() as endpoint:
        bucket = s3.new_bucket(endpoint)
        config = storage_from_url(s3.storage_url(endpoint, bucket, "private"), debug=True)
        storage = storages.create_storage(config)
        storage.save("certificates/7/abc", ContentFile(b"%PDF-1.4 a certificate"))
        storage.save("certificates/8/def", ContentFile(b"\x89PNG a scan"))
        s3.client(endpoint).put_object(Bucket=bucket, Key="elsewhere/x", Body=b"not ours")

        archive = backup_create(
            output=backups / "b.tar", database=source, storage=storage, base_dir=BASE_DIR
        ).path
        _restore(archive, target, target_storage, tmp_path)

    assert _files(target_storage) == {
        "certificates/7/abc": b"%PDF-1.4 a certificate",
        "certificates/8/def": b"\x89PNG a scan",
    }


def test_the_backup_command_encrypts_to_backup_recipients(backups, settings, tmp_path) -> None:
    settings.BACKUP_RECIPIENTS = [_key_pair(tmp_path / "key.txt")]
    out = io.StringIO()

    call_command("backup", str(backups / "nightly.tar.age"), stdout=out)

    assert (backups / "nightly.tar.age").read_bytes().startswith(b"age-encryption.org/v1\n")
    assert "not encrypted" not in out.getvalue()


def test_a_backup_recipient_that_is_not_an_age_key_stops_start_up(tmp_path) -> None:
    from tests.test_settings import load_settings

    result = load_settings(tmp_path, DEBUG="true", BACKUP_RECIPIENTS="ssh-ed25519 AAAAC3Nz")

    assert result.returncode != 0
    assert "BACKUP_RECIPIENTS" in result.stderr and "not an age public key" in result.stderr


# --- Pythons without tarfile's extraction filter (Debian 12 ships 3.11.2) ---------------------
@pytest.mark.parametrize("with_filter", [True, False], ids=["filter", "no-filter"])
def test_a_member_outside_the_folder_is_refused(tmp_path, monkeypatch, with_filter) -> None:
    monkeypatch.setattr(archive_module, "EXTRACTION_FILTER", with_filter)
    crafted = tmp_path / "crafted.tar"
    with tarfile.open(crafted, "w") as tar:
        data = b"owned"
        info = tarfile.TarInfo("../outside.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    into = tmp_path / "into"
    into.mkdir()
    with crafted.open("rb") as stream, pytest.raises(BackupError, match="outside"):
        archive_module._untar(stream, into, crafted)
    assert not (tmp_path / "outside.txt").exists()


def test_a_backup_restores_without_the_extraction_filter(
    source, target, target_storage, backups, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(archive_module, "EXTRACTION_FILTER", False)
    archive = _backup(source, backups).path

    result = _restore(archive, target, target_storage, tmp_path)

    assert database_for(target).fingerprints() == database_for(source).fingerprints()
    assert _files(target_storage) == _files(default_storage)
    assert result.files == 3
