"""The environment the test suite runs in, set before Django loads its settings.

Loaded as a pytest plugin (``-p tests.environment`` in pyproject's addopts), which pytest
imports before pytest-django reads the settings. DEBUG is opt-in in production settings
(off unless ``DEBUG=true``); tests run the development configuration, as ``make run`` does,
and set it here rather than in a second settings file. Test subprocesses (a Celery worker,
gunicorn) inherit it. Tests of the production configuration start their own process with
their own environment (tests/test_settings.py).
"""

import os

os.environ["DEBUG"] = "true"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_configure(config) -> None:  # noqa: ANN001 - pytest's Config
    """Parallel workers (pytest-xdist) share CI's Redis: each keeps its own cache keys, or one
    worker's cache clear or "new DUA version, everyone's access is stale" reaches into another
    worker's test. xdist names the worker only once the config exists, hence here; no cache has
    been used yet, and test subprocesses (gunicorn, Celery) inherit the prefix."""
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    # TEST_CACHE_PREFIX separates two test runs sharing one Redis (two checkouts at once).
    prefix = f"{os.environ.get('TEST_CACHE_PREFIX', 'medalign-test')}-{worker}"
    os.environ["CACHE_KEY_PREFIX"] = prefix
    from django.conf import settings

    settings.CACHES["default"]["KEY_PREFIX"] = prefix
