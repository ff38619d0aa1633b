from django.contrib import admin
from django.urls import include, path

from medalign_site.health import health
from review.second_factor import factor_management_urls

urlpatterns = [
    path("admin/", admin.site.urls),
    # For the proxy and monitoring: ok/failing per component, anonymous (medalign_site/health.py).
    path("health/", health, name="health"),
    # allauth's recovery-code and TOTP-deactivation pages, behind the second factor shown in
    # this session (review.second_factor): listed first, so they are the ones served.
    *factor_management_urls(),
    path("accounts/", include("allauth.urls")),
    path("", include("review.urls")),
    path("research/", include("scoring.urls")),
]

# A JSON 503 for the review endpoints while the database is away (medalign_site/errors.py).
handler500 = "medalign_site.errors.server_error"
