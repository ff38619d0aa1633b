from django.urls import path

from review.views import (
    accounts,
    adjudications,
    clinician,
    core,
    manage,
    quality,
    rubrics,
    studies,
)

# The annotation path first: every clinician request is one of these three, and Django tries
# the patterns in order (each miss before the match is also copied into the match's record of
# what was tried). No other pattern overlaps them, so the order changes nothing else.
urlpatterns = [
    path(
        "instructions/<int:instruction_id>/review/", clinician.review_page, name="clinician_review"
    ),
    path("reviews/<int:review_id>/draft/", clinician.review_save, name="review_save"),
    path("reviews/<int:review_id>/submit/", clinician.review_submit, name="review_submit"),
    path("", core.home, name="home"),
    path("healthz", core.healthz, name="healthz"),
]

# --- accounts: applications, DUA, admin review queue, audit (review.views.accounts) -----------
urlpatterns += [
    path("access/", accounts.application_status, name="application_status"),
    path("access/apply/", accounts.application_apply, name="application_apply"),
    path("access/resubmit/", accounts.application_resubmit, name="application_resubmit"),
    path("access/dua/", accounts.dua_sign, name="dua_sign"),
    path(
        "access/verify-email/send/",
        accounts.application_email_resend,
        name="application_email_resend",
    ),
    path(
        "access/verify-email/<str:token>/",
        accounts.application_verify_email,
        name="application_verify_email",
    ),
    path("manage/applications/", accounts.admin_applications, name="admin_applications"),
    path(
        "manage/applications/<int:application_id>/",
        accounts.admin_application_detail,
        name="admin_application_detail",
    ),
    path(
        "manage/applications/<int:application_id>/revoke/",
        accounts.admin_application_revoke,
        name="admin_application_revoke",
    ),
    path(
        "manage/applications/<int:application_id>/roles/",
        accounts.admin_application_roles,
        name="admin_application_roles",
    ),
    path(
        "manage/applications/<int:application_id>/certificate/",
        accounts.admin_application_certificate,
        name="admin_application_certificate",
    ),
    path("manage/dua/publish/", accounts.admin_dua_publish, name="admin_dua_publish"),
    path("manage/audit/", accounts.audit_log, name="audit_log"),
    path("manage/audit.csv", accounts.audit_log_csv, name="audit_log_csv"),
]

# --- clinician: queue, review page, record endpoints (review.views.clinician) -----------------
urlpatterns += [
    path("queue/", clinician.queue, name="clinician_queue"),
    path("queue/next/", clinician.next_review, name="clinician_next"),
    path(
        "instructions/<int:instruction_id>/record/excerpt/",
        clinician.record_excerpt,
        name="record_excerpt",
    ),
    path(
        "instructions/<int:instruction_id>/record/events/",
        clinician.record_events,
        name="record_events",
    ),
    path(
        "instructions/<int:instruction_id>/record/events/<int:event_id>/",
        clinician.record_event,
        name="record_event",
    ),
    path(
        "instructions/<int:instruction_id>/record/search/",
        clinician.record_search,
        name="record_search",
    ),
    path("session/resumed/", clinician.session_resumed, name="session_resumed"),
    path("manage/assignments/", clinician.admin_assign, name="admin_assign"),
]

# --- admins: progress per dataset, reopening reviews (review.views.manage) --------------------
urlpatterns += [
    path("manage/progress/", manage.progress_index, name="progress_index"),
    # Studies and their response sets (review.views.studies).
    path("manage/studies/<int:dataset_id>/", studies.studies_page, name="admin_studies"),
    path(
        "manage/studies/<int:dataset_id>/rounds/",
        studies.study_new_round,
        name="admin_study_new_round",
    ),
    path(
        "manage/studies/<int:dataset_id>/retire/", studies.model_retire, name="admin_model_retire"
    ),
    path("manage/study/<int:study_id>/add/", studies.study_add_model, name="admin_study_add_model"),
    path(
        "manage/study/<int:study_id>/adaptive/",
        studies.study_adaptive_design,
        name="admin_study_adaptive_design",
    ),
    path(
        "manage/study/<int:study_id>/wave/",
        studies.study_adaptive_wave,
        name="admin_study_adaptive_wave",
    ),
    path(
        "manage/study/<int:study_id>/remove/",
        studies.study_remove_model,
        name="admin_study_remove_model",
    ),
    path("manage/progress/<int:dataset_id>/", manage.progress_dataset, name="progress_dataset"),
    path(
        "manage/reviews/<int:review_id>/reopen/",
        manage.review_reopen,
        name="admin_review_reopen",
    ),
]

# --- rubrics: writing, reviewing, grading; the admin's page (review.views.rubrics) ----------
urlpatterns += [
    path("rubrics/", rubrics.rubric_work, name="rubric_work"),
    path("rubrics/<int:rubric_id>/write/", rubrics.rubric_write, name="rubric_write"),
    path("rubrics/<int:rubric_id>/review/", rubrics.rubric_review, name="rubric_review"),
    path("gradings/<int:grading_id>/", rubrics.grading_page, name="grading_page"),
    path("gradings/<int:grading_id>/draft/", rubrics.grading_save, name="grading_save"),
    path("gradings/<int:grading_id>/submit/", rubrics.grading_submit, name="grading_submit"),
    path("manage/rubrics/<int:dataset_id>/", rubrics.admin_rubrics, name="admin_rubrics"),
    path(
        "manage/rubrics/<int:dataset_id>/export.jsonl",
        rubrics.admin_rubrics_export,
        name="admin_rubrics_export",
    ),
]

# --- quality: gold, calibration, exclusions, adjudication (review.views.quality, .adjudications)
urlpatterns += [
    path("manage/quality/<int:dataset_id>/", quality.quality_page, name="admin_quality"),
    path(
        "manage/quality/study/<int:study_id>/settings/",
        quality.quality_policy,
        name="admin_quality_policy",
    ),
    path(
        "manage/quality/study/<int:study_id>/gold/release/",
        quality.gold_from_release,
        name="admin_quality_gold_release",
    ),
    path(
        "manage/quality/study/<int:study_id>/gold/<int:instruction_id>/",
        quality.gold_item,
        name="admin_quality_gold_item",
    ),
    path(
        "manage/quality/gold/<int:item_id>/retire/",
        quality.gold_retire,
        name="admin_quality_gold_retire",
    ),
    path(
        "manage/quality/study/<int:study_id>/calibrate/",
        quality.calibrate,
        name="admin_quality_calibrate",
    ),
    path(
        "manage/quality/study/<int:study_id>/exclude/",
        quality.exclude,
        name="admin_quality_exclude",
    ),
    path(
        "manage/quality/exclusions/<int:exclusion_id>/readmit/",
        quality.readmit,
        name="admin_quality_readmit",
    ),
    path(
        "manage/quality/study/<int:study_id>/adjudicate/",
        quality.adjudicate,
        name="admin_quality_adjudicate",
    ),
    path("adjudications/", adjudications.queue, name="adjudication_queue"),
    path(
        "adjudications/<int:adjudication_id>/",
        adjudications.adjudication_page,
        name="adjudication_page",
    ),
    path(
        "adjudications/<int:adjudication_id>/draft/",
        adjudications.adjudication_save,
        name="adjudication_save",
    ),
    path(
        "adjudications/<int:adjudication_id>/submit/",
        adjudications.adjudication_submit,
        name="adjudication_submit",
    ),
]

# Keep the imports used until the sections above are filled in.
__all__ = [
    "accounts",
    "adjudications",
    "clinician",
    "core",
    "manage",
    "quality",
    "rubrics",
    "studies",
]
