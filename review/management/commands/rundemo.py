import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from review.models import Dataset


class Command(BaseCommand):
    help = (
        "Load the demo dataset if it is not loaded, then serve the app (on 127.0.0.1:8000 "
        "unless --addr says otherwise) together with a Celery worker. Ctrl-C stops both."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--addr",
            default="127.0.0.1:8000",
            help="address and port to serve on, as runserver takes them: 0.0.0.0:8080, "
            "127.0.0.1:9000, [::]:8000 (default 127.0.0.1:8000)",
        )
        parser.add_argument("--concurrency", type=int, default=2)

    def handle(self, *args: object, **options: object) -> None:
        if not Dataset.objects.filter(name="demo").exists():
            call_command("load_demo", stdout=self.stdout, stderr=self.stderr)
        else:
            call_command("load_demo", "--accounts-only", stdout=self.stdout, stderr=self.stderr)
        # The app's own 404/500 pages, not Django's debug page (settings: DEBUG_ERROR_PAGES);
        # --insecure keeps runserver serving the static files with DEBUG off.
        self.serve(
            options,
            [sys.executable, "manage.py", "runserver", "--noreload", "--insecure"],
            {"DEBUG_ERROR_PAGES": "false"},
        )

    def serve(
        self, options: dict[str, object], server: list[str], server_env: dict[str, str]
    ) -> None:
        """Run ``server`` (given the address last) and a Celery worker until Ctrl-C."""
        base = Path(settings.BASE_DIR)
        celery = Path(sys.executable).with_name("celery")
        # Each pool process gets its share of the cores for torch (more would oversubscribe).
        concurrency = int(options["concurrency"])  # type: ignore[arg-type]
        env = {**os.environ}
        env.setdefault("TORCH_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // concurrency)))
        worker = subprocess.Popen(  # noqa: S603 - fixed arguments
            [
                str(celery),
                "-A",
                "medalign_site",
                "worker",
                "-Q",
                "cpu,gpu",
                "--concurrency",
                str(options["concurrency"]),
                "--loglevel",
                "INFO",
            ],
            cwd=base,
            env=env,
            start_new_session=True,
        )
        server = subprocess.Popen(  # noqa: S603
            [*server, str(options["addr"])],
            cwd=base,
            env={**os.environ, **server_env},
            start_new_session=True,
        )

        # Ctrl-C (SIGINT) and SIGTERM both stop the pair; set explicitly, because a process
        # started in the background may inherit SIGINT as ignored.
        def _stop(signum: int, frame: object) -> None:
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGTERM, _stop)
        self.stdout.write(
            self.style.SUCCESS(
                f"Serving http://{options['addr']}/ with a Celery worker; "
                "press Ctrl-C to stop both."
            )
        )
        try:
            while True:
                for proc, name in ((worker, "worker"), (server, "server")):
                    if proc.poll() is not None:
                        self.stderr.write(f"the {name} exited with code {proc.returncode}")
                        raise KeyboardInterrupt
                with contextlib.suppress(subprocess.TimeoutExpired):
                    server.wait(timeout=1)
        except KeyboardInterrupt:
            pass
        finally:
            for proc in (server, worker):
                if proc.poll() is None:
                    proc.terminate()  # the main process: Celery then does a warm shutdown
            for proc in (server, worker):
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
            self.stdout.write("Stopped the server and the worker.")
