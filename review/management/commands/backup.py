from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from medalign_site.backups import BackupError, backup_create


class Command(BaseCommand):
    help = (
        "Back up the database and every private file into one new archive (mode 600) with a "
        "manifest of row counts and sha256 per table and file; encrypted to age public keys "
        "(--recipient, or BACKUP_RECIPIENTS). docs/operating/backups.md"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("output", type=Path, help="the new archive, outside the app's folder")
        parser.add_argument(
            "--recipient",
            action="append",
            default=None,
            help="an age public key (age1…) to encrypt to; repeat for several "
            "(default: BACKUP_RECIPIENTS)",
        )

    def handle(self, *args: object, **options: object) -> None:
        recipients = options["recipient"] or settings.BACKUP_RECIPIENTS
        try:
            result = backup_create(
                output=Path(str(options["output"])),
                database=connections["default"].settings_dict,
                storage=default_storage,
                base_dir=Path(settings.BASE_DIR),
                recipients=list(recipients),  # type: ignore[call-overload]
            )
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        tables = result.manifest["database"]["tables"]
        rows = sum(int(t.get("rows", 0)) for t in tables.values())
        self.stdout.write(
            f"{result.path}: {len(tables)} tables and sequences, {rows:,} rows, "
            f"{len(result.manifest['files'])} files, {result.path.stat().st_size:,} bytes"
        )
        if not result.encrypted:
            self.stdout.write(
                self.style.WARNING(
                    "The archive is not encrypted: keep it on encrypted storage, or set "
                    "BACKUP_RECIPIENTS (docs/operating/backups.md)."
                )
            )
        self.stdout.write(
            self.style.SUCCESS("Backup written. It counts once it has been restored.")
        )
