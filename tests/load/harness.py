"""Shared plumbing for the load test and the fault drills: a throwaway PostgreSQL database, the
app under gunicorn, a Celery worker on Redis, all on 127.0.0.1, all stopped at the end.

Nothing here talks to anything but loopback, and every wait is bounded in time.
"""

import base64
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PG = {"host": "127.0.0.1", "port": "5432", "user": "postgres"}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_cmd(tool: str, *args: str) -> None:
    subprocess.run(
        [tool, "-h", PG["host"], "-p", PG["port"], "-U", PG["user"], *args],
        check=True,
        timeout=60,
        capture_output=True,
    )


def fresh_database(name: str, *, template: str | None = None) -> str:
    """Drop and create ``name`` (a copy of ``template`` if given); return its DATABASE_URL."""
    pg_cmd("dropdb", "--if-exists", "--force", name)
    pg_cmd("createdb", *(["--template", template] if template else []), name)
    return f"postgres://{PG['user']}@{PG['host']}:{PG['port']}/{name}"


def database_exists(name: str) -> bool:
    result = subprocess.run(
        ["psql", "-h", PG["host"], "-p", PG["port"], "-U", PG["user"], "-lqtA"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return name in {line.split("|", 1)[0] for line in result.stdout.splitlines()}


def copy_database(source: str, target: str) -> None:
    """Keep a copy of ``source`` as ``target`` (a template for later runs); nobody may be connected."""
    pg_cmd("dropdb", "--if-exists", "--force", target)
    pg_cmd("createdb", "--template", source, target)


def drop_database(name: str) -> None:
    with suppress(Exception):
        pg_cmd("dropdb", "--if-exists", "--force", name)


def app_env(database_url: str, broker_url: str, data_dir: Path) -> dict[str, str]:
    """The environment of a production-like deployment on loopback (DEBUG off, plain HTTP)."""
    return {
        **os.environ,
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(48),
        "MFA_ENCRYPTION_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "false",
        "SECURE_HSTS_SECONDS": "0",
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "DATA_DIR": str(data_dir),
        "LOG_LEVEL": "WARNING",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "DJANGO_SETTINGS_MODULE": "medalign_site.settings",
    }


def configure_django(env: dict[str, str]) -> None:
    """Point this process's Django at the throwaway database (call before django.setup())."""
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


class Processes:
    """Child processes in their own process groups, stopped (TERM, then KILL) on exit."""

    def __init__(self, log_dir: Path | None = None) -> None:
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="medalign-procs-"))
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
        out = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs[name] = proc
        return proc

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.get(name)
        if proc is None or proc.poll() is not None:
            return
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=15)

    def stop(self, name: str, grace: float = 10) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.stop(name)

    def tail(self, name: str, lines: int = 30) -> str:
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def gunicorn_args(port: int, *, workers: int = 3, threads: int = 4) -> list[str]:
    return [
        str(BIN / "gunicorn"),
        "medalign_site.wsgi",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--worker-class",
        "gthread",
        "--threads",
        str(threads),
        "--timeout",
        "60",
        "--graceful-timeout",
        "5",
        # Idle keep-alive connections stay open longer than a think time: otherwise the client
        # may reuse a connection the server is just closing (a reset, counted as an error).
        "--keep-alive",
        "30",
        "--preload",  # import the app once, before forking: no slow first request per worker
    ]


def celery_args(*, concurrency: int = 1, queues: str = "cpu,gpu") -> list[str]:
    return [
        str(BIN / "celery"),
        "-A",
        "medalign_site",
        "worker",
        "-Q",
        queues,
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "INFO",
        "--without-gossip",
        "--without-mingle",
    ]


def wait_until(check: Callable[[], bool], *, timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with suppress(Exception):
            if check():
                return True
        time.sleep(interval)
    return False


def http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback only
        return response.status == 200


def manage(env: dict[str, str], *args: str, timeout: float = 900) -> None:
    subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, timeout=timeout
    )


class CpuMeter:
    """Cumulative CPU seconds of the server's parts, finished processes included.

    - ``gunicorn``: the master and every worker, live or finished (a finished worker's time is
      in the master's reaped-children counters);
    - ``postgres``: the backends serving ``database`` (found by their process title). A backend
      is a child of the postmaster, whose reaped-children counters mix in every other database
      on the machine, so each backend is sampled every ``interval`` seconds and its last reading
      kept after it exits: at most one interval of a closing connection is missed;
    - ``locust``: the load generator's process tree (it shares the cores);
    - ``machine``: every core's busy time, so what the rest of a shared machine used is visible.

    ``snapshot()`` returns the counters; the difference of two snapshots is what each part used.
    """

    def __init__(self, *, gunicorn_pid: int, database: str, interval: float = 0.2) -> None:
        import psutil

        self._psutil = psutil
        self.gunicorn = psutil.Process(gunicorn_pid)
        self.database = database
        self.interval = interval
        self.locust_pid: int | None = None
        self.postmaster = _postmaster(psutil)
        self._backend_cpu: dict[tuple[int, float], float] = {}  # (pid, create time) -> seconds
        self._stop = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._sample_loop, daemon=True)
        self._thread.start()

    def _sample_loop(self) -> None:
        while not self._stop:
            with suppress(Exception):
                self._sample_backends()
            time.sleep(self.interval)

    def _sample_backends(self) -> None:
        if self.postmaster is None:
            return
        for child in self.postmaster.children():
            with suppress(self._psutil.Error):
                title = " ".join(child.cmdline()).split()
                if self.database not in title:
                    continue
                times = child.cpu_times()
                with self._lock:
                    self._backend_cpu[(child.pid, child.create_time())] = times.user + times.system

    def _tree(self, proc) -> float:  # noqa: ANN001 - a psutil.Process
        total = 0.0
        with suppress(self._psutil.Error):
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
            for child in proc.children(recursive=True):
                with suppress(self._psutil.Error):
                    c = child.cpu_times()
                    total += c.user + c.system
        return total

    def snapshot(self) -> dict[str, float]:
        self._sample_backends()
        with self._lock:
            postgres = sum(self._backend_cpu.values())
        busy = self._psutil.cpu_times()
        locust = self._tree(self._psutil.Process(self.locust_pid)) if self.locust_pid else 0.0
        return {
            "wall": time.monotonic(),
            "gunicorn": self._tree(self.gunicorn),
            "postgres": postgres,
            "locust": locust,
            "machine": sum(busy) - busy.idle - getattr(busy, "iowait", 0.0),
        }

    def stop(self) -> None:
        self._stop = True
        self._thread.join(timeout=5)


def _postmaster(psutil):  # noqa: ANN001, ANN202 - the psutil module; a psutil.Process or None
    """The PostgreSQL server process on this machine (the postgres whose parent is not one)."""
    for proc in psutil.process_iter(["name", "ppid"]):
        with suppress(psutil.Error):
            if proc.info["name"] != "postgres":
                continue
            parent = psutil.Process(proc.info["ppid"])
            if parent.name() != "postgres":
                return proc
    return None
