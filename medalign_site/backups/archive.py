"""The archive on disk: where it may be written, how (mode 600, whole or not at all), and its
optional encryption to age public keys.

An archive is a tar stream; encrypted, that stream is the plaintext of an age file
(age-encryption.org/v1, X25519 recipients, through pyrage): ``age -d -i key.txt`` opens it as
well as ``restore`` does, and age authenticates every 64 KiB chunk, so a changed or truncated
archive is refused rather than read.
"""

import os
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

AGE_MAGIC = b"age-encryption.org/v1\n"


class BackupError(Exception):
    """A backup or restore that cannot go on; the message says why and what to do."""


def output_path_check(output: Path, *, base_dir: Path) -> Path:
    """The absolute path to write a new archive at. The archive is DUA data: never inside the
    code's folder (a checkout is copied, committed, shared), never over an existing file."""
    path = output.expanduser()
    if not path.is_absolute():
        path = Path.cwd() / path
    parent = path.parent.resolve()
    path = parent / path.name
    if path.is_relative_to(base_dir.resolve()):
        raise BackupError(
            f"refusing to write {path}: it is inside the application's folder ({base_dir}), "
            "which is no place for DUA data. Write backups to a folder of their own, "
            "e.g. /var/backups/medalign"
        )
    if not parent.is_dir():
        raise BackupError(f"{parent} is not a folder: create it (mode 700) first")
    if path.exists() or path.is_symlink():
        raise BackupError(f"{path} exists: a backup never overwrites a file")
    return path


def staging_dir_make(parent: Path, prefix: str, *, base_dir: Path) -> Path:
    """A private folder (mode 700) for files on their way into or out of an archive."""
    parent = parent.resolve()
    if parent.is_relative_to(base_dir.resolve()):
        raise BackupError(f"refusing to stage DUA data inside the application's folder: {parent}")
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def staging_dir_remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


@contextmanager
def archive_file_write(path: Path) -> Iterator[IO[bytes]]:
    """A new file at ``path``, mode 600, that exists under its name only once complete: written
    as ``path.partial``, flushed to disk, then renamed. On any error nothing is left."""
    partial = path.with_name(path.name + ".partial")
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise BackupError(
            f"{partial} exists: another backup to that name is under way, or one was "
            "interrupted (delete it)"
        ) from None
    os.fchmod(fd, 0o600)  # whatever the umask
    out = os.fdopen(fd, "wb")
    try:
        yield out
        out.flush()
        os.fsync(out.fileno())
        out.close()
        os.rename(partial, path)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except BaseException:
        out.close()
        partial.unlink(missing_ok=True)
        raise


def recipients_parse(recipients: Sequence[str]) -> list[Any]:
    from pyrage import x25519

    parsed = []
    for text in recipients:
        try:
            parsed.append(x25519.Recipient.from_str(text.strip()))
        except Exception:  # pyrage raises its own error types
            raise BackupError(
                f"{text.strip()[:12]}… is not an age public key (age1…): make a key pair with "
                "`age-keygen -o key.txt` (Debian's age package; docs/operating/backups.md)"
            ) from None
    return parsed


def identities_read(paths: Sequence[Path]) -> list[Any]:
    from pyrage import x25519

    identities = []
    for path in paths:
        for line in path.read_text().splitlines():
            line = line.strip()
            if line.startswith("AGE-SECRET-KEY-"):
                try:
                    identities.append(x25519.Identity.from_str(line))
                except Exception:
                    raise BackupError(f"{path} holds a line that is not an age key") from None
    if paths and not identities:
        raise BackupError(f"no age secret key (AGE-SECRET-KEY-…) in {', '.join(map(str, paths))}")
    return identities


def _pump(target: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            target()
        except BaseException as exc:  # handed to the main thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@contextmanager
def tar_writer(out: IO[bytes], recipients: Sequence[Any]) -> Iterator[tarfile.TarFile]:
    """A tar stream into ``out``, encrypted to ``recipients`` when there are any. Encryption
    reads the tar through a pipe as it is written: no plaintext copy of the archive is made."""
    if not recipients:
        with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            yield tar
        return
    import pyrage

    read_fd, write_fd = os.pipe()
    errors: list[BaseException] = []
    reader = os.fdopen(read_fd, "rb")

    def encrypt() -> None:
        try:
            pyrage.encrypt_io(reader, out, list(recipients))
        finally:
            # A failed encryption (a full disk) closes its end: the tar's next write then fails
            # instead of waiting forever on a pipe nobody reads.
            reader.close()

    thread = _pump(encrypt, errors)
    writer = os.fdopen(write_fd, "wb", buffering=0)
    broken = False
    try:
        with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            yield tar
    except BrokenPipeError:
        broken = True  # the encrypting thread stopped: why is raised below
    finally:
        writer.close()  # end of stream for the encrypting thread
        thread.join()
    if errors or broken:
        cause = errors[0] if errors else None
        reason = type(cause).__name__ if cause else "the stream to it broke"
        raise BackupError(f"encryption failed ({reason}): nothing was written") from cause


def archive_extract(archive: Path, into: Path, identities: Sequence[Any]) -> None:
    """Unpack ``archive`` into the folder ``into``: decrypted when it is an age file. Only
    regular files and folders, inside ``into`` (tarfile's "data" filter). A corrupt, truncated
    or wrongly keyed archive raises BackupError; what was unpacked is the caller's to remove."""
    with archive.open("rb") as source:
        encrypted = source.read(len(AGE_MAGIC)) == AGE_MAGIC
        source.seek(0)
        if encrypted and not identities:
            raise BackupError(
                f"{archive} is encrypted (age): give the secret key with --identity KEYFILE"
            )
        if not encrypted:
            _untar(source, into, archive)
            return
        import pyrage

        read_fd, write_fd = os.pipe()
        errors: list[BaseException] = []
        writer = os.fdopen(write_fd, "wb")

        def decrypt() -> None:
            try:
                pyrage.decrypt_io(source, writer, list(identities))
            finally:
                writer.close()

        thread = _pump(decrypt, errors)
        reader = os.fdopen(read_fd, "rb")
        try:
            _untar(reader, into, archive)
            reader.read()  # drain, so the decrypting thread reaches the end and checks it
        except BackupError:
            reader.close()  # the decrypting thread stops on the broken pipe
            thread.join()
            if errors:  # the tar broke because decryption did: say that
                raise _decrypt_error(archive, errors[0]) from errors[0]
            raise
        reader.close()
        thread.join()
        if errors:
            raise _decrypt_error(archive, errors[0]) from errors[0]


def _decrypt_error(archive: Path, exc: BaseException) -> BackupError:
    if "no matching keys" in str(exc).lower():
        return BackupError(f"{archive} is not encrypted to the key given (--identity)")
    return BackupError(
        f"{archive} is corrupt or truncated: its encryption does not check out "
        f"({type(exc).__name__}). Nothing was restored"
    )


# tarfile's "data" extraction filter (PEP 706) arrived in Python 3.11.4; Debian 12's python3.11
# is 3.11.2. Without it the same rules are applied here: no path outside the folder, no
# owner, setuid or group/other write bits from the archive.
EXTRACTION_FILTER = hasattr(tarfile, "data_filter")


def _untar(stream: IO[bytes], into: Path, archive: Path) -> None:
    root = into.resolve()
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                if not (member.isfile() or member.isdir()):
                    raise BackupError(f"{archive} holds {member.name!r}, which is not a file")
                target = (root / member.name).resolve()
                if Path(member.name).is_absolute() or not target.is_relative_to(root):
                    raise BackupError(
                        f"{archive} holds {member.name!r}, a path outside the archive's folder"
                    )
                if EXTRACTION_FILTER:
                    tar.extract(member, into, filter="data")
                else:
                    member.mode &= 0o755
                    member.uid, member.gid = os.getuid(), os.getgid()
                    member.uname = member.gname = ""
                    tar.extract(member, into, set_attrs=member.isfile())
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BackupError(
            f"{archive} is corrupt or truncated: it cannot be read as an archive "
            f"({type(exc).__name__}). Nothing was restored"
        ) from exc
