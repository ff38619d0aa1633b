from django.contrib import admin
from django.urls import include, path

from medalign_site.health import health
from review.second_factor import factor_management_urls
from review.views import sso

urlpatterns = [
    path("admin/", admin.site.urls),
    # For the proxy and monitoring: ok/failing per component, anonymous (medalign_site/health.py).
    path("health/", health, name="health"),
    # allauth's recovery-code and TOTP-deactivation pages, behind the second factor shown in
    # this session (review.second_factor): listed first, so they are the ones served.
    *factor_management_urls(),
    # Single sign-on (review.views.sso): allauth's OpenID Connect callback with the ID token's
    # signature always checked (listed first, so it is the one served), the providers'
    # back-channel logout, and the operator's break-glass link.
    path(
        "accounts/oidc/<str:provider_id>/login/callback/",
        sso.oidc_callback,
        name="openid_connect_callback",
    ),
    path(
        "accounts/oidc/<str:provider_id>/backchannel-logout/",
        sso.oidc_backchannel_logout,
        name="sso_backchannel_logout",
    ),
    path("accounts/break-glass/<str:token>/", sso.break_glass, name="sso_break_glass"),
    path("accounts/", include("allauth.urls")),
    path("", include("review.urls")),
    path("research/", include("scoring.urls")),
]

# A JSON 503 for the review endpoints while the database is away (medalign_site/errors.py).
handler500 = "medalign_site.errors.server_error"
