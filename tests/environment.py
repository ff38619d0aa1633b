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
# Parallel workers (pytest-xdist) share CI's Redis: each keeps its own cache keys, or one worker's
# "new DUA version: everyone's access cache is stale" would reach into another worker's test.
os.environ.setdefault(
    "CACHE_KEY_PREFIX", "medalign-test-" + os.environ.get("PYTEST_XDIST_WORKER", "main")
)
