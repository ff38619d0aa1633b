from django.urls import path

from medalign_site.errors import navigation_redirect
from scoring.generation import views as generation_views
from scoring.grading import views as grading_views
from scoring.reports import api, views
from scoring.runs import views as run_views

urlpatterns: list = []

# --- reports (scoring.reports.views, scoring.reports.api) -----------------------------------------
urlpatterns += [
    path("reports/", views.reports, name="scoring_reports"),
    path("reports/<int:report_id>/", views.report_detail, name="scoring_report_detail"),
    # Opened as a page, the report's status is its page (the view lives in scoring.reports).
    path(
        "reports/<int:report_id>/status.json",
        navigation_redirect("scoring_report_detail")(views.report_status),
        name="scoring_report_status",
    ),
    path(
        "reports/<int:report_id>/export/<str:table>.<str:fmt>",
        views.report_export,
        name="scoring_report_export",
    ),
    path("method/", views.method, name="scoring_method"),
    path("paper/<int:dataset_id>/", views.paper, name="scoring_paper_tables"),
    path("paper/<int:dataset_id>/map/", views.paper_map, name="scoring_paper_map"),
    path("tokens/", views.api_tokens, name="scoring_api_tokens"),
    path("tokens/<int:token_id>/revoke/", views.api_token_revoke, name="scoring_api_token_revoke"),
    # The typed API (django-ninja): openapi.json, reports/, reports/<id>/, reports/<id>/<t>.json
    *api.urlpatterns(),
]

# --- scoring runs (scoring.runs.views) ------------------------------------------------------------
urlpatterns += [
    path("runs/", run_views.runs, name="scoring_runs"),
    path("runs/<int:run_id>/", run_views.run_detail, name="scoring_run_detail"),
    path(
        "runs/<int:run_id>/progress.json", run_views.run_progress_json, name="scoring_run_progress"
    ),
    path("runs/<int:run_id>/resume/", run_views.run_resume, name="scoring_run_resume"),
]

# --- grading runs (scoring.grading.views; progress, resume: scoring.runs.views) -------------------
urlpatterns += [
    path("grading/", grading_views.grading_runs, name="grading_runs"),
    path("grading/<int:run_id>/", grading_views.grading_run_detail, name="grading_run_detail"),
    path(
        "grading/<int:run_id>/progress.json",
        run_views.run_progress_json,
        {"kind": "grading"},
        name="grading_run_progress",
    ),
    path(
        "grading/<int:run_id>/resume/",
        run_views.run_resume,
        {"kind": "grading"},
        name="grading_run_resume",
    ),
]

# --- generation runs (scoring.generation.views; progress, resume: scoring.runs.views) ---------
urlpatterns += [
    path("generation/", generation_views.generation_runs, name="generation_runs"),
    path(
        "generation/<int:run_id>/",
        generation_views.generation_run_detail,
        name="generation_run_detail",
    ),
    # progress and Resume: the shared run views (scoring.runs.views), for this kind
    path(
        "generation/<int:run_id>/progress.json",
        run_views.run_progress_json,
        {"kind": "generation"},
        name="generation_run_progress",
    ),
    path(
        "generation/<int:run_id>/resume/",
        run_views.run_resume,
        {"kind": "generation"},
        name="generation_run_resume",
    ),
]
