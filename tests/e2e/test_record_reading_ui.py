"""The record a clinician reads, in a real browser at desktop (1440×900) and phone (390×844)
sizes: the excerpt, search by synonym, the record panel never showing the wrong events, and the
smaller things (comment box, "Submitted" where the clinician is, "Back to timeline", the
24-hour save time, a second tab hearing about edits, a lapsed clinician told why).

Uses the browser fixtures of tests/e2e/conftest.py (Debian's Chromium; skipped without it).
"""

import os
import re
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from review.access import clear_cached_access
from review.models import AccessApplication, Role
from tests import factories
from tests.e2e.test_review_ui import (
    _cards,
    _comment,
    _seed_tags,
    _sign_in,
    _summary,
    _values,
    _wait_saved,
)
from tests.review import review_data

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SIZES = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
DIABETIC = "Is this patient at high risk of diabetic complications?"


@pytest.fixture(params=list(SIZES))
def size(request):
    return SIZES[request.param]


@pytest.fixture
def world(db):
    _seed_tags()
    factories.active_dua()
    dataset = review_data.make_dataset("e2e-reading")
    patient = review_data.make_clinical_record(dataset, "P-READ")
    instruction = review_data.make_instruction(dataset, patient, "I-READ", question=DIABETIC)
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    return instruction, clinician


def _open(page, live_server, world, size=None):
    instruction, clinician = world
    if size:
        page.set_viewport_size(size)
    _sign_in(page.context, live_server, clinician)
    page.goto(live_server.url + reverse("clinician_review", args=[instruction.pk]))
    page.wait_for_selector("body[data-review-ready]")


def _full_record(page):
    page.get_by_role("tab", name="Full record").click()
    page.wait_for_selector("#record-list .tl-event")


def _search(page, q):
    page.fill("#record-q", q)
    page.press("#record-q", "Enter")
    expect(page.locator("#record-summary")).to_contain_text(f"for “{q}”")


# --- item 1: the excerpt ---------------------------------------------------------------------------
def test_the_excerpt_shows_the_latest_note_and_a1c_each_dated(live_server, page, world, size):
    _open(page, live_server, world, size)
    excerpt = page.locator("[data-testid=excerpt]")
    expect(excerpt).to_contain_text("The record runs from 4 Jan 2016 to 2 May 2022")
    latest = page.locator("[data-testid=latest-notes] article").first
    expect(latest).to_contain_text("1 May 2022")
    expect(latest).to_contain_text("1 day before the last event")
    a1c = page.locator("[data-testid=latest-values] tr", has_text="Hemoglobin A1c")
    expect(a1c).to_contain_text("7.9 % 20 Apr 2022, 08:00 12 days before the last event")
    # Every dated item says how long before the record's last event it is.
    dated = excerpt.locator("time").count()
    assert dated > 10 and excerpt.locator(".ago").count() == dated


# --- item 2: search by abbreviation and synonym -------------------------------------------------------
def test_search_matches_synonyms_and_says_what_it_searched_for(live_server, page, world, size):
    _open(page, live_server, world, size)
    _full_record(page)
    _search(page, "chest pain")
    summary = page.locator("#record-summary")
    expect(summary).to_have_text(
        "14 matches for “chest pain” in every event type, newest first. "
        "Also searched for: chest discomfort, thoracic pain."
    )
    assert page.locator("#record-list mark", has_text="chest discomfort").count() == 14
    _search(page, "HbA1c")
    expect(page.locator("#record-list .tl-event", has_text="Hemoglobin A1c").first).to_be_visible()
    _search(page, "studies")
    assert "studi " not in summary.inner_text() and "“studies”" in summary.inner_text()


# --- item 3: every view states exactly what it shows ----------------------------------------------------
def test_a_superseded_request_never_paints(live_server, page, world, size):
    _open(page, live_server, world, size)
    _full_record(page)
    _search(page, "chest pain")
    # "Back to timeline", then the type at once: the timeline's answer is held back until the
    # answer for "note" has been painted, then let through. It must not paint over it.
    held = []

    def hold_unfiltered(route):
        if "type=" in route.request.url:
            route.continue_()
        else:
            held.append(route)

    page.route("**/record/events/?*", hold_unfiltered)
    page.route("**/record/events/", hold_unfiltered)
    page.get_by_role("button", name="Back to timeline").click()
    page.wait_for_function("() => document.querySelector('#record-summary').textContent.length")
    page.select_option("#record-type", "note")
    summary = page.locator("#record-summary")
    expect(summary).to_have_text("Showing all 42 events of type note, newest first.")
    assert held, "the timeline request was sent"
    with page.expect_response(lambda r: "/record/events/" in r.url and "type=" not in r.url):
        held[0].continue_()
    page.wait_for_timeout(300)  # let the stale answer reach the page's handler
    expect(summary).to_have_text("Showing all 42 events of type note, newest first.")
    types = page.locator("#record-list .tl-event .tl-type").all_inner_texts()
    assert len(types) == 42 and set(types) == {"note"}
    expect(page.locator("#record-q")).to_have_value("")


def test_back_to_timeline_shows_only_on_a_search(live_server, page, world, size):
    _open(page, live_server, world, size)
    _full_record(page)
    back = page.get_by_role("button", name="Back to timeline")
    expect(back).to_be_hidden()
    _search(page, "metformin")
    expect(back).to_be_visible()
    back.click()
    expect(back).to_be_hidden()
    expect(page.locator("#record-summary")).to_have_text(
        "Showing the 100 most recent events, newest first."
    )


# --- item 4: the smaller things ---------------------------------------------------------------------
def test_the_comment_box_grows_counts_and_refuses_over_the_limit(live_server, page, world, size):
    instruction = world[0]
    _open(page, live_server, world, size)
    card = _cards(page).nth(0)
    _comment(card, "Short.")
    _wait_saved(page)
    box = card.locator("textarea")
    counter = card.locator(".char-count")
    expect(counter).to_have_text("6 / 5,000 characters")
    before = box.bounding_box()["height"]
    box.fill("A line of the comment.\n" * 20)
    assert box.bounding_box()["height"] > before * 1.5  # it grew with its text
    _wait_saved(page)
    pasted = "x" * 6_900
    box.fill(pasted)
    assert box.input_value() == pasted  # never cut
    # One unbroken run (a pasted URL, a row of symbols) wraps inside the card: the walk-through
    # saw a 44,000 px wide box and, on a phone, a page 714 px wide.
    card_box = card.bounding_box()
    assert box.bounding_box()["width"] <= card_box["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    expect(counter).to_contain_text("6,900 / 5,000 characters: 1,900 over the limit")
    expect(box).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#save-status")).to_have_text(
        "Not saved: the comment on Response A is 1,900 characters over the limit of 5,000. "
        "Shorten it to save."
    )
    page.wait_for_timeout(1_000)  # past the save debounce: nothing was sent
    assert _values(instruction)["A"].comment == "A line of the comment.\n" * 20
    page.locator("#submit-review").click()
    expect(page.locator("#submit-errors")).to_contain_text(
        "The comment on Response A is 1,900 characters over the limit of 5,000: shorten it."
    )
    box.fill("y" * 4_000)
    _wait_saved(page)
    assert _values(instruction)["A"].comment == "y" * 4_000


def test_submitted_is_said_where_the_clinician_is(live_server, page, world, size):
    _open(page, live_server, world, size)
    for i, card in enumerate(_cards(page).all()):
        card.get_by_label(re.compile("^Rank of Response")).select_option(str(i + 1))
        card.get_by_role("button", name="Correct", exact=True).click()
    page.locator("#submit-review").click()
    done = page.locator("[data-testid=submitted]")
    expect(done).to_contain_text("Submitted. Thank you.")
    expect(done).to_be_in_viewport()
    expect(page.locator("#next-review")).to_be_focused()


def test_the_save_time_uses_the_24_hour_clock(browser, live_server, world):
    context = browser.new_context(locale="en-US", timezone_id="America/Los_Angeles")
    page = context.new_page()
    _open(page, live_server, world)
    _cards(page).nth(0).get_by_role("button", name="Correct", exact=True).click()
    _wait_saved(page)
    text = page.locator("#save-status").inner_text()
    assert re.fullmatch(r"All changes saved at \d\d:\d\d\.", text), text
    context.close()


def test_a_second_tab_hears_about_edits_at_once(browser, live_server, world):
    context = browser.new_context()
    tab_a, tab_b = context.new_page(), context.new_page()
    _open(tab_a, live_server, world)
    _open(tab_b, live_server, world)
    _cards(tab_a).nth(1).get_by_label("Rank of Response B").select_option("2")
    _comment(_cards(tab_a).nth(1), "Seen in the other tab.")
    _wait_saved(tab_a)
    # No reload, no focus change: the other tab takes the saved values from this one.
    expect(_cards(tab_b).nth(1).get_by_label("Rank of Response B")).to_have_value(
        "2", timeout=5_000
    )
    expect(_cards(tab_b).nth(1).locator("textarea")).to_have_value("Seen in the other tab.")
    assert _summary(tab_b) == ["2:B"]
    context.close()


def test_a_revoked_clinician_is_told_why_and_the_page_stops_retrying(
    live_server, page, world, size
):
    instruction, clinician = world
    _open(page, live_server, world, size)
    AccessApplication.objects.filter(user=clinician).update(status=AccessApplication.Status.REVOKED)
    clear_cached_access(clinician)
    saves: list[str] = []
    page.on("request", lambda r: saves.append(r.url) if r.url.endswith("/draft/") else None)
    _cards(page).nth(0).get_by_role("button", name="Correct", exact=True).click()
    notice = page.locator("[data-testid=notice]")
    expect(notice).to_contain_text("An admin revoked your access to the records.")
    expect(notice).to_have_attribute("data-requirement", "approval")
    expect(page.locator("#save-status")).to_have_attribute("data-state", "blocked")
    expect(page.locator("#save-status")).to_contain_text("approval needed, 1 change kept")
    page.wait_for_timeout(3_500)  # the old page retried after 1, 2 and 4 s
    assert len(saves) == 1
    expect(notice.get_by_role("button", name="Open your access page")).to_be_visible()
    expect(notice.get_by_role("button", name="Try again")).to_be_visible()
    assert _values(instruction)["A"].is_correct is None


# --- the README's screenshots -------------------------------------------------------------------
@pytest.mark.skipif(not os.environ.get("DOCS_SCREENSHOTS"), reason="set DOCS_SCREENSHOTS=docs")
def test_docs_screenshots(browser, live_server):
    """The review page and its excerpt on the demo data, at desktop and phone sizes, for the
    README (``DOCS_SCREENSHOTS=docs pytest -k docs_screenshots``); PNGs cut to 256 colours."""
    from django.core.management import call_command
    from PIL import Image

    from review.models import Instruction

    _seed_tags()
    call_command("load_demo", "--small", "--no-progress")
    instruction = Instruction.objects.filter(question__startswith="List the patient's current")[0]
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    folder = Path(os.environ["DOCS_SCREENSHOTS"])
    shots = {
        "review-page.png": (SIZES["desktop"], None),
        "review-page-phone.png": (SIZES["phone"], None),
        "review-excerpt.png": ({"width": 1440, "height": 2000}, ".record-panel"),
        "review-excerpt-phone.png": ({"width": 390, "height": 1700}, ".record-panel"),
    }
    for name, (size, element) in shots.items():
        context = browser.new_context(viewport=size, locale="en-GB")
        page = context.new_page()
        _open(page, live_server, (instruction, clinician))
        cards = _cards(page)
        if name == "review-page.png":
            for i, rank in enumerate((2, 1, 1, 4)):
                cards.nth(i).get_by_label(re.compile("^Rank of Response")).select_option(str(rank))
                cards.nth(i).get_by_role(
                    "button", name="Correct" if i != 3 else "Incorrect", exact=True
                ).click()
            _wait_saved(page)
            page.locator("body").click(position={"x": 5, "y": 5})
        expect(page.locator("[data-testid=latest-notes] article").first).to_be_visible()
        path = folder / name
        if name == "review-excerpt-phone.png":  # the panel scrolls: show the values and below
            page.locator("[data-testid=latest-values]").scroll_into_view_if_needed()
        if element:
            page.locator(element).screenshot(path=str(path))
        else:
            page.screenshot(path=str(path))
        Image.open(path).quantize(256).save(path, optimize=True)
        context.close()
