"""What a new user tripped on, in a real browser at 1440×900 and 390×844, each state scanned by
axe (0 violations): the site menu on one line at desktop width and folded on a phone, the
admin home, the queue's Reopened filter, the review page's record filters and keys pressed
outside a response, a page not available to one's role, a JSON endpoint opened as a page, the
sign-up of a server that prints its emails, and a finished generation run.

Set A11Y_SCREENSHOTS=/some/folder to keep a screenshot of every state scanned."""

import pytest
from django.test import override_settings
from django.urls import reverse
from playwright.sync_api import expect

from review.models import Dataset, Review, Role
from review.services.reviews import review_get_or_start, review_reopen
from scoring.models import GenerationRun
from tests import factories
from tests.e2e.test_accessibility import (  # noqa: F401 - context and tab are fixtures
    DESKTOP,
    PHONE,
    _clinician_world,
    assert_no_axe_violations,
    context,
    sign_in_with_totp,
    tab,
    visit,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MENU_ROWS = """() => {
  const nav = document.getElementById('site-nav');
  const items = [...nav.children].filter(e => e.getClientRects().length);
  return new Set(items.map(e => Math.round(e.getBoundingClientRect().top))).size;
}"""


def _header_height(page) -> float:
    return page.evaluate("document.querySelector('.topbar').getBoundingClientRect().height")


def test_the_admin_menu_fits_one_line_and_folds_on_a_phone(live_server, tab):  # noqa: F811
    base, page = live_server.url, tab
    dataset, instructions, clinician, admin, assignments = _clinician_world()
    # Every role at once: the longest menu there is.
    everyone = factories.make_user(
        "all.roles.with.a.long.address@hospital.example.edu",
        roles=[Role.ADMIN, Role.CLINICIAN, Role.RESEARCHER],
    )
    factories.make_application(factories.make_user("waiting@example.edu"))  # a pending count
    sign_in_with_totp(page, base, everyone.email)
    for url in (reverse("home"), reverse("generation_runs"), reverse("account_email")):
        page.set_viewport_size(DESKTOP)
        page.goto(base + url)
        assert page.evaluate(MENU_ROWS) == 1, url
        assert _header_height(page) < 60, url
    page.goto(base + reverse("home"))
    home = page.locator("[data-testid=study-home]")
    expect(home.get_by_role("link", name="Progress")).to_be_visible()
    expect(home.get_by_role("link", name="Assign work")).to_be_visible()
    expect(home.get_by_role("link", name=f"Studies of {dataset.name}")).to_be_visible()
    assert_no_axe_violations(page, "admin home")
    research = page.locator("[data-testid=nav-research]")
    research.locator("summary").click()
    expect(research.get_by_role("link", name="Generation runs")).to_be_visible()
    assert_no_axe_violations(page, "menu, research open")
    page.keyboard.press("Escape")
    expect(research.get_by_role("link", name="Generation runs")).to_be_hidden()
    account = page.locator("[data-testid=nav-account]")
    account.locator("summary").click()
    expect(account.get_by_role("link", name="Your access")).to_be_visible()
    expect(account).to_contain_text(everyone.email)  # whole, though cut in the bar
    page.locator("main h1").click()  # a click elsewhere closes it
    expect(account.get_by_role("link", name="Your access")).to_be_hidden()

    page.set_viewport_size(PHONE)
    page.goto(base + reverse("home"))
    assert _header_height(page) < 60  # was 230 px
    expect(page.locator("#site-nav")).to_be_hidden()
    toggle = page.locator("#menu-toggle")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(toggle.locator("[data-testid=menu-pending-count]")).to_be_visible()
    assert_no_axe_violations(page, "phone, menu folded")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    nav = page.locator("#site-nav")
    expect(nav.get_by_role("link", name="Audit log")).to_be_visible()
    expect(nav.get_by_role("button", name="Sign out")).to_be_visible()
    page.set_viewport_size(PHONE)
    assert_no_axe_violations(page, "phone, menu open")


def test_a_clinicians_queue_and_review_on_a_phone_and_a_desktop(live_server, tab):  # noqa: F811
    base, page = live_server.url, tab
    dataset, instructions, clinician, admin, assignments = _clinician_world()
    review = review_get_or_start(assignment=assignments[0])
    Review.objects.filter(pk=review.pk).update(status=Review.Status.SUBMITTED)
    review_reopen(review=review, actor=admin, reason="Please look at the potassium again.")
    sign_in_with_totp(page, base, clinician.email)

    page.set_viewport_size(PHONE)
    visit(page, base, reverse("clinician_queue") + "?status=reopened", "queue, reopened only")
    page.set_viewport_size(PHONE)
    assert _header_height(page) < 60
    main = page.inner_text("main")
    assert "Please look at the potassium again." in main and "1 reopened" in main
    assert page.locator("[data-testid=queue] tbody tr").count() == 1
    expect(page.locator("#f-status")).to_have_value("reopened")

    url = reverse("clinician_review", args=[instructions[0].pk])
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.goto(base + url)
        page.wait_for_selector("body[data-review-ready]")
        notice = page.inner_text("[data-testid=reopened]")
        assert "“Please look at the potassium again.”" in notice and ".”." not in notice
        page.get_by_role("tab", name="Full record").click()
        page.wait_for_selector("#record-list .tl-event")
        for label, control in (("Jump to date", "#record-day"), ("Event type", "#record-type")):
            box = page.locator(f"label[for={control[1:]}]").bounding_box()
            field = page.locator(control).bounding_box()
            assert abs(box["y"] + box["height"] / 2 - field["y"] - field["height"] / 2) < 8, (
                label,
                size,
            )
        # "Skip to content", then a rank key: the page says where the keys work.
        page.locator("#main").focus()
        page.keyboard.press("2")
        expect(page.locator("[data-testid=key-hint]")).to_contain_text("press J")
        assert_no_axe_violations(page, f"review page, keys outside a response ({size['width']})")
        page.keyboard.press("j")
        expect(page.locator("[data-testid=key-hint]")).to_be_hidden()


def test_a_page_not_for_ones_role_says_so(live_server, tab):  # noqa: F811
    base, page = live_server.url, tab
    dataset, instructions, clinician, admin, assignments = _clinician_world()
    researcher = factories.make_user("res@example.edu", roles=[Role.RESEARCHER])
    sign_in_with_totp(page, base, researcher.email)
    visit(page, base, reverse("clinician_queue"), "queue, as a researcher", status=403)
    text = page.inner_text("main")
    assert "not available to your role" in text and "for clinicians" in text
    page.context.clear_cookies()
    sign_in_with_totp(page, base, clinician.email)
    visit(page, base, reverse("scoring_reports"), "reports, as a clinician", status=403)
    assert "for researchers and admins" in page.inner_text("main")
    review = review_get_or_start(assignment=assignments[0])
    # Opened from the address bar: a page, not the endpoint's JSON.
    visit(page, base, reverse("review_save", args=[review.pk]), "autosave address", status=405)
    assert "This address is not a page" in page.inner_text("main")
    visit(
        page,
        base,
        reverse("record_events", args=[instructions[0].pk]),
        "record address",
        status=406,
    )
    page.get_by_role("link", name="Go to your review queue").click()
    page.wait_for_url(base + reverse("clinician_queue"))


def test_the_demo_sign_up_says_the_link_is_in_the_servers_output(live_server, tab):  # noqa: F811
    base, page = live_server.url, tab
    factories.active_dua()
    with override_settings(EMAIL_BACKEND="django.core.mail.backends.console.EmailBackend"):
        visit(page, base, reverse("account_signup"), "sign-up, emails printed")
        expect(page.get_by_test_id("emails-printed")).to_contain_text("server's output")


def test_a_finished_generation_run_leads_to_a_round(live_server, tab):  # noqa: F811
    from tests.e2e.test_accessibility import _generation_run

    base, page = live_server.url, tab
    dataset, instructions, clinician, admin, assignments = _clinician_world()
    run = _generation_run(dataset)
    GenerationRun.objects.filter(pk=run.pk).update(status=GenerationRun.Status.DONE, error="")
    sign_in_with_totp(page, base, admin.email)
    visit(page, base, reverse("generation_runs"), "generation runs")
    assert "{#" not in page.inner_text("main")
    assert "candidates" in page.inner_text("main")
    visit(page, base, reverse("generation_run_detail", args=[run.pk]), "generation run, done")
    page.get_by_role(
        "link", name=f"Add them to a round on the studies page of {dataset.name}"
    ).click()
    page.wait_for_url(base + reverse("admin_studies", args=[dataset.pk]) + "#models-title")
    assert Dataset.objects.filter(pk=dataset.pk).exists()
    # A run still waiting for its worker to hash a local model's weights says so.
    waiting = GenerationRun.objects.create(
        dataset=dataset,
        model_key="local:local-lm",
        backend_spec={"kind": "transformers", "path": "/models/local-lm"},
        model_identity={"backend": "transformers", "weights_files": {"m.safetensors": [5e9, 1]}},
        label="local-lm",
        context_lengths=[2048],
        template_text="{ehr}\n{question}",
        total=2,
    )
    visit(page, base, reverse("generation_run_detail", args=[waiting.pk]), "generation, hashing")
    expect(page.locator("#run-progress [data-field=phase]")).to_contain_text("hashes its weights")
