import gc
import os
from collections.abc import Callable
from typing import Any

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "medalign_site.settings")
application: Callable[..., Any] = get_wsgi_application()

from django.conf import settings  # noqa: E402 - configured by get_wsgi_application()

from medalign_site.debug_guard import DebugOnlyBesideSyntheticData  # noqa: E402

if settings.DEBUG_SETTINGS:
    application = DebugOnlyBesideSyntheticData(application)
# Import every view module now (Django does it on the first request): a worker that has just
# started, or all of them after a deploy, would otherwise make their first visitors wait seconds.
get_resolver().url_patterns  # noqa: B018 - evaluated for its side effect
# What is loaded by now (Django, the app and its libraries) lives as long as the process, yet
# every full collection of the cyclic GC walks all of it, every few hundred requests. Frozen
# objects are left out of collections.
# Under gunicorn --preload this runs in the master, before the fork, so the workers share the
# pages those objects are on instead of copying them when a collection touches them.
gc.collect()
gc.freeze()
