"""Shared fixtures. Test data is generated here or by review.demo: never real MedAlign data."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _eager_celery(settings):
    # Unit tests run tasks inline; tests marked `worker` start a real worker process instead.
    settings.CELERY_TASK_ALWAYS_EAGER = True
    from medalign_site.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False
