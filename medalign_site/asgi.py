import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "medalign_site.settings")
application: Any = get_asgi_application()

from django.conf import settings  # noqa: E402 - configured by get_asgi_application()

from medalign_site.debug_guard import DebugOnlyBesideSyntheticDataASGI  # noqa: E402

# As wsgi.py: DEBUG serves only beside synthetic data, whichever server loads the app.
if settings.DEBUG_SETTINGS:
    application = DebugOnlyBesideSyntheticDataASGI(application)
