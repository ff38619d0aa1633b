"""The sweep's clock: every Celery worker's main process runs ``runs_sweep`` on a timer.

Why the workers and not a Celery beat entry: a sweep sent as a task waits in a queue behind the
very batches it is meant to rescue. The worker-kill drill showed it: with the sweep on the
``cpu`` queue, every tick sent while a run's hundreds of batches were queued expired unread
(or would have run minutes late without ``expires``), and no dedicated queue helps a worker
whose only pool process is busy with a long model batch. A worker's main process is idle while
its pool works, so its timer fires on time; no extra process has to be deployed and kept alive
(a beat that died would silently end self-healing); and whenever a batch can be re-queued at
all, some worker is alive to do it, including the one restarted after a crash. Several workers
sweeping at once is safe: every change the sweep makes is a conditional UPDATE.

The timer runs in the main process's event loop (Redis) or Celery's timer thread (other
brokers), never in a pool process, so a batch that keeps its process busy cannot delay it.
Registered in ``medalign_site.celery``; ``RUN_SWEEP_INTERVAL=0`` turns it off for a worker.
This module imports no Django model at import time (the Celery app loads it before Django).
"""

import logging
from typing import Any

from celery import bootsteps

logger = logging.getLogger(__name__)


def sweep_once() -> None:
    """One sweep from the worker's main process; never raises (the timer must keep going)."""
    from django.db import close_old_connections

    from medalign_site.logs import redact_exception
    from scoring.runs.machinery import runs_sweep

    close_old_connections()  # a connection the database dropped since the last tick
    try:
        runs_sweep()
    except Exception as exc:  # the database away, the broker away: next tick tries again
        logger.warning("run sweep failed: %s", redact_exception(exc))
    finally:
        close_old_connections()


class RunSweep(bootsteps.StartStopStep):  # type: ignore[misc]  # Celery's bootsteps are untyped
    """Worker bootstep: ``sweep_once`` every ``RUN_SWEEP_INTERVAL`` seconds."""

    requires = ("celery.worker.components:Timer",)

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.tref: Any = None

    def start(self, worker: Any) -> None:
        from django.conf import settings

        interval = float(settings.RUN_SWEEP_INTERVAL)
        if interval > 0:
            self.tref = worker.timer.call_repeatedly(interval, sweep_once)
            logger.info("run sweep every %.0f s in this worker", interval)

    def stop(self, worker: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None
