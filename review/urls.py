from django.urls import path

from review.views import accounts, clinician, core

urlpatterns = [
    path("", core.home, name="home"),
    path("healthz", core.healthz, name="healthz"),
]

# --- accounts: applications, DUA, admin review queue, audit (review.views.accounts) -----------
urlpatterns += []

# --- clinician: queue, review page, record endpoints (review.views.clinician) -----------------
urlpatterns += []

# Keep the imports used until the sections above are filled in.
__all__ = ["accounts", "clinician", "core"]
