import sys
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError, CommandParser

from review.selectors.datasets import datasets_not_synthetic, debug_refusal

from .rundemo import Command as RunDemo


class Command(RunDemo):
    help = (
        "Serve what this database holds (on 127.0.0.1:8000 unless --addr says otherwise) with a "
        "Celery worker, as `make run` does; Ctrl-C stops both. With DEBUG: runserver, and never "
        "beside a dataset that is not synthetic. Without DEBUG (real data in a database of its "
        "own, SECRET_KEY and MFA_ENCRYPTION_KEY set): the static files collected, then gunicorn."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (no DEBUG)")

    def handle(self, *args: object, **options: object) -> None:
        if settings.DEBUG_SETTINGS:
            real = datasets_not_synthetic()
            if real:
                raise CommandError(debug_refusal(real))
            self.serve(options, [sys.executable, "manage.py", "runserver", "--noreload"], {})
            return
        call_command("collectstatic", "--noinput", verbosity=0)
        gunicorn = str(Path(sys.executable).with_name("gunicorn"))
        self.serve(
            options,
            [gunicorn, "medalign_site.wsgi", "--workers", str(options["workers"]), "--bind"],
            {},
        )
