"""axe-core (WCAG 2.1 A and AA) on every page a clinician, admin, researcher or applicant sees,
at desktop (1440×900) and phone (390×844) widths: 0 violations.

axe-core is vendored in tests/e2e/vendor/ (from the npm registry, MPL-2.0) and injected through
Playwright's evaluate, which the page's CSP does not govern, so the pages are tested exactly as
served. Any CSP violation the page itself causes (an inline style or script) fails the check too.

To check another page state, get the page there and call one helper:

    assert_no_axe_violations(page, "review page, ranked")

It scans at the current viewport and at the other one, and names the state in the failure.
Set A11Y_SCREENSHOTS=/some/folder to also save a full-page screenshot of every state scanned.
"""

import os
import re
from pathlib import Path

import pytest
from allauth.mfa.models import Authenticator
from django.core import mail
from django.urls import reverse

from review.models import AccessApplication, DUAVersion, ModelResponse, Role
from review.services.reviews import review_get_or_start, review_reopen
from scoring.models import GenerationRun, ScoringRun
from tests import factories
from tests.review import review_data

AXE_SOURCE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text(encoding="utf-8")
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
# Best-practice rules (outside the WCAG tags) that the issue asked for by name.
EXTRA_RULES = ["empty-table-header"]
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
SCREENSHOTS = os.environ.get("A11Y_SCREENSHOTS", "")
PASSWORD = "Violet-Harbor-Lantern-42"


def _csp_errors(page) -> list[str]:
    return page.evaluate("() => window.__cspViolations || []")


def _watch_csp(context) -> None:
    # An init script is run by the browser itself, not as page content, so CSP allows it.
    context.add_init_script(
        "window.__cspViolations = [];"
        "document.addEventListener('securitypolicyviolation', e => "
        "window.__cspViolations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline')));"
    )


def _axe(page) -> list[dict]:
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE_SOURCE)
    result = page.evaluate(
        "async ([tags, extra]) => await axe.run(document, {runOnly: {type: 'tag', values: tags},"
        " rules: Object.fromEntries(extra.map(id => [id, {enabled: true}]))})",
        [WCAG_TAGS, EXTRA_RULES],
    )
    return result["violations"]


# axe passes aria-describedby when at least one of its ids exists; a help text or error that is
# never read out still slips through, so every reference is checked here, one by one.
MISSING_REFERENCES = """() => {
  const missing = [];
  for (const attr of ['aria-describedby', 'aria-labelledby', 'aria-controls']) {
    for (const el of document.querySelectorAll(`[${attr}]`)) {
      for (const id of el.getAttribute(attr).split(/\\s+/).filter(Boolean)) {
        if (!document.getElementById(id)) missing.push(`${el.tagName.toLowerCase()}[${attr}=${id}]`);
      }
    }
  }
  for (const label of document.querySelectorAll('label[for]')) {
    if (!document.getElementById(label.htmlFor)) missing.push(`label[for=${label.htmlFor}]`);
  }
  return missing;
}"""


def _describe(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"  {v['id']} ({v['impact']}): {v['help']}")
        for node in v["nodes"][:5]:
            lines.append(f"    at {node['target']}: {node['failureSummary'].splitlines()[-1]}")
    return "\n".join(lines)


def assert_no_axe_violations(page, name: str) -> None:
    """Scan the page as it is now at desktop and at phone width; fail with what axe found."""
    failures = []
    original = page.viewport_size or DESKTOP
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        violations = _axe(page)
        if violations:
            failures.append(f"{name} at {label} width ({page.url}):\n{_describe(violations)}")
        if SCREENSHOTS:
            folder = Path(SCREENSHOTS)
            folder.mkdir(parents=True, exist_ok=True)
            slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
            page.screenshot(path=str(folder / f"{slug}-{label}.png"), full_page=True)
    page.set_viewport_size(original)
    missing = page.evaluate(MISSING_REFERENCES)
    if missing:
        failures.append(f"{name}: references to ids that do not exist: {missing}")
    csp = _csp_errors(page)
    if csp:
        failures.append(f"{name}: the page broke its CSP: {csp}")
    assert not failures, "\n".join(failures)


def visit(page, base: str, url: str, name: str, *, status: int = 200) -> None:
    response = page.goto(base + url)
    assert response is not None and response.status == status, f"{name}: {url} → {response.status}"
    assert_no_axe_violations(page, name)


def sign_in(page, base: str, email: str, password: str = factories.PASSWORD) -> None:
    page.goto(base + reverse("account_login"))
    page.fill("input[name=login]", email)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")


def sign_in_with_totp(page, base: str, email: str, *, check: bool = False) -> None:
    sign_in(page, base, email)
    page.wait_for_selector("input[name=code]")
    if check:
        assert_no_axe_violations(page, "sign-in second factor")
    # A code from the last seconds of its window can expire before the server checks it.
    page.fill("input[name=code]", factories.totp_code_fresh())
    page.click("main button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/" not in url)


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


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_applicant_pages_have_no_axe_violations(live_server, tab):
    base, page = live_server.url, tab
    factories.active_dua()
    visit(page, base, reverse("account_login"), "sign-in")
    page.fill("input[name=login]", "nobody@example.edu")
    page.fill("input[name=password]", "wrong-password-123")
    page.click("main button[type=submit]")
    page.wait_for_load_state()
    assert_no_axe_violations(page, "sign-in with an error")
    visit(page, base, reverse("account_reset_password"), "password reset")
    visit(page, base, "/no/such/page/", "404", status=404)

    visit(page, base, reverse("account_signup"), "sign-up")
    page.fill("input[name=email]", "new.applicant@hospital.example.edu")
    page.fill("input[name=password1]", "short")
    page.fill("input[name=password2]", "other")
    page.click("main button[type=submit]")
    page.wait_for_load_state()
    assert_no_axe_violations(page, "sign-up with errors")
    page.fill("input[name=email]", "new.applicant@hospital.example.edu")
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/accounts/confirm-email/"))
    assert_no_axe_violations(page, "verification sent")
    link = re.search(r"https?://\S+/accounts/confirm-email/\S+", mail.outbox[-1].body).group(0)
    page.goto(link)
    assert_no_axe_violations(page, "confirm email")
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/accounts/login/"))

    sign_in(page, base, "new.applicant@hospital.example.edu", PASSWORD)
    page.wait_for_url(base + reverse("application_status"))
    assert_no_axe_violations(page, "application status, not applied")
    page.goto(base + reverse("mfa_activate_totp"))
    page.wait_for_url(re.compile(r"/accounts/reauthenticate/"))
    assert_no_axe_violations(page, "reauthenticate")
    page.fill("input[name=password]", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(base + reverse("mfa_activate_totp"))
    assert_no_axe_violations(page, "totp setup")
    page.fill("input[name=code]", "000000")
    page.click("main button[type=submit]")
    page.wait_for_load_state()
    assert_no_axe_violations(page, "totp setup with an error")
    secret = page.input_value("#authenticator_secret")
    page.fill("input[name=code]", factories.totp_code_fresh(secret))
    page.click("main button[type=submit]")
    page.wait_for_url(lambda url: "/totp/activate" not in url)
    assert_no_axe_violations(page, "after totp setup")
    visit(page, base, reverse("mfa_view_recovery_codes"), "recovery codes")
    visit(page, base, reverse("mfa_index"), "two-factor overview")
    visit(page, base, reverse("account_change_password"), "password change")
    visit(page, base, reverse("account_email"), "email addresses")

    visit(page, base, reverse("application_apply"), "application form")
    page.click("main button[type=submit]")
    page.wait_for_load_state()
    assert_no_axe_violations(page, "application form with errors")
    page.fill("input[name=full_name]", "New Applicant")
    page.fill("input[name=institution]", "Example University Hospital")
    page.fill("input[name=institutional_email]", "new.applicant@hospital.example.edu")
    page.select_option("select[name=requested_role]", "clinician")
    page.fill("textarea[name=research_use]", "Rank model answers for an evaluation.")
    page.set_input_files(
        "input[name=certificate]",
        {"name": "training.pdf", "mimeType": "application/pdf", "buffer": factories.PDF_BYTES},
    )
    page.fill("input[name=certificate_completed_on]", "2026-01-05")
    page.fill("input[name=certificate_expires_on]", "2028-01-05")
    page.check("input[name=storage_attestation]")
    page.fill("input[name=typed_name]", "New Applicant")
    page.click("main button[type=submit]")
    page.wait_for_url(base + reverse("application_status"))
    assert_no_axe_violations(page, "application status, pending")


def _clinician_world():
    dataset = review_data.make_dataset("a11y")
    patient = review_data.make_record(dataset, "P-A11Y-1", n_events=40)
    instructions = [review_data.make_instruction(dataset, patient, f"I-A11Y-{i}") for i in range(3)]
    clinician = factories.make_user(
        "clinician@example.edu", roles=[Role.CLINICIAN], full_name="Cleo Clinician"
    )
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN], full_name="Ada Admin")
    assignments = [review_data.assign(i, clinician) for i in instructions]
    return dataset, instructions, clinician, admin, assignments


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_clinician_pages_have_no_axe_violations(live_server, tab):
    from review.models import Review

    base, page = live_server.url, tab
    dataset, instructions, clinician, admin, assignments = _clinician_world()
    review = review_get_or_start(assignment=assignments[0])
    Review.objects.filter(pk=review.pk).update(status=Review.Status.SUBMITTED)
    review_reopen(review=review, actor=admin, reason="Please look at the latest potassium again.")

    sign_in_with_totp(page, base, clinician.email, check=True)
    visit(page, base, reverse("clinician_queue"), "queue")
    assert "Please look at the latest potassium again." in page.inner_text("main")
    visit(page, base, reverse("clinician_queue") + "?status=submitted", "queue, filtered empty")
    visit(page, base, reverse("application_status"), "your access")


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_admin_pages_have_no_axe_violations(live_server, tab):
    base, page = live_server.url, tab
    dataset, instructions, clinician, admin, assignments = _clinician_world()
    from review.models import Review

    review = review_get_or_start(assignment=assignments[1])
    Review.objects.filter(pk=review.pk).update(status=Review.Status.SUBMITTED)
    applicant = factories.make_user("applicant@example.edu", full_name="Pat Applicant")
    application = factories.make_application(applicant)

    sign_in_with_totp(page, base, admin.email)
    visit(page, base, reverse("admin_applications"), "admin applications list")
    visit(
        page,
        base,
        reverse("admin_application_detail", args=[application.pk]),
        "admin application detail",
    )
    page.click("[data-testid=decision-form] button[type=submit]")
    page.wait_for_load_state()
    assert_no_axe_violations(page, "admin application detail with errors")
    visit(page, base, reverse("audit_log"), "audit log")
    visit(page, base, reverse("admin_assign"), "assignments")
    page.click("button[value=preview]")
    page.wait_for_load_state()
    assert_no_axe_violations(page, "assignments with errors")
    visit(page, base, reverse("progress_index"), "progress index")
    visit(page, base, reverse("progress_dataset", args=[dataset.pk]), "progress dataset")
    page.click("[data-testid=reopen-form] >> xpath=.. >> summary")
    assert_no_axe_violations(page, "progress dataset, reopen open")
    visit(page, base, reverse("admin_studies", args=[dataset.pk]), "studies and response sets")
    page.locator("[data-testid=models] button").first.click()
    page.wait_for_load_state()
    assert_no_axe_violations(page, "studies, after a change")
    visit(page, base, reverse("admin_dua_publish"), "DUA publish")


def _generation_run(dataset) -> GenerationRun:
    """A failed generation run with one response's provenance, as its page shows them."""
    from review.models import ModelResponse

    run = GenerationRun.objects.create(
        dataset=dataset,
        model_key="local:local-lm",
        backend_spec={"kind": "transformers", "path": "/models/local-lm"},
        model_identity={"backend": "transformers", "model": "local-lm"},
        label="local-lm",
        context_lengths=[2048],
        template_text="{ehr}\n{question}",
        template_version="helm@0123456789ab",
        serialization_version="medalign-text/1",
        params={"max_new_tokens": 256, "temperature": 0.0, "top_p": 1.0, "seed": 0},
        status=GenerationRun.Status.FAILED,
        total=2,
        error="1 batch(es) failed: the model folder local-lm changed since this run began",
    )
    instruction = dataset.instructions.first()
    ModelResponse.objects.create(
        instruction=instruction,
        model_name="local-lm@2048",
        text="A generated answer.",
        context_length=2048,
        truncation_policy="recent",
        generation_metadata={
            "base_model": "local-lm",
            "generation": {"run": run.pk, "tokens_kept": 1500, "prompt_tokens": 1790,
                           "completion_tokens": 40, "finish_reason": "stop",
                           "prompt_sha256": "ab" * 32},
        },
    )  # fmt: skip
    return run


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_researcher_pages_have_no_axe_violations(live_server, tab, settings, tmp_path):
    base, page = live_server.url, tab
    from review.models import ErrorTag
    from tests.scoring.test_reports import _done_report
    from tests.scoring.test_reports import data as report_data

    # A transactional test starts from an empty database: the seeded tags are gone.
    ErrorTag.objects.get_or_create(slug="omission", defaults={"label": "Omission"})
    d = report_data._get_wrapped_function()()
    report = _done_report(d)
    run = ScoringRun.objects.create(dataset=d.dataset, total=0)
    # A new DUA version: the researcher must sign it before anything else.
    DUAVersion.objects.update(is_active=False)
    DUAVersion.objects.create(version="2.0", title="DUA 2.0", text="Synthetic DUA.", is_active=True)
    assert Authenticator.objects.filter(user=d.researcher).exists()

    sign_in_with_totp(page, base, d.researcher.email)
    visit(page, base, reverse("dua_sign"), "DUA sign")
    page.click("main button[type=submit]")
    page.wait_for_load_state()
    assert_no_axe_violations(page, "DUA sign with errors")
    page.fill("input[name=typed_name]", d.researcher.full_name)
    page.check("input[name=agree]")
    page.click("main button[type=submit]")
    page.wait_for_load_state()
    assert AccessApplication.objects.filter(user=d.researcher).exists()
    visit(page, base, reverse("scoring_runs"), "scoring runs list")
    visit(page, base, reverse("scoring_run_detail", args=[run.pk]), "scoring run detail")
    visit(page, base, reverse("scoring_reports"), "reports list")
    visit(page, base, reverse("scoring_report_detail", args=[report.pk]), "report detail")
    visit(page, base, reverse("scoring_method"), "method")
    # The release's own judgements of the same responses, so the paper's tables fill in.
    for k, response in enumerate(ModelResponse.objects.filter(instruction__dataset=d.dataset)):
        response.release_rank = 1 + k % 3
        response.release_binary_correct = k % 2 == 0
        response.save(update_fields=["release_rank", "release_binary_correct"])
    visit(page, base, reverse("scoring_paper_tables", args=[report.dataset_id]), "paper tables")
    visit(page, base, reverse("scoring_api_tokens"), "API tokens")
    # Generation: the form with a model to pick, the form with errors, a run that failed.
    (tmp_path / "models" / "local-lm").mkdir(parents=True)
    (tmp_path / "models" / "local-lm" / "config.json").write_text("{}")
    settings.GENERATION_MODEL_DIR = tmp_path / "models"
    generation = _generation_run(d.dataset)
    visit(page, base, reverse("generation_runs"), "generation runs list and form")
    page.fill("input[name=context_lengths]", "many")
    page.click("main form button[type=submit]")
    page.wait_for_load_state()
    assert_no_axe_violations(page, "generation form with errors")
    visit(page, base, reverse("generation_run_detail", args=[generation.pk]), "generation run")
