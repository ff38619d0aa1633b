"""Every URL of the project, every kind of user: the expected outcome is written down here.

RULES maps a URL name to the outcome for each kind of user; GROUP_RULES cover whole families
(allauth's account_/mfa_ pages, Django's admin). A URL with no rule fails
``test_every_url_has_a_rule`` naming it, so each new feature adds its rows: one line per URL,
e.g.

    "clinician_queue": R(anon=LOGIN, unapproved=APP, approved="403", clinician="200", admin="200"),
    "review_page": R(..., kwargs=lambda w: {"assignment_id": w.assignment.pk}),

Second factor: every kind is checked twice, with a session that passed TOTP (the rows below) and
with a password-only session (``without_second_factor``: approved users reach no protected page,
they are sent to the TOTP step; Django's admin sends them to its login).

Sessions older than the access or the factor: a session signed in (password only) before the
account was approved, or before TOTP was set up in another session, reaches on every URL
exactly what an anonymous visitor does (``test_a_session_signed_in_before_*``); allauth's
recovery-code and TOTP-deactivation pages have rows of their own.

Outcomes: "200", "302", "401", "403", "404", "405" (exact status); "200|302" (any of those); LOGIN (302
to sign-in), APP (302 to the application page), MFA (302 to TOTP set-up), TOTP_STEP (302 to the
TOTP step of this session), ADMIN_LOGIN (302 to
the admin's login, which sends on to allauth), HOME (302 to the home page), LT500 (anything but a server error). Kinds:
anonymous, applicant, rejected, expired, revoked (the "unapproved" group), clinician_other,
clinician, researcher, admin (the "approved" group). GET is requested unless ``method`` says
otherwise; POST-only views answer GET with 405 once the user is let through.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse

LOGIN, APP, MFA, ADMIN_LOGIN, HOME = "login", "app", "mfa", "admin_login", "home"
TOTP_STEP = "totp_step"
LT500 = "lt500"
UNAPPROVED = ("applicant", "rejected", "expired", "revoked")
APPROVED = ("clinician_other", "clinician", "researcher", "admin", "adjudicator")
KINDS = ("anonymous", *UNAPPROVED, *APPROVED)


@dataclass(frozen=True)
class Rule:
    expect: dict[str, str]
    kwargs: Callable[[Any], dict[str, Any]] | None = None
    method: str = "GET"
    data: dict[str, Any] = field(default_factory=dict)


def R(
    *,
    anon: str,
    unapproved: str | None = None,
    approved: str | None = None,
    kwargs: Callable[[Any], dict[str, Any]] | None = None,
    method: str = "GET",
    **per_kind: str,
) -> Rule:
    """A row: ``anon``, then ``unapproved``/``approved`` group defaults, then per-kind overrides.

    ``clinician_other`` defaults to ``clinician``'s outcome; every kind must end up with one.
    """
    expect: dict[str, str] = {"anonymous": anon}
    for kind in UNAPPROVED:
        if unapproved is not None:
            expect[kind] = unapproved
    for kind in APPROVED:
        if approved is not None:
            expect[kind] = approved
    expect.update(per_kind)
    if "clinician" in per_kind and "clinician_other" not in per_kind:
        expect["clinician_other"] = per_kind["clinician"]
    missing = set(KINDS) - set(expect)
    assert not missing, f"rule leaves {sorted(missing)} without an outcome"
    return Rule(expect=expect, kwargs=kwargs, method=method)


PUBLIC = R(anon="200", unapproved="200", approved="200")


def signed_in(outcome: str = "200", **kw: Any) -> Rule:
    kw.setdefault("unapproved", outcome)
    kw.setdefault("approved", outcome)
    kw.setdefault("anon", LOGIN)
    return R(**kw)


def _study(w: Any) -> Any:
    from tests.factories import study_for

    return study_for(w.dataset)


def admin_only(outcome: str = "200", **kw: Any) -> Rule:
    return R(anon=LOGIN, unapproved=APP, approved="403", admin=outcome, **kw)


def _application(w: Any) -> dict[str, Any]:
    return {"application_id": w.pending_application.pk}


def _note(w: Any) -> Any:
    from review.models import Event

    event, _ = Event.objects.get_or_create(
        patient=w.patient, seq=1, defaults={"event_type": "note", "text": "Synthetic note."}
    )
    return event


def _run(w: Any) -> Any:
    from scoring.models import ScoringRun

    run, _ = ScoringRun.objects.get_or_create(dataset=w.patient.dataset, defaults={"total": 0})
    return run


def _generation_run(w: Any) -> Any:
    from scoring.models import GenerationRun

    run, _ = GenerationRun.objects.get_or_create(
        dataset=w.patient.dataset, defaults={"total": 0, "label": "m", "template_text": "x"}
    )
    return run


def _grading_run(w: Any) -> Any:
    from scoring.models import GradingRun, MetricConfig

    config, _ = MetricConfig.objects.get_or_create(
        identity_hash="matrix-grader",
        defaults={"backend": "rubric-grader", "identity": {}, "label": "grader"},
    )
    run, _ = GradingRun.objects.get_or_create(
        dataset=w.patient.dataset, config=config, defaults={"total": 0}
    )
    return run


def _report(w: Any) -> Any:
    from scoring.models import CorrelationReport

    report, _ = CorrelationReport.objects.get_or_create(
        dataset=w.dataset, title="matrix", defaults={"status": "done"}
    )
    return report


def _report_kwargs(w: Any) -> dict[str, Any]:
    return {"report_id": _report(w).pk}


def _review(w: Any) -> Any:
    from review.services.reviews import review_get_or_start

    return review_get_or_start(assignment=w.assignment)


def _rubric_instruction(w: Any, suffix: str) -> Any:
    from review.models import Instruction

    instruction, _ = Instruction.objects.get_or_create(
        dataset=w.dataset,
        instruction_id=f"I-MATRIX-{suffix}",
        defaults={"question": "Synthetic?", "patient": w.patient, "person_id": "P-MATRIX-1"},
    )
    return instruction


def _rubric_to_write(w: Any) -> Any:
    from review.models import Rubric

    rubric, _ = Rubric.objects.get_or_create(
        instruction=_rubric_instruction(w, "W"), version=1, defaults={"author": w.clinician}
    )
    return rubric


def _rubric_to_review(w: Any) -> Any:
    from review.models import Rubric

    rubric, _ = Rubric.objects.get_or_create(
        instruction=_rubric_instruction(w, "R"),
        version=1,
        defaults={
            "author": w.clinician_other,
            "reviewer": w.clinician,
            "status": Rubric.Status.IN_REVIEW,
        },
    )
    return rubric


def _grading(w: Any) -> Any:
    from review.models import Criterion, CriterionGrading, Rubric

    instruction = _rubric_instruction(w, "G")
    rubric, created = Rubric.objects.get_or_create(
        instruction=instruction, version=1, defaults={"status": Rubric.Status.ACCEPTED}
    )
    if created:
        Criterion.objects.create(rubric=rubric, text="Synthetic criterion.", points=5)
    grading, _ = CriterionGrading.objects.get_or_create(
        study=_study(w), instruction=instruction, rubric=rubric, clinician=w.clinician
    )
    return grading


def _gold(w: Any) -> Any:
    from review.models import GoldItem

    item, _ = GoldItem.objects.get_or_create(
        study=_study(w), instruction=w.instruction, defaults={"use": "gold", "source": "senior"}
    )
    return item


def _exclusion(w: Any) -> Any:
    from review.models import ClinicianExclusion

    exclusion, _ = ClinicianExclusion.objects.get_or_create(
        study=_study(w),
        clinician=w.clinician_other,
        defaults={"reason": "Matrix.", "excluded_by": w.admin},
    )
    return exclusion


RULES: dict[str, Rule] = {
    # --- core -------------------------------------------------------------------------------
    "home": R(anon=LOGIN, unapproved=APP, approved="200|302", admin="200"),
    "healthz": PUBLIC,
    "health": PUBLIC,
    # --- accounts (review.views.accounts) -----------------------------------------------------
    "application_status": signed_in("200"),
    "application_apply": signed_in("200", applicant="302", approved="302"),
    "application_resubmit": signed_in("302"),  # nobody here has changes requested
    "dua_sign": signed_in("302"),  # everyone here has signed the active version
    # The link sent to the institutional email: a token that is not one is a 400 for anyone.
    "application_verify_email": signed_in("400", kwargs=lambda w: {"token": "not-a-token"}),
    "application_email_resend": signed_in("405"),  # POST only
    "admin_applications": admin_only(),
    "admin_application_detail": admin_only(kwargs=_application),
    "admin_application_revoke": admin_only("405", kwargs=_application),
    "admin_application_roles": admin_only("405", kwargs=_application),
    "admin_application_certificate": admin_only(kwargs=_application),
    "admin_dua_publish": admin_only(),
    "audit_log": admin_only(),
    "audit_log_csv": admin_only(),
    # --- clinician review (review.views.clinician) -------------------------------------------
    "clinician_queue": R(anon=LOGIN, unapproved=APP, approved="403", clinician="200", admin="200"),
    "clinician_next": R(anon=LOGIN, unapproved=APP, approved="403", clinician="302", admin="302"),
    "clinician_review": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",  # a page for clinicians: "not available to your role"
        admin="404",  # admins pass the role, not the object: only the assigned one reviews
        clinician="200",
        clinician_other="404",
        kwargs=lambda w: {"instruction_id": w.instruction.pk},
    ),
    "record_excerpt": R(
        anon="401",  # JSON endpoints answer JSON (medalign_site.errors)
        unapproved="403",
        approved="403",
        clinician="200",
        clinician_other="404",
        admin="200",
        adjudicator="200",  # the record of the instruction they adjudicate
        kwargs=lambda w: {"instruction_id": w.instruction.pk},
    ),
    "record_events": R(
        anon="401",  # JSON endpoints answer JSON (medalign_site.errors)
        unapproved="403",
        approved="403",
        clinician="200",
        clinician_other="404",
        admin="200",
        adjudicator="200",  # the record of the instruction they adjudicate
        kwargs=lambda w: {"instruction_id": w.instruction.pk},
    ),
    "record_event": R(
        anon="401",  # JSON endpoints answer JSON (medalign_site.errors)
        unapproved="403",
        approved="403",
        clinician="200",
        clinician_other="404",
        admin="200",
        adjudicator="200",  # the record of the instruction they adjudicate
        kwargs=lambda w: {"instruction_id": w.instruction.pk, "event_id": _note(w).pk},
    ),
    "record_search": R(
        anon="401",  # JSON endpoints answer JSON (medalign_site.errors)
        unapproved="403",
        approved="403",
        clinician="400",
        clinician_other="404",
        admin="400",
        adjudicator="400",
        method="POST",
        kwargs=lambda w: {"instruction_id": w.instruction.pk},
    ),
    # POST without a JSON body: the owner gets 400 (validation), everyone else 404.
    "review_save": R(
        anon="401",  # JSON endpoints answer JSON (medalign_site.errors)
        unapproved="403",
        approved="403",
        clinician="400",
        clinician_other="404",
        admin="404",  # admins pass the role, not the object: not theirs
        method="POST",
        kwargs=lambda w: {"review_id": _review(w).pk},
    ),
    "review_submit": R(
        anon="401",  # JSON endpoints answer JSON (medalign_site.errors)
        unapproved="403",
        approved="403",
        clinician="400",
        clinician_other="404",
        admin="404",  # admins pass the role, not the object: not theirs
        method="POST",
        kwargs=lambda w: {"review_id": _review(w).pk},
    ),
    "session_resumed": R(
        anon=LOGIN, unapproved=APP, approved="403", clinician="200", admin="200", adjudicator="200"
    ),
    # --- rubrics (review.views.rubrics): only the author writes, only the named reviewer
    # reviews, only the assigned clinician grades; admins assign, import and export.
    "rubric_work": R(anon=LOGIN, unapproved=APP, approved="403", clinician="200", admin="200"),
    "rubric_write": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        clinician="200",
        clinician_other="404",
        admin="404",  # admins pass the role, not the object: not theirs
        kwargs=lambda w: {"rubric_id": _rubric_to_write(w).pk},
    ),
    "rubric_review": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        clinician="200",
        clinician_other="404",  # the author never reviews their own
        admin="404",  # admins pass the role, not the object: not theirs
        kwargs=lambda w: {"rubric_id": _rubric_to_review(w).pk},
    ),
    "grading_page": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        clinician="200",
        clinician_other="404",
        admin="404",  # admins pass the role, not the object: not theirs
        kwargs=lambda w: {"grading_id": _grading(w).pk},
    ),
    "grading_save": R(
        anon="401",  # JSON endpoints answer JSON (medalign_site.errors)
        unapproved="403",
        approved="403",
        clinician="400",
        clinician_other="404",
        admin="404",  # admins pass the role, not the object: not theirs
        method="POST",
        kwargs=lambda w: {"grading_id": _grading(w).pk},
    ),
    "grading_submit": R(
        anon="401",  # JSON endpoints answer JSON (medalign_site.errors)
        unapproved="403",
        approved="403",
        clinician="400",
        clinician_other="404",
        admin="404",  # admins pass the role, not the object: not theirs
        method="POST",
        kwargs=lambda w: {"grading_id": _grading(w).pk},
    ),
    "admin_rubrics": admin_only(kwargs=lambda w: {"dataset_id": w.dataset.pk}),
    "admin_rubrics_export": admin_only(kwargs=lambda w: {"dataset_id": w.dataset.pk}),
    "admin_assign": admin_only(),
    # --- admins' progress pages and reopening (review.views.manage) -------------------------
    "progress_index": admin_only(),
    "progress_dataset": admin_only(kwargs=lambda w: {"dataset_id": w.dataset.pk}),
    "admin_review_reopen": admin_only("405", kwargs=lambda w: {"review_id": _review(w).pk}),
    # --- admins' studies and response sets (review.views.studies); changes are POST only ----
    "admin_studies": admin_only(kwargs=lambda w: {"dataset_id": w.dataset.pk}),
    "admin_study_new_round": admin_only("405", kwargs=lambda w: {"dataset_id": w.dataset.pk}),
    "admin_model_retire": admin_only("405", kwargs=lambda w: {"dataset_id": w.dataset.pk}),
    "admin_study_add_model": admin_only("405", kwargs=lambda w: {"study_id": _study(w).pk}),
    "admin_study_remove_model": admin_only("405", kwargs=lambda w: {"study_id": _study(w).pk}),
    "admin_study_adaptive_design": admin_only("405", kwargs=lambda w: {"study_id": _study(w).pk}),
    "admin_study_adaptive_wave": admin_only("405", kwargs=lambda w: {"study_id": _study(w).pk}),
    # --- reviewing quality (review.views.quality): admins; changes are POST only --------------
    "admin_quality": admin_only(kwargs=lambda w: {"dataset_id": w.dataset.pk}),
    "admin_quality_policy": admin_only("405", kwargs=lambda w: {"study_id": _study(w).pk}),
    "admin_quality_gold_release": admin_only("405", kwargs=lambda w: {"study_id": _study(w).pk}),
    "admin_quality_gold_item": admin_only(
        kwargs=lambda w: {"study_id": _study(w).pk, "instruction_id": w.instruction.pk}
    ),
    "admin_quality_gold_retire": admin_only("405", kwargs=lambda w: {"item_id": _gold(w).pk}),
    "admin_quality_calibrate": admin_only("405", kwargs=lambda w: {"study_id": _study(w).pk}),
    "admin_quality_exclude": admin_only("405", kwargs=lambda w: {"study_id": _study(w).pk}),
    "admin_quality_readmit": admin_only("405", kwargs=lambda w: {"exclusion_id": _exclusion(w).pk}),
    "admin_quality_adjudicate": admin_only("405", kwargs=lambda w: {"study_id": _study(w).pk}),
    # --- adjudication (review.views.adjudications): only the assigned adjudicator -------------
    "adjudication_queue": R(
        anon=LOGIN, unapproved=APP, approved="403", adjudicator="200", admin="200"
    ),
    "adjudication_page": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",  # a page for adjudicators: "not available to your role"
        adjudicator="200",
        admin="404",  # admins pass the role, not the object: not theirs
        kwargs=lambda w: {"adjudication_id": w.adjudication.pk},
    ),
    # POST without a JSON body: the adjudicator gets 400 (validation), an admin 404.
    "adjudication_save": R(
        anon="401",
        unapproved="403",
        approved="403",
        adjudicator="400",
        admin="404",
        method="POST",
        kwargs=lambda w: {"adjudication_id": w.adjudication.pk},
    ),
    "adjudication_submit": R(
        anon="401",
        unapproved="403",
        approved="403",
        adjudicator="400",
        admin="404",
        method="POST",
        kwargs=lambda w: {"adjudication_id": w.adjudication.pk},
    ),
    # --- scoring runs: researchers and admins ------------------------------------------------
    "scoring_runs": R(anon=LOGIN, unapproved=APP, approved="403", researcher="200", admin="200"),
    "scoring_run_detail": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="200",
        admin="200",
        kwargs=lambda w: {"run_id": _run(w).pk},
    ),
    "scoring_run_progress": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="200",
        admin="200",
        kwargs=lambda w: {"run_id": _run(w).pk},
    ),
    "scoring_run_resume": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="405",
        admin="405",
        kwargs=lambda w: {"run_id": _run(w).pk},
    ),
    # --- generation runs: researchers and admins -----------------------------------------------
    "generation_runs": R(anon=LOGIN, unapproved=APP, approved="403", researcher="200", admin="200"),
    "generation_run_detail": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="200",
        admin="200",
        kwargs=lambda w: {"run_id": _generation_run(w).pk},
    ),
    "generation_run_progress": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="200",
        admin="200",
        kwargs=lambda w: {"run_id": _generation_run(w).pk},
    ),
    "generation_run_resume": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="405",
        admin="405",
        kwargs=lambda w: {"run_id": _generation_run(w).pk},
    ),
    # --- grading runs: researchers and admins --------------------------------------------------
    "grading_runs": R(anon=LOGIN, unapproved=APP, approved="403", researcher="200", admin="200"),
    "grading_run_detail": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="200",
        admin="200",
        kwargs=lambda w: {"run_id": _grading_run(w).pk},
    ),
    "grading_run_progress": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="200",
        admin="200",
        kwargs=lambda w: {"run_id": _grading_run(w).pk},
    ),
    "grading_run_resume": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="405",
        admin="405",
        kwargs=lambda w: {"run_id": _grading_run(w).pk},
    ),
    # --- reports, exports, tokens and the token API (scoring.reports.views, scoring.reports.api) ------------
    "scoring_reports": R(anon=LOGIN, unapproved=APP, approved="403", researcher="200", admin="200"),
    "scoring_report_detail": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="200",
        admin="200",
        kwargs=_report_kwargs,
    ),
    "scoring_report_status": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="200",
        admin="200",
        kwargs=_report_kwargs,
    ),
    "scoring_report_export": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="200",
        admin="200",
        kwargs=lambda w: {"report_id": _report(w).pk, "table": "correlation", "fmt": "csv"},
    ),
    "scoring_method": R(anon=LOGIN, unapproved=APP, approved="403", researcher="200", admin="200"),
    "scoring_paper_tables": R(
        anon=LOGIN,
        unapproved=APP,
        approved="403",
        researcher="200",
        admin="200",
        kwargs=lambda w: {"dataset_id": w.dataset.pk},
    ),
    # Mapping the dataset's model names to the paper's is an admin's change, POST only.
    "scoring_paper_map": admin_only("405", kwargs=lambda w: {"dataset_id": w.dataset.pk}),
    "scoring_api_tokens": R(
        anon=LOGIN, unapproved=APP, approved="403", researcher="200", admin="200"
    ),
    "scoring_api_token_revoke": R(
        anon=LOGIN, unapproved=APP, approved="403", researcher="405", admin="405"
    ),
    # The API takes a bearer token only: a browser session is not enough, whoever holds it.
    "scoring_api_openapi": PUBLIC,
    "scoring_api_reports": R(anon="401", unapproved="401", approved="401"),
    "scoring_api_report": R(anon="401", unapproved="401", approved="401", kwargs=_report_kwargs),
    "scoring_api_report_table": R(
        anon="401",
        unapproved="401",
        approved="401",
        kwargs=lambda w: {"report_id": _report(w).pk, "table": "correlation"},
    ),
    # --- allauth: the pages a stranger needs are public; the rest need a session -------------
    "account_login": R(anon="200", unapproved="302", approved="302"),
    "account_signup": R(anon="200", unapproved="302", approved="302"),
    "account_reset_password": PUBLIC,
    # force_login records no fresh authentication, so allauth asks to re-authenticate first;
    # users who already have TOTP are sent to the 2FA overview.
    "mfa_activate_totp": signed_in("302"),
    "mfa_index": signed_in("200"),
    # The factors themselves (review.second_factor): a session that showed the second factor
    # recently gets allauth's pages (the recovery-code pages 404 for accounts without codes; the
    # others ask to re-authenticate, with the second factor first); a password-only session goes
    # to the TOTP step whatever password it re-typed (without_second_factor).
    "mfa_view_recovery_codes": signed_in("404", anon=LOGIN),
    "mfa_download_recovery_codes": signed_in("404", anon=LOGIN),
    "mfa_generate_recovery_codes": signed_in(TOTP_STEP, anon=LOGIN),
    "mfa_deactivate_totp": signed_in(TOTP_STEP, anon=LOGIN),
    # --- single sign-on, with no identity provider configured (the default): every provider
    # URL answers 404; allauth's ACS only stashes what was posted and sends on to its finish
    # page (which 404s); the back-channel logout takes a POST; a break-glass link is checked.
    "openid_connect_login": R(
        anon="404", unapproved="404", approved="404", kwargs=lambda w: {"provider_id": "x"}
    ),
    "openid_connect_callback": R(
        anon="404", unapproved="404", approved="404", kwargs=lambda w: {"provider_id": "x"}
    ),
    "sso_backchannel_logout": R(
        anon="405", unapproved="405", approved="405", kwargs=lambda w: {"provider_id": "x"}
    ),
    "sso_break_glass": R(
        anon="400", unapproved="400", approved="400", kwargs=lambda w: {"token": "x"}
    ),
    "saml_acs": R(
        anon="302", unapproved="302", approved="302", kwargs=lambda w: {"organization_slug": "x"}
    ),
    **{
        name: R(
            anon="404",
            unapproved="404",
            approved="404",
            kwargs=lambda w: {"organization_slug": "x"},
        )
        for name in ("saml_finish_acs", "saml_login", "saml_metadata", "saml_sls")
    },
    # --- Django's admin: approved admins only (staff flag and current access) ----------------
    "admin:index": R(anon=ADMIN_LOGIN, unapproved=ADMIN_LOGIN, approved=ADMIN_LOGIN, admin="200"),
    "admin:login": R(anon=LOGIN, unapproved=HOME, approved=HOME, admin="302"),
    "admin:logout": R(anon="302", unapproved="302", approved="302", admin="405"),  # POST only
    "admin:autocomplete": R(
        anon=ADMIN_LOGIN, unapproved=ADMIN_LOGIN, approved=ADMIN_LOGIN, admin="403"
    ),
    "admin:view_on_site": R(
        anon=ADMIN_LOGIN, unapproved=ADMIN_LOGIN, approved=ADMIN_LOGIN, admin="404"
    ),
    "admin:app_list": R(
        anon=ADMIN_LOGIN,
        unapproved=ADMIN_LOGIN,
        approved=ADMIN_LOGIN,
        admin="200",
        kwargs=lambda w: {"app_label": "review"},
    ),
    "admin:review_auditevent_add": R(
        anon=ADMIN_LOGIN, unapproved=ADMIN_LOGIN, approved=ADMIN_LOGIN, admin="403"
    ),
    "admin:review_auditevent_delete": R(
        anon=ADMIN_LOGIN, unapproved=ADMIN_LOGIN, approved=ADMIN_LOGIN, admin="403"
    ),
}

# Families, matched by prefix when a URL has no row of its own.
GROUP_RULES: dict[str, Rule] = {
    "account_": R(anon=LT500, unapproved=LT500, approved=LT500),
    "mfa_": R(anon="302|404", unapproved=LT500, approved=LT500),
    # allauth's provider pages: connections (joining is refused: review.adapters), the sign-up
    # and error pages of a provider sign-in; and their old addresses, moved for good.
    "socialaccount_": R(anon=LT500, unapproved=LT500, approved=LT500),
    ":<accounts/social/": R(anon="301", unapproved="301", approved="301"),
    # Read-only models (audit, DUA, users…) answer their add/delete pages with 403.
    "admin:": R(
        anon=ADMIN_LOGIN, unapproved=ADMIN_LOGIN, approved=ADMIN_LOGIN, admin="200|302|403"
    ),
}


# --- enumeration -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Url:
    key: str  # "name", "namespace:name", or "namespace:<unnamed route>" for unnamed patterns
    named: bool
    params: tuple[str, ...]


def iter_urls(patterns: list | None = None, namespace: str = "", route: str = "") -> Iterator[Url]:
    for p in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(p, URLResolver):
            ns = ":".join(filter(None, [namespace, p.namespace]))
            yield from iter_urls(p.url_patterns, ns, route + str(p.pattern))
        elif isinstance(p, URLPattern):
            params = tuple(p.pattern.regex.groupindex)
            if p.name:
                key = f"{namespace}:{p.name}" if namespace else p.name
                yield Url(key, True, params)
            else:
                yield Url(f"{namespace}:<{route}{p.pattern}>", False, params)


def all_urls() -> list[Url]:
    seen: dict[str, Url] = {}
    for url in iter_urls():
        seen.setdefault(url.key, url)
    return list(seen.values())


def rule_for(key: str) -> Rule | None:
    if key in RULES:
        return RULES[key]
    for prefix, rule in GROUP_RULES.items():
        if key.startswith(prefix):
            return rule
    return None


def test_every_url_has_a_rule():
    missing = [u.key for u in all_urls() if rule_for(u.key) is None]
    assert not missing, (
        "These URLs have no row in tests/review/test_authorization_matrix.py RULES: "
        + ", ".join(sorted(missing))
    )


def test_rules_name_only_existing_urls():
    keys = {u.key for u in all_urls()}
    stale = sorted(set(RULES) - keys)
    assert not stale, f"RULES rows for URLs that no longer exist: {stale}"


# --- checking ----------------------------------------------------------------------------------
def _matches(response: Any, expected: str) -> bool:
    status = response.status_code
    location = response.headers.get("Location", "")
    targets = {
        LOGIN: "account_login",
        APP: "application_status",
        MFA: "mfa_activate_totp",
        TOTP_STEP: "mfa_reauthenticate",
        ADMIN_LOGIN: "admin:login",
        HOME: "home",
    }
    if expected in targets:
        return status == 302 and location.split("?")[0] == reverse(targets[expected])
    if expected == LT500:
        return status < 500
    return str(status) in expected.split("|")


# allauth's factor pages: every account here has TOTP, so a session that has not shown it goes
# to the TOTP step, applicant or not (review.second_factor).
FACTOR_PAGES = frozenset(
    {
        "mfa_view_recovery_codes",
        "mfa_download_recovery_codes",
        "mfa_generate_recovery_codes",
        "mfa_deactivate_totp",
    }
)


def without_second_factor(key: str, rule: Rule, kind: str) -> str:
    """The outcome for a session that signed in with the password but never passed TOTP."""
    expected = rule.expect[kind]
    if key in FACTOR_PAGES and kind != "anonymous":
        return TOTP_STEP
    if kind not in APPROVED:
        return expected  # nothing beyond the application pages either way
    if key.startswith("admin:"):
        return {"admin:login": HOME, "admin:logout": "302"}.get(key, ADMIN_LOGIN)
    if rule.expect["applicant"] == APP:  # a page behind the access check (role_required, home)
        return TOTP_STEP
    if rule.expect["applicant"] == "403":  # a JSON endpoint behind it: a JSON 401 to the step
        return "401"
    return expected


def _check_every_url(
    client: Any, world: Any, expected_for: Callable[[str, Rule], str]
) -> list[str]:
    failures = []
    for url in all_urls():
        rule = rule_for(url.key)
        if rule is None or not url.named:
            continue  # reported by test_every_url_has_a_rule / unnamed admin catch-alls
        kwargs = rule.kwargs(world) if rule.kwargs else {name: "1" for name in url.params}
        try:
            path = reverse(url.key, kwargs=kwargs)
        except NoReverseMatch:
            failures.append(f"{url.key}: cannot reverse with {kwargs}; give its rule kwargs=")
            continue
        response = client.generic(rule.method, path)
        expected = expected_for(url.key, rule)
        if not _matches(response, expected):
            got = f"{response.status_code} {response.headers.get('Location', '')}".strip()
            failures.append(f"{rule.method} {path} ({url.key}): expected {expected}, got {got}")
    return failures


@pytest.mark.django_db
@pytest.mark.parametrize("second_factor", [True, False], ids=["totp_passed", "password_only"])
@pytest.mark.parametrize("kind", KINDS)
def test_authorization_matrix(kind, second_factor, world, client):
    from tests.factories import sign_in

    user = getattr(world, kind)
    if user is not None:
        sign_in(client, user, second_factor=second_factor)
    failures = _check_every_url(
        client,
        world,
        lambda key, rule: (
            rule.expect[kind] if second_factor else without_second_factor(key, rule, kind)
        ),
    )
    assert not failures, f"{kind}:\n  " + "\n  ".join(failures)


# --- sessions older than the access or the factor -----------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("role", ["clinician", "researcher", "admin"])
def test_a_session_signed_in_before_approval_reaches_only_what_anonymous_does(role, world, client):
    """An applicant's password-only session, then the approval: the session is over, on every
    URL, whatever the role granted."""
    from review.services import accounts as services
    from tests.factories import open_certificate, sign_in

    sign_in(client, world.applicant, second_factor=False)
    open_certificate(world.admin, world.pending_application)
    services.application_approve(
        application=world.pending_application,
        reviewer=world.admin,
        roles=[role],
        expires_on=world.pending_application.certificate_expires_on,
    )
    failures = _check_every_url(client, world, lambda key, rule: rule.expect["anonymous"])
    assert not failures, f"{role}:\n  " + "\n  ".join(failures)


@pytest.mark.django_db
@pytest.mark.parametrize("kind", APPROVED)
def test_a_session_signed_in_before_enrolment_reaches_only_what_anonymous_does(
    kind, world, client, django_capture_on_commit_callbacks
):
    """An approved account without TOTP signs in with the password; TOTP is set up in another
    session (allauth's own pages); the first session is over, on every URL."""
    from allauth.mfa.models import Authenticator
    from django.test import Client

    from review.allauth_compat import SECRET_SESSION_KEY
    from tests.factories import PASSWORD, sign_in, totp_code_fresh

    user = getattr(world, kind)
    Authenticator.objects.filter(user=user).delete()
    sign_in(client, user, second_factor=False)
    other = Client()
    sign_in(other, user, second_factor=False)
    other.post(reverse("account_reauthenticate"), {"password": PASSWORD})
    other.get(reverse("mfa_activate_totp"))
    code = totp_code_fresh(other.session[SECRET_SESSION_KEY])
    # allauth announces the factor when its transaction commits (the test's never does).
    with django_capture_on_commit_callbacks(execute=True):
        assert other.post(reverse("mfa_activate_totp"), {"code": code}).status_code == 302
    assert Authenticator.objects.filter(user=user, type="totp").exists()
    failures = _check_every_url(client, world, lambda key, rule: rule.expect["anonymous"])
    assert not failures, f"{kind}:\n  " + "\n  ".join(failures)
