"""Celery application. Tasks live in each app's ``tasks.py`` and are discovered automatically."""

import logging.config
import os
from typing import Any

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "medalign_site.settings")

app = Celery("medalign_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Every worker sweeps for runs whose batches lost their worker (why a worker timer and not a
# beat entry: scoring.runs.sweeper).
from scoring.runs.sweeper import RunSweep  # noqa: E402 - after the app it registers with

app.steps["worker"].add(RunSweep)


@setup_logging.connect
def _django_logging(**kwargs: Any) -> None:
    """Workers log through the web's configuration (settings.LOGGING): exception messages
    redacted, Celery's task-failure lines too (medalign_site/logs.py). Without a receiver here,
    Celery installs its own handlers and formatter, which print both in full."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


def set_always_eager(flag: bool) -> None:
    """Run tasks inline (tests). The Django-namespaced key shadows ``task_always_eager``."""
    app.conf.CELERY_TASK_ALWAYS_EAGER = flag
    app.conf.CELERY_TASK_EAGER_PROPAGATES = True
