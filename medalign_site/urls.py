from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("", include("review.urls")),
    path("research/", include("scoring.urls")),
]

# A JSON 503 for the review endpoints while the database is away (medalign_site/errors.py).
handler500 = "medalign_site.errors.server_error"
