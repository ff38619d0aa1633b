"""Shared fixtures. Test data is generated here or by review.demo: never real MedAlign data."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _eager_celery(request):
    """Unit tests run Celery tasks inline; tests marked `worker` use a real worker process."""
    if request.node.get_closest_marker("worker"):
        yield
        return
    from medalign_site.celery import set_always_eager

    set_always_eager(True)
    yield
    set_always_eager(False)
