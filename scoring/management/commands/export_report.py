from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scoring.models import CorrelationReport
from scoring.reports import exports, services


class Command(BaseCommand):
    help = (
        "Export a table of a correlation report (pseudonymous ids only, no text). "
        "The export is audited."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("report_id", type=int)
        parser.add_argument("--table", choices=exports.TABLES, default="correlation")
        parser.add_argument("--format", choices=exports.FORMATS, default="csv", dest="fmt")
        parser.add_argument("--output", type=Path, help="write here instead of standard output")

    def handle(self, *args: object, **options: object) -> None:
        report = (
            CorrelationReport.objects.select_related("dataset")
            .filter(pk=options["report_id"])
            .first()
        )
        if report is None:
            raise CommandError(f"no report {options['report_id']}")
        if report.status != CorrelationReport.Status.DONE:
            raise CommandError(f"report {report.pk} is {report.status}, not done")
        table, fmt = str(options["table"]), str(options["fmt"])
        body, _ = exports.render(report, table, fmt)
        # No signed-in user on the command line: the audit records the channel and the OS user.
        services.report_export_record(
            report=report,
            table=table,
            fmt=fmt,
            channel="cli",
            actor=None,
            rows=len(exports.rows(report, table)),
        )
        output = options["output"]
        if output:
            Path(output).write_text(body, encoding="utf-8")  # type: ignore[arg-type]
            self.stderr.write(f"Wrote {table} of report {report.pk} to {output}.")
        else:
            self.stdout.write(body, ending="")
