import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "medalign_site.settings")
application = get_wsgi_application()
# Import every view module now (Django does it on the first request): a worker that has just
# started, or all of them after a deploy, would otherwise make their first visitors wait seconds.
get_resolver().url_patterns  # noqa: B018 - evaluated for its side effect
