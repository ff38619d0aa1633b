"""The admin's day, in Debian's Chromium at desktop and phone sizes: approvals that start from
what was asked, an admin told what waits, the applications kept by status, the lone admin
warned, the reopened clinician emailed, patients named by person_id in the audit log, a new DUA
version previewed as a difference and confirmed, and every page a role uses fitting a 390×844
screen (admin tables as cards, the report's plots readable).

Set ISSUE28_SCREENSHOTS=docs to refresh the phone screenshots in docs/.
"""

import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from review.models import AccessApplication, AuditEvent, DUAVersion, Review, Role
from review.services import accounts as services
from review.services.audit import audit_record
from review.services.reviews import review_get_or_start
from tests import factories
from tests.e2e.test_accessibility import (
    DESKTOP,
    PHONE,
    _watch_csp,
    assert_no_axe_violations,
    sign_in_with_totp,
)
from tests.review import review_data

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = os.environ.get("ISSUE28_SCREENSHOTS", "")


@pytest.fixture
def context(browser):
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(15_000)
    _watch_csp(context)
    yield context
    context.close()


@pytest.fixture
def tab(context):
    return context.new_page()


def _admin(email: str = "ada.admin@example.edu", **kw):
    factories.active_dua()
    return factories.make_user(email, roles=[Role.ADMIN], full_name="Ada Admin", **kw)


def _application(email: str, name: str, **kw) -> AccessApplication:
    return factories.make_application(factories.make_user(email, full_name=name), **kw)


def _second_admin():
    # Approved by the first admin, so neither is alone.
    return factories.make_user("bo.admin@example.edu", roles=[Role.ADMIN], full_name="Bo Admin")


# --- item 5: approvals ---------------------------------------------------------------------------
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_first_approve_succeeds_with_the_roles_the_applicant_asked_for(
    live_server, tab, viewport
):
    base, page = live_server.url, tab
    page.set_viewport_size(viewport)
    admin = _admin()
    _second_admin()
    application = _application(
        "rita@hospital.example.edu", "Rita Researcher", requested_role=Role.RESEARCHER
    )
    sign_in_with_totp(page, base, admin.email)
    factories.open_certificate(admin, application)
    page.goto(base + reverse("admin_application_detail", args=[application.pk]))
    assert page.is_checked("input[name=roles][value=researcher]")
    assert not page.is_checked("input[name=roles][value=clinician]")
    page.check("input[name=decision][value=approve]")
    page.click("[data-testid=decision-form] button[type=submit]")
    page.wait_for_url(base + reverse("admin_applications"))
    application.refresh_from_db()
    assert application.status == "approved" and application.roles == [Role.RESEARCHER]


def test_the_applicant_is_told_who_decides_and_by_when(live_server, tab):
    base, page = live_server.url, tab
    application = _application("pat@hospital.example.edu", "Pat Applicant")
    expected = (application.submitted_at + timedelta(days=5)).astimezone(
        timezone.get_current_timezone()
    )
    tab.context.clear_cookies()
    sign_in_with_totp(page, base, application.user.email)
    page.goto(base + reverse("application_status"))
    text = page.inner_text("[data-testid=who-decides]")
    assert "An admin of this installation" in text
    assert f"{expected.day} {expected:%B %Y}" in text
    assert_no_axe_violations(page, "application status, pending, who decides")


def test_admins_are_emailed_and_see_a_count_when_an_application_arrives(live_server, tab):
    base, page = live_server.url, tab
    admin = _admin()
    other = _second_admin()
    mail.outbox.clear()
    application = _application("new@hospital.example.edu", "New Applicant")
    to_admins = [m for m in mail.outbox if "awaiting review" in m.subject]
    assert sorted(m.to[0] for m in to_admins) == sorted([admin.email, other.email])
    detail = reverse("admin_application_detail", args=[application.pk])
    assert all(detail in m.body for m in to_admins)
    assert all("new@hospital.example.edu" not in m.body for m in to_admins)

    sign_in_with_totp(page, base, admin.email)
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.goto(base + reverse("progress_index"))
        count = page.locator("[data-testid=nav-pending-count]")
        assert count.inner_text().startswith("1")
        if viewport == PHONE:
            # The menu is folded on a phone: its button shows the count too, and opens it.
            assert page.locator("#menu-toggle [data-testid=menu-pending-count]").is_visible()
            assert page.inner_text("[data-testid=menu-pending-count]").startswith("1")
            page.click("#menu-toggle")
        page.click("[data-testid=nav-applications]")
        page.wait_for_url(re.compile(r"/manage/applications/\?status=pending"))
        assert page.locator("[data-testid=section-pending] tbody tr").count() == 1
    assert_no_axe_violations(page, "applications, pending only")


def test_revoked_and_rejected_applications_stay_listed_and_filterable(live_server, tab):
    base, page = live_server.url, tab
    admin = _admin()
    _second_admin()
    revoked = factories.make_user(
        "rev@hospital.example.edu", roles=[Role.CLINICIAN], full_name="Rev Oked"
    )
    services.application_revoke(
        application=AccessApplication.objects.get(user=revoked),
        reviewer=admin,
        reason="Left the study.",
    )
    rejected = _application("rej@hospital.example.edu", "Rej Ected")
    services.application_reject(application=rejected, reviewer=admin, reason="No training.")
    _application("pen@hospital.example.edu", "Pen Ding")

    sign_in_with_totp(page, base, admin.email)
    page.goto(base + reverse("admin_applications"))
    assert "Rev Oked" in page.inner_text("[data-testid=section-revoked]")
    assert "Left the study." in page.inner_text("[data-testid=section-revoked]")
    assert "Rej Ected" in page.inner_text("[data-testid=section-rejected]")
    page.click("[data-testid=status-filter] >> text=Rejected")
    page.wait_for_url(re.compile(r"status=rejected"))
    assert page.locator("section[data-testid^=section-]").count() == 1
    assert "Rej Ected" in page.inner_text("main")
    assert "Pen Ding" not in page.inner_text("main")
    assert_no_axe_violations(page, "applications, rejected only")


def test_a_lone_admin_is_told_the_date_by_which_a_second_admin_must_exist(live_server, tab):
    base, page = live_server.url, tab
    admin = _admin()
    ends = AccessApplication.objects.get(user=admin).access_ends_on()
    sign_in_with_totp(page, base, admin.email)
    for url in (reverse("application_status"), reverse("admin_applications")):
        page.goto(base + url)
        notice = page.inner_text("[data-testid=lone-admin]")
        assert "only admin" in notice and f"{ends.day} {ends:%B %Y}" in notice
    assert_no_axe_violations(page, "applications, lone admin")

    _second_admin()
    page.goto(base + reverse("application_status"))
    assert page.locator("[data-testid=lone-admin]").count() == 0


# --- item 6: events worth a line -----------------------------------------------------------------
def test_a_reopened_clinician_gets_an_email_without_the_reason(live_server, tab):
    base, page = live_server.url, tab
    dataset = review_data.make_dataset("reopen")
    patient = review_data.make_record(dataset, "9000006", n_events=5)
    instruction = review_data.make_instruction(dataset, patient, "I-REOPEN-1")
    admin = _admin()
    clinician = factories.make_user("cleo@example.edu", roles=[Role.CLINICIAN])
    review = review_get_or_start(assignment=review_data.assign(instruction, clinician))
    Review.objects.filter(pk=review.pk).update(status=Review.Status.SUBMITTED)
    mail.outbox.clear()

    sign_in_with_totp(page, base, admin.email)
    page.goto(base + reverse("progress_dataset", args=[dataset.pk]))
    page.click("[data-testid=reopen-form] >> xpath=.. >> summary")
    page.fill("[data-testid=reopen-form] textarea[name=reason]", "Potassium 6.1 was missed.")
    page.click("[data-testid=reopen-form] button[type=submit]")
    page.wait_for_load_state()
    sent = [m for m in mail.outbox if m.to == [clinician.email]]
    assert len(sent) == 1 and "reopened" in sent[0].subject
    assert reverse("clinician_review", args=[instruction.pk]) in sent[0].body
    assert "I-REOPEN-1" in sent[0].body
    assert "Potassium" not in sent[0].body  # the reason may quote the record: it stays in the app


def test_the_audit_log_names_patients_by_person_id(live_server, tab):
    base, page = live_server.url, tab
    dataset = review_data.make_dataset("audit")
    patient = review_data.make_record(dataset, "9000006", n_events=3)
    admin = _admin()
    audit_record(
        action=AuditEvent.Action.RECORD_VIEWED,
        actor=admin,
        obj=patient,
        person_id=patient.person_id,
        instruction_id="I-1",
    )
    sign_in_with_totp(page, base, admin.email)
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.goto(base + reverse("audit_log") + "?action=record_viewed")
        cell = page.locator("[data-testid=audit-object]").first.inner_text()
        assert cell == "Patient 9000006", cell
        assert f"Patient {patient.pk}" not in page.inner_text("main")
    page.goto(base + reverse("admin:review_auditevent_changelist"))
    assert "Patient 9000006" in page.inner_text("#result_list")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_publishing_a_dua_version_starts_from_the_current_text_and_confirms_the_diff(
    live_server, tab, viewport
):
    base, page = live_server.url, tab
    page.set_viewport_size(viewport)
    DUAVersion.objects.update(is_active=False)
    current = DUAVersion.objects.create(
        version="7.0",
        text="Keep the data encrypted.\nNever share it.\nDelete it after the study.",
        is_active=True,
        published_at=timezone.now(),
    )
    admin = _admin()
    sign_in_with_totp(page, base, admin.email)
    page.goto(base + reverse("admin_dua_publish"))
    assert page.input_value("textarea[name=text]") == current.text
    assert page.input_value("input[name=version]") == "7.1"
    page.fill(
        "textarea[name=text]",
        "Keep the data encrypted.\nNever share it, nor send it to an online service.\n"
        "Delete it after the study.",
    )
    page.click("[data-testid=dua-edit-form] button[type=submit]")
    page.wait_for_selector("[data-testid=dua-preview]")
    assert DUAVersion.objects.get(is_active=True).version == "7.0"  # nothing published yet
    diff = page.inner_text("[data-testid=dua-diff]")
    assert "Never share it.\n" in diff or "Never share it." in diff
    assert page.locator("[data-testid=dua-diff] del").inner_text() == "Never share it."
    assert "online service" in page.locator("[data-testid=dua-diff] ins").inner_text()
    assert_no_axe_violations(page, "DUA publish, preview")

    # Publishing without the confirmation ticked publishes nothing and says why.
    page.click("button[value=publish]")
    page.wait_for_selector("[data-testid=dua-preview] .errors")
    assert DUAVersion.objects.get(is_active=True).version == "7.0"
    assert_no_axe_violations(page, "DUA publish, confirmation missing")
    page.check("input[name=confirm]")
    page.click("button[value=publish]")
    page.wait_for_url(base + reverse("dua_sign"))  # the admin signs it too
    active = DUAVersion.objects.get(is_active=True)
    assert active.version == "7.1" and "online service" in active.text
    assert active.text.count("\n") == 2


# --- item 7: every page a role uses fits a phone -------------------------------------------------
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const page = document.documentElement.scrollWidth - width;
  // A control is out of reach when it lies beyond the screen's right edge and no scrollable
  // box of its own brings it back.
  const scrollsAlone = el => { for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const s = getComputedStyle(p); if (/(auto|scroll)/.test(s.overflowX)) return true; } return false; };
  const out = [];
  for (const el of document.querySelectorAll('main a[href], main button, main input, main select, main textarea')) {
    const r = el.getBoundingClientRect();
    if (!r.width || getComputedStyle(el).visibility === 'hidden') continue;
    if ((r.right > width + 1 || r.left < -1) && !scrollsAlone(el)) out.push(el.outerHTML.slice(0, 80));
  }
  return {page, out};
}"""

CHART_FONTS = """() => [...document.querySelectorAll('figure.chart svg')].filter(svg => svg.getBoundingClientRect().width > 0).map(svg => {
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  return {label: svg.getAttribute('aria-label'), px: 12 * scale};
})"""


def _misfits(page, name: str) -> list[str]:
    page.wait_for_load_state()
    found = page.evaluate(OVERFLOW)
    problems = []
    if found["page"] > 1:
        widest = page.evaluate(
            """() => [...document.querySelectorAll('body *')]
                .filter(e => e.getBoundingClientRect().right > innerWidth + 1)
                .filter(e => ![...e.children].some(
                    c => c.getBoundingClientRect().right > innerWidth + 1))
                .slice(0, 3)
                .map(e => e.tagName + '.' + e.className + ' ' + (e.textContent || '').slice(0, 40))"""
        )
        problems.append(f"{name}: the page scrolls sideways by {found['page']}px: {widest}")
    if found["out"]:
        problems.append(f"{name}: controls off-screen: {found['out']}")
    return problems


def _shot(page, name: str, *, start: str = "", height: int = 1700) -> None:
    """Save ``height`` px of the page from the element ``start`` (else the top)."""
    if not SCREENSHOTS:
        return
    Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
    top = 0.0
    if start:
        page.locator(start).first.scroll_into_view_if_needed()
        top = page.evaluate(
            "s => document.querySelector(s).getBoundingClientRect().top + window.scrollY - 8",
            start,
        )
    full = page.evaluate("() => document.documentElement.scrollHeight")
    clip = {"x": 0, "y": top, "width": PHONE["width"], "height": min(height, full - top)}
    page.screenshot(path=str(Path(SCREENSHOTS) / name), full_page=True, clip=clip)


def test_every_page_a_role_uses_fits_a_phone(live_server, tab):
    from review.models import ErrorTag
    from scoring.models import ScoringRun
    from tests.scoring.test_reports import _done_report
    from tests.scoring.test_reports import data as report_data

    base, page = live_server.url, tab
    page.set_viewport_size(PHONE)
    # A transactional test before this one flushed the seeded tags the report data uses.
    ErrorTag.objects.get_or_create(slug="omission", defaults={"label": "Omission"})
    d = report_data._get_wrapped_function()()
    report = _done_report(d)
    run = ScoringRun.objects.create(dataset=d.dataset, total=0)
    admin = _admin()
    _second_admin()
    for k, (email, name) in enumerate(
        [
            ("a.very.long.address.for.an.applicant@cardiology.hospital.example.edu", "Alexandra Long-Name"),
            ("bo@hospital.example.edu", "Bo Short"),
        ]
    ):  # fmt: skip
        application = _application(email, name)
        if k:
            services.application_reject(application=application, reviewer=admin, reason="x" * 200)
    audit_record(action=AuditEvent.Action.LOGIN, actor=admin, details={"reason": "y" * 300})
    dataset = d.dataset

    sign_in_with_totp(page, base, admin.email)
    pending = AccessApplication.objects.filter(status="pending").first()
    admin_pages = {
        "applications": reverse("admin_applications"),
        "application": reverse("admin_application_detail", args=[pending.pk]),
        "audit log": reverse("audit_log"),
        "assign": reverse("admin_assign"),
        "progress": reverse("progress_index"),
        "progress dataset": reverse("progress_dataset", args=[dataset.pk]),
        "studies": reverse("admin_studies", args=[dataset.pk]),
        "DUA publish": reverse("admin_dua_publish"),
        "your access": reverse("application_status"),
        "scoring runs": reverse("scoring_runs"),
        "scoring run": reverse("scoring_run_detail", args=[run.pk]),
        "reports": reverse("scoring_reports"),
        "paper tables": reverse("scoring_paper_tables", args=[dataset.pk]),
        "generation runs": reverse("generation_runs"),
        "method": reverse("scoring_method"),
        "API tokens": reverse("scoring_api_tokens"),
    }
    problems = []
    for name, url in admin_pages.items():
        page.goto(base + url)
        problems += _misfits(page, name)
    assert not problems, "\n".join(problems)
    page.goto(base + reverse("admin_applications"))
    link = page.locator("[data-testid=section-pending] a", has_text="Open").first
    box = link.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    _shot(page, "admin-applications-phone.png", height=1900)

    # A clinician's pages, and an applicant's.
    record = review_data.make_dataset("phone")
    instruction = review_data.make_instruction(
        record, review_data.make_record(record, "9000007", n_events=30), "I-PHONE-1"
    )
    clinician = factories.make_user("cleo@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    applicant = _application("pat@hospital.example.edu", "Pat Applicant")
    for user, pages in (
        (
            clinician,
            {
                "queue": reverse("clinician_queue"),
                "review page": reverse("clinician_review", args=[instruction.pk]),
            },
        ),
        (applicant.user, {"application status": reverse("application_status")}),
    ):
        page.context.clear_cookies()
        sign_in_with_totp(page, base, user.email)
        for name, url in pages.items():
            page.goto(base + url)
            problems += _misfits(page, name)
    assert not problems, "\n".join(problems)

    page.context.clear_cookies()
    sign_in_with_totp(page, base, d.researcher.email)
    page.goto(base + reverse("scoring_report_detail", args=[report.pk]))
    assert not _misfits(page, "report"), _misfits(page, "report")
    fonts = page.evaluate(CHART_FONTS)
    assert fonts, "the report shows no chart"
    small = [f for f in fonts if f["px"] < 10.5]
    assert not small, f"chart labels too small on a phone: {small}"
    _shot(page, "report-phone.png", start="#correlation", height=1500)
    _shot(page, "report-leaderboard-phone.png", start="#leaderboard", height=1500)
    assert_no_axe_violations(page, "report, phone")


def test_wrong_codes_and_the_lockout_reach_the_audit_log_and_the_lockout_says_how_long(
    live_server, tab
):
    from tests.e2e.test_accessibility import sign_in

    base, page = live_server.url, tab
    admin = _admin()
    clinician = factories.make_user("cleo@example.edu", roles=[Role.CLINICIAN])
    sign_in(page, base, clinician.email)
    page.wait_for_selector("input[name=code]")
    for _ in range(5):
        page.fill("input[name=code]", "000000")
        page.click("main button[type=submit]")
        page.wait_for_load_state()
    page.fill("input[name=code]", factories.totp_code_fresh())
    page.click("main button[type=submit]")
    page.wait_for_load_state()
    text = page.inner_text("main")
    assert "Too many wrong codes" in text and "5 minutes" in text, text
    assert_no_axe_violations(page, "second factor locked")

    page.context.clear_cookies()
    sign_in_with_totp(page, base, admin.email)
    page.goto(base + reverse("audit_log") + f"?actor={clinician.email}")
    log = page.inner_text("main table")
    assert log.count("Wrong second-factor code") == 5
    assert "Second factor locked" in log
    assert "000000" not in page.content()
