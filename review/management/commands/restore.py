import tempfile
from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from medalign_site.backups import BackupError, backup_restore


class Command(BaseCommand):
    help = (
        "Restore a backup into this installation's database and private storage, which must "
        "be empty, and verify every table and file against the backup's manifest. "
        "docs/operating/backups.md"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("archive", type=Path)
        parser.add_argument(
            "--identity",
            action="append",
            type=Path,
            default=[],
            help="a file holding the age secret key (AGE-SECRET-KEY-…) of an encrypted backup",
        )
        parser.add_argument(
            "--staging-dir",
            type=Path,
            default=Path(tempfile.gettempdir()),
            help="where the archive is unpacked (a private folder, removed afterwards)",
        )
        parser.add_argument(
            "--keep-unverified",
            action="store_true",
            help="if verification fails, keep what was restored for inspection",
        )

    def handle(self, *args: object, **options: object) -> None:
        database = dict(connections["default"].settings_dict)
        connections.close_all()  # the restore connects by itself; SQLite's file is replaced
        try:
            result = backup_restore(
                archive=Path(str(options["archive"])),
                database=database,
                storage=default_storage,
                base_dir=Path(settings.BASE_DIR),
                staging_parent=Path(str(options["staging_dir"])),
                identity_files=list(options["identity"]),  # type: ignore[call-overload]
                keep_unverified=bool(options["keep_unverified"]),
            )
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Restored and verified: {result.tables} tables, {result.rows:,} rows, "
                f"{result.files} files match the backup made {result.manifest['created_at']}."
            )
        )
        self.stdout.write(
            "Next: `manage.py migrate` if this release is newer than the backup's, then start "
            "the services (docs/operating/backups.md)."
        )
