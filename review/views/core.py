from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET

from review.access import second_factor_redirect, user_access
from review.selectors.datasets import datasets_by_name


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


def _url_or_none(name: str) -> str | None:
    # Pages built by other features may not exist yet in every checkout: link them when they do.
    try:
        return reverse(name)
    except NoReverseMatch:
        return None


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Send each user where their role works: queue, reports, admin dashboard, or application."""
    access = user_access(request.user)
    if not access.is_approved:
        return redirect("application_status")
    if to_second_factor := second_factor_redirect(request, access):
        return to_second_factor
    clinician_queue = _url_or_none("clinician_queue")
    scoring_reports = _url_or_none("scoring_reports")
    # A user with a single non-admin role goes straight to their work; others get the dashboard.
    if access.roles == {"clinician"} and clinician_queue:
        return redirect(clinician_queue)
    if access.roles == {"researcher"} and scoring_reports:
        return redirect(scoring_reports)
    return render(
        request,
        "review/home.html",
        {
            "access": access,
            "clinician_queue_url": clinician_queue,
            "scoring_reports_url": scoring_reports,
            # Each dataset's studies page (its rounds and response sets) is the admin's way in.
            "datasets": datasets_by_name() if access.is_admin else [],
        },
    )
