"""Celery application. Tasks live in each app's ``tasks.py`` and are discovered automatically."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "medalign_site.settings")

app = Celery("medalign_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def set_always_eager(flag: bool) -> None:
    """Run tasks inline (tests). The Django-namespaced key shadows ``task_always_eager``."""
    app.conf.CELERY_TASK_ALWAYS_EAGER = flag
    app.conf.CELERY_TASK_EAGER_PROPAGATES = True
