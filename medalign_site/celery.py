"""Celery application. Tasks live in each app's ``tasks.py`` and are discovered automatically."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "medalign_site.settings")

app = Celery("medalign_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Every worker sweeps for runs whose batches lost their worker (why a worker timer and not a
# beat entry: scoring.runs.sweeper).
from scoring.runs.sweeper import RunSweep  # noqa: E402 - after the app it registers with

app.steps["worker"].add(RunSweep)


def set_always_eager(flag: bool) -> None:
    """Run tasks inline (tests). The Django-namespaced key shadows ``task_always_eager``."""
    app.conf.CELERY_TASK_ALWAYS_EAGER = flag
    app.conf.CELERY_TASK_EAGER_PROPAGATES = True
