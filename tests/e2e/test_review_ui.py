"""The review page in a real browser: ranking where you read (keys, the rank picker, dragging
the summary), marking, autosave, and every way a clinician's edit could be lost — reloads (the
race, ten times), two tabs, signing out in another tab, session expiry, the server failing, the
network dropping — each ending with the database holding every edit and the page the truth.

Uses the browser fixtures of tests/e2e/conftest.py (Debian's Chromium; skipped without it).
The browser is signed in by copying a ``force_login`` session cookie.
"""

import re
import time

import pytest
from django.contrib.sessions.models import Session
from django.middleware.csrf import _get_new_csrf_string
from django.urls import reverse
from playwright.sync_api import expect

from review.models import AuditEvent, ErrorTag, Review, Role
from review.selectors.drafts import review_values
from tests import factories
from tests.review import review_data

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _seed_tags() -> None:
    # Transactional tests flush the database, data migrations included: re-seed the tags.
    from importlib import import_module

    seed = import_module("review.migrations.0002_seed_error_tags")
    for order, (slug, label, description) in enumerate(seed.DEFAULT_TAGS, start=1):
        ErrorTag.objects.get_or_create(
            slug=slug, defaults={"label": label, "description": description, "order": order}
        )


def _sign_in(context, live_server, user) -> None:
    context.add_cookies([factories.session_cookie(user, live_server.url)])


def _cards(page):
    return page.locator("[data-testid=response]")


def _summary(page) -> list[str]:
    """The ranking summary as "rank:labels" groups, e.g. ["1:AB", "3:C"]."""
    return [
        li.locator(".rank-badge").inner_text()
        + ":"
        + "".join(li.locator("strong").all_inner_texts())
        for li in page.locator("#rank-order .rank-group").all()
    ]


def _comment(card, text: str) -> None:
    box = card.locator(".comment-box")
    if not box.evaluate("d => d.open"):
        box.locator("summary").click()
    card.locator("textarea").fill(text)


def _values(instruction) -> dict:
    review = Review.objects.get(assignment__instruction=instruction)
    values, reason, note = review_values(review)
    labels = "ABCDEFGH"
    return {labels[i]: values[h] for i, h in enumerate(review.handles)}


def _wait_saved(page, timeout=15_000) -> None:
    page.wait_for_selector("#save-status[data-state=saved]", timeout=timeout)


@pytest.fixture
def review_world(db):
    _seed_tags()
    factories.active_dua()
    dataset = review_data.make_dataset("e2e")
    patient = review_data.make_record(dataset, "P-E2E", n_events=300)
    instruction = review_data.make_instruction(dataset, patient, "I-E2E")
    unassigned = review_data.make_instruction(dataset, patient, "I-E2E-OTHER")
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    return instruction, unassigned, clinician


@pytest.fixture
def clinician_context(browser, live_server, review_world):
    """A browser context (its tabs share the session) signed in as the world's clinician."""
    context = browser.new_context()
    _sign_in(context, live_server, review_world[2])
    yield context


def _open(page, live_server, instruction):
    url = live_server.url + reverse("clinician_review", args=[instruction.pk])
    page.goto(url)
    page.wait_for_selector("body[data-review-ready]")
    return url


def test_rank_mark_autosave_reload_search_and_submit_once(live_server, page, review_world):
    instruction, unassigned, clinician = review_world
    _sign_in(page.context, live_server, clinician)
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    url = _open(page, live_server, instruction)
    expect(page.locator("#rank-unranked")).to_have_text("Not ranked yet: A, B, C, D.")

    # Rank where you read: the picker on the card, and single keys on a focused card.
    _cards(page).nth(1).get_by_label("Rank of Response B").select_option("1")
    _cards(page).nth(0).focus()
    page.keyboard.press("2")
    assert page.evaluate("document.activeElement.dataset.handle") is not None  # focus stayed
    page.keyboard.press("j")
    page.keyboard.press("=")  # B ties with the card above: A's rank
    expect(page.locator("#announcer")).to_contain_text("tied")
    assert _summary(page) == ["2:AB"]
    # Drag the summary: a group dragged before another takes rank 1.
    _cards(page).nth(2).focus()
    page.keyboard.press("3")
    _cards(page).nth(3).focus()
    page.keyboard.press("4")
    assert _summary(page) == ["2:AB", "3:C", "4:D"]
    groups = page.locator("#rank-order .rank-group")
    _drag(page, groups.nth(2), groups.nth(0))
    assert _summary(page) == ["1:D", "2:AB", "3:C"]

    # Mark every response; tag one; comment.
    for card in _cards(page).all():
        card.get_by_role("button", name="Correct", exact=True).click()
    third = _cards(page).nth(2)
    third.get_by_role("button", name="Incorrect").click()
    third.locator("summary", has_text="Error tags").click()
    third.get_by_label("Omission").check()
    _comment(third, "Leaves out the trend.")
    _wait_saved(page)

    # Reload: everything is there, from the server.
    page.reload()
    page.wait_for_selector("body[data-review-ready]")
    assert _summary(page) == ["1:D", "2:AB", "3:C"]
    third = _cards(page).nth(2)
    expect(third.get_by_role("button", name="Incorrect")).to_have_attribute("aria-pressed", "true")
    assert third.get_by_label("Omission").is_checked()
    assert third.locator("textarea").input_value() == "Leaves out the trend."

    # Offline: the page says so, keeps the edit, and saves once back online.
    page.context.set_offline(True)
    third.locator("textarea").fill("Leaves out the trend (offline edit).")
    page.wait_for_selector("#save-status[data-state=offline]")
    assert "offline" in page.locator("#save-status").inner_text().lower()
    expect(page.locator("[data-testid=notice]")).to_be_visible()
    page.context.set_offline(False)
    _wait_saved(page)
    assert _values(instruction)["C"].comment == "Leaves out the trend (offline edit)."

    # Search the record (a POST: no terms in URLs) and open a note, which replaces its preview.
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.get_by_role("tab", name="Full record").click()
    page.wait_for_selector("#record-list .tl-event")
    page.fill("#record-q", "pericardial")
    page.press("#record-q", "Enter")
    page.wait_for_selector("#record-list mark")
    assert not [u for u in requests if "pericardial" in u]
    assert page.locator("#record-list .tl-event").count() == 1
    page.locator("#record-list .note-expand").first.click()
    page.wait_for_selector("#record-list .note-full:not([hidden]) .note-text")
    assert "Echocardiogram" in page.locator("#record-list .note-full").first.inner_text()
    assert page.locator("#record-list .note-preview").first.is_hidden()

    # Double submit: a double click and a second tab's request make one review.
    page.locator("#submit-review").dblclick()
    second_tab = page.context.new_page()
    second_tab.goto(url)
    page.wait_for_selector("#save-status[data-state=submitted]")
    assert page.locator("#submit-review").is_disabled()
    reviews = Review.objects.filter(assignment__instruction=instruction)
    assert reviews.count() == 1 and reviews.get().status == Review.Status.SUBMITTED
    assert AuditEvent.objects.filter(action=AuditEvent.Action.REVIEW_SUBMITTED).count() == 1
    second_tab.reload()
    assert second_tab.locator("[data-testid=read-only]").is_visible()
    ranks = sorted(reviews.get().judgements.values_list("rank", flat=True))
    assert ranks == [1, 2, 2, 3]

    # Work not assigned to this clinician is a 404.
    response = page.goto(live_server.url + reverse("clinician_review", args=[unassigned.pk]))
    assert response.status == 404
    # No Content-Security-Policy violations (no inline script or style anywhere).
    assert not [e for e in console_errors if re.search("Content Security Policy", e)]
    for name in review_data.MODEL_NAMES:
        assert name not in page.content()


def _drag(page, source, target) -> None:
    # SortableJS runs in fallback (mouse-event) mode: move the mouse in steps like a person.
    box = source.bounding_box()
    to = target.bounding_box()
    page.mouse.move(box["x"] + 8, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + 4, box["y"] + box["height"] / 2 + 2, steps=3)
    page.mouse.move(to["x"] + 4, to["y"] + to["height"] / 2, steps=12)
    page.mouse.move(to["x"] + 2, to["y"] + to["height"] / 2, steps=2)
    page.mouse.up()
    page.wait_for_timeout(250)  # let SortableJS finish its drop animation


def test_edits_survive_reloads_made_mid_save_ten_times(live_server, page, review_world):
    # The reload race: an edit, then a reload before its save is answered. The old page's save
    # can reach the server after the new page was served; nothing may be refused or lost.
    instruction, _, clinician = review_world
    _sign_in(page.context, live_server, clinician)
    _open(page, live_server, instruction)
    expected: dict[str, str] = {}
    for i in range(10):
        card = _cards(page).nth(i % 4)
        label = "ABCD"[i % 4]
        _comment(card, f"edit {i}")
        expected[label] = f"edit {i}"
        if i % 2:
            card.focus()
            page.keyboard.press(str(1 + i % 4))
        page.reload()  # at once: the edit is still pending
        page.wait_for_selector("body[data-review-ready]")
        # The new page shows the edit straight away (kept in this tab until acknowledged).
        assert _cards(page).nth(i % 4).locator("textarea").input_value() == f"edit {i}"
    _wait_saved(page)
    saved = _values(instruction)
    assert {label: saved[label].comment for label in expected} == expected
    # And the next edit after all that is taken, not refused as a conflict.
    _cards(page).nth(0).get_by_role("button", name="Correct", exact=True).click()
    _wait_saved(page)
    assert _values(instruction)["A"].is_correct is True
    page.reload()
    page.wait_for_selector("body[data-review-ready]")
    expect(_cards(page).nth(0).get_by_role("button", name="Correct", exact=True)).to_have_attribute(
        "aria-pressed", "true"
    )


def test_two_tabs_editing_the_same_review_merge(live_server, clinician_context, review_world):
    instruction, _, clinician = review_world
    context = clinician_context
    tab_a, tab_b = context.new_page(), context.new_page()
    _open(tab_a, live_server, instruction)
    _open(tab_b, live_server, instruction)
    _cards(tab_a).nth(0).get_by_label("Rank of Response A").select_option("1")
    _cards(tab_b).nth(0).get_by_role("button", name="Incorrect").click()
    _cards(tab_b).nth(1).get_by_label("Rank of Response B").select_option("2")
    _wait_saved(tab_a)
    _wait_saved(tab_b)
    saved = _values(instruction)
    assert (saved["A"].rank, saved["A"].is_correct, saved["B"].rank) == (1, False, 2)
    # Each tab catches up with the other's edits (on focus, or within 20 s).
    tab_a.bring_to_front()
    tab_a.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    expect(_cards(tab_a).nth(0).get_by_role("button", name="Incorrect")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(_cards(tab_a).nth(1).get_by_label("Rank of Response B")).to_have_value("2")
    # The same field from both: the later edit wins.
    _cards(tab_a).nth(2).get_by_label("Rank of Response C").select_option("3")
    _wait_saved(tab_a)
    _cards(tab_b).nth(2).get_by_label("Rank of Response C").select_option("4")
    _wait_saved(tab_b)
    assert _values(instruction)["C"].rank == 4


def test_signing_out_in_another_tab_then_in_again_loses_nothing(
    live_server, clinician_context, review_world
):
    instruction, _, clinician = review_world
    context = clinician_context
    tab_a, tab_b = context.new_page(), context.new_page()
    _open(tab_a, live_server, instruction)
    tab_b.goto(live_server.url + reverse("clinician_queue"))
    tab_b.get_by_role("button", name="Sign out").click()
    tab_b.wait_for_load_state()

    card = _cards(tab_a).nth(0)
    _comment(card, "written while signed out")
    tab_a.wait_for_selector("#save-status[data-state=signed-out]")
    expect(tab_a.locator("[data-testid=signin-dialog]")).to_be_visible()
    expect(tab_a.locator("[data-testid=notice]")).to_contain_text("session has ended")
    # The record panel says so too, instead of drawing the sign-in page into it.
    tab_a.locator("#signin-dialog").evaluate("d => d.close()")
    tab_a.get_by_role("tab", name="Full record").click()
    expect(tab_a.locator("#record-summary")).to_contain_text("Sign in again")
    assert "NaN" not in tab_a.locator("#panel-full").inner_text()

    # Signing in again rotates the session and the CSRF token, as a real sign-in does.
    _sign_in(context, live_server, clinician)
    context.add_cookies(
        [{"name": "csrftoken", "value": _get_new_csrf_string(), "url": live_server.url}]
    )
    tab_b.goto(live_server.url + reverse("session_resumed"))  # tells tab A (BroadcastChannel)
    _wait_saved(tab_a)
    assert _values(instruction)["A"].comment == "written while signed out"


def test_an_expired_session_offers_sign_in_and_then_saves(live_server, page, review_world):
    instruction, _, clinician = review_world
    _sign_in(page.context, live_server, clinician)
    _open(page, live_server, instruction)
    # The session ends on the server (idle timeout, an admin's revocation): gone from the
    # shared cache and the database alike.
    from importlib import import_module

    from django.conf import settings

    store = import_module(settings.SESSION_ENGINE).SessionStore
    for key in Session.objects.values_list("session_key", flat=True):
        store(session_key=key).delete()
    _cards(page).nth(3).get_by_label("Rank of Response D").select_option("1")
    expect(page.locator("[data-testid=signin-dialog]")).to_be_visible()
    assert "not saved yet" in page.locator("#save-status").inner_text()
    # Signed in again elsewhere (the dialog's window): "I have signed in" sends the edits.
    _sign_in(page.context, live_server, clinician)
    page.get_by_role("button", name="I have signed in: save now").click()
    _wait_saved(page)
    assert _values(instruction)["D"].rank == 1


def test_a_failing_server_keeps_edits_and_saves_when_it_is_back(live_server, page, review_world):
    instruction, _, clinician = review_world
    _sign_in(page.context, live_server, clinician)
    _open(page, live_server, instruction)
    message = "The database is unavailable for a moment; nothing was saved by this request."

    def unavailable(route):
        route.fulfill(
            status=503,
            content_type="application/json",
            body='{"error": "unavailable", "message": "' + message + '"}',
        )

    page.route("**/draft/", unavailable)
    _cards(page).nth(1).get_by_role("button", name="Incorrect").click()
    page.wait_for_selector("#save-status[data-state=offline]")
    assert "database is unavailable" in page.locator("#save-status").inner_text()
    assert page.locator("#save-status").inner_text().startswith("Not saved yet: 1 change")
    page.unroute("**/draft/")
    _wait_saved(page)
    assert _values(instruction)["B"].is_correct is False


def test_a_review_submitted_in_another_tab_explains_what_happened_to_edits(
    live_server, clinician_context, review_world
):
    instruction, _, clinician = review_world
    context = clinician_context
    tab_a, tab_b = context.new_page(), context.new_page()
    _open(tab_a, live_server, instruction)
    _open(tab_b, live_server, instruction)
    # Tab A's comment is on its way (held in the network) when tab B submits. (Without an edit
    # in flight, tab A hears about the submit from tab B at once and turns read-only.)
    held = []
    tab_a.route("**/draft/", lambda route: held.append(route))
    _comment(_cards(tab_a).nth(0), "too late")
    tab_a.wait_for_function(
        "() => document.querySelector('#save-status').dataset.state === 'saving'"
    )
    for i, card in enumerate(_cards(tab_b).all()):
        card.focus()
        tab_b.keyboard.press(str(i + 1))
        tab_b.keyboard.press("c")
    tab_b.locator("#submit-review").click()
    tab_b.wait_for_selector("#save-status[data-state=submitted]")
    for route in held:
        route.continue_()
    tab_a.unroute("**/draft/")
    expect(tab_a.locator("[data-testid=notice]")).to_contain_text("were not applied")
    expect(tab_a.locator("[data-testid=notice]")).to_contain_text("Response A comment")
    assert tab_a.locator("#submit-review").is_disabled()
    assert _values(instruction)["A"].comment == ""


def test_a_whole_review_by_keyboard_alone(live_server, page, review_world):
    instruction, _, clinician = review_world
    _sign_in(page.context, live_server, clinician)
    _open(page, live_server, instruction)
    presses = 0

    def press(key: str) -> None:
        nonlocal presses
        presses += 1
        page.keyboard.press(key)

    page.locator("body").focus()
    press("Tab")  # the first Tab stop is the first response
    assert page.evaluate("document.activeElement.dataset.handle") is not None
    # A: rank 1, correct. B: tie with A, correct. C: rank 3, incorrect, a tag and a comment.
    # D: rank 4, correct.
    for key in ("1", "c", "j", "=", "c", "j", "3", "x", "e", "Space", "Escape", "m"):
        press(key)
    page.keyboard.type("Wrong dose.")  # typing is not counted as navigation
    for key in ("Escape", "j", "4", "c", "Shift+S", "Enter"):
        press(key)
    page.wait_for_selector("#save-status[data-state=submitted]")
    review = Review.objects.get(assignment__instruction=instruction)
    assert review.status == Review.Status.SUBMITTED
    saved = _values(instruction)
    assert [saved[x].rank for x in "ABCD"] == [1, 1, 3, 4]
    assert [saved[x].is_correct for x in "ABCD"] == [True, True, False, True]
    assert saved["C"].tags and saved["C"].comment == "Wrong dose."
    # 19 keys for four responses (1 to reach the first, 18 for the rest): about 4 per response.
    assert presses == 19


def _six_response_instruction(clinician):
    dataset = review_data.make_dataset("six")
    patient = review_data.make_record(dataset, "P-SIX", n_events=30)
    instruction = review_data.make_instruction(dataset, patient, "I-SIX", n_responses=6)
    review_data.assign(instruction, clinician)
    return instruction


def _focused(page) -> str | None:
    """The label of the response that has focus ("A"…), or None when focus is elsewhere."""
    return page.evaluate(
        "() => { const c = document.activeElement;"
        " return c && c.matches('[data-testid=response]')"
        " ? c.querySelector('h3').textContent.replace('Response ', '') : null; }"
    )


def test_a_six_response_review_by_keyboard_takes_at_most_twenty_keys(
    live_server, page, review_world
):
    _, _, clinician = review_world
    instruction = _six_response_instruction(clinician)
    _sign_in(page.context, live_server, clinician)
    _open(page, live_server, instruction)
    presses = 0

    def press(key: str) -> None:
        nonlocal presses
        presses += 1
        page.keyboard.press(key)

    page.locator("body").focus()
    press("Tab")
    assert _focused(page) == "A"
    # Each response: its rank and its verdict, then J to the next; Shift+S and Enter submit.
    for i in range(6):
        press(str(i + 1))
        press("c" if i % 2 == 0 else "x")
        if i < 5:
            press("j")
    press("Shift+S")
    press("Enter")
    page.wait_for_selector("#save-status[data-state=submitted]")
    review = Review.objects.get(assignment__instruction=instruction)
    assert review.status == Review.Status.SUBMITTED
    saved = _values(instruction)
    assert [saved[x].rank for x in "ABCDEF"] == [1, 2, 3, 4, 5, 6]
    assert [saved[x].is_correct for x in "ABCDEF"] == [True, False] * 3
    assert presses <= 20
    assert presses == 20  # 1 to reach A, 12 for ranks and verdicts, 5 moves, 2 to submit


def test_after_a_reload_focus_returns_to_the_response_last_edited(live_server, page, review_world):
    _, _, clinician = review_world
    instruction = _six_response_instruction(clinician)
    _sign_in(page.context, live_server, clinician)
    _open(page, live_server, instruction)
    page.locator("body").focus()
    page.keyboard.press("Tab")
    for key in ("1", "c", "j", "2", "j", "j", "4"):  # A, B and D edited; D last
        page.keyboard.press(key)
    _wait_saved(page)
    page.reload()
    page.wait_for_selector("body[data-review-ready]")
    assert _focused(page) == "D"  # no key pressed
    page.keyboard.press("x")
    expect(_cards(page).nth(3).get_by_role("button", name="Incorrect")).to_have_attribute(
        "aria-pressed", "true"
    )
    _wait_saved(page)
    assert _values(instruction)["D"].is_correct is False
    # A fresh tab has no "last edited" of its own: its first Tab goes to the first response
    # still missing a rank or a verdict (B has no verdict).
    other = page.context.new_page()
    _open(other, live_server, instruction)
    other.locator("body").focus()
    other.keyboard.press("Tab")
    assert _focused(other) == "B"


def test_keys_outside_a_response_say_where_they_work(live_server, page, review_world):
    instruction, _, clinician = review_world
    _sign_in(page.context, live_server, clinician)
    _open(page, live_server, instruction)
    # "Skip to content" lands on the page's main region, outside every response.
    page.locator("body").focus()
    page.locator(".skip-link", has_text="Skip to content").focus()
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    page.keyboard.press("1")
    hint = page.locator("[data-testid=key-hint]")
    expect(hint).to_be_visible()
    expect(hint).to_contain_text("J")
    expect(hint).to_contain_text("Response A")
    assert _values(instruction)["A"].rank is None
    assert page.locator("#rank-order .rank-group").count() == 0
    page.keyboard.press("j")  # J goes to a response from anywhere
    assert _focused(page) == "A"
    expect(hint).to_be_hidden()
    # From a button inside a card, the card's keys act on that card.
    _cards(page).nth(1).get_by_role("button", name="Compare…").focus()
    page.keyboard.press("3")
    assert _summary(page) == ["3:B"]
    # The rank is saved before the test ends: a save still in flight when the test's database
    # is flushed deadlocked with the flush's TRUNCATE.
    _wait_saved(page)
    assert _values(instruction)["B"].rank == 3


def test_closing_the_tab_right_after_an_edit_keeps_it(live_server, clinician_context, review_world):
    instruction, _, clinician = review_world
    context = clinician_context
    page = context.new_page()
    _open(page, live_server, instruction)
    _comment(_cards(page).nth(1), "closed at once")
    page.close(run_before_unload=True)  # before the debounced save: the page sends on pagehide
    # The save travels with the closing tab (keepalive): it lands without any page open.
    deadline = time.monotonic() + 15
    while _values(instruction)["B"].comment != "closed at once" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _values(instruction)["B"].comment == "closed at once"
    reopened = context.new_page()
    _open(reopened, live_server, instruction)
    expect(_cards(reopened).nth(1).locator("textarea")).to_have_value("closed at once")


def test_compare_opens_two_responses_side_by_side_in_one_click(live_server, page, review_world):
    instruction, _, clinician = review_world
    _sign_in(page.context, live_server, clinician)
    _open(page, live_server, instruction)
    _cards(page).nth(2).get_by_role("button", name="Compare…").click()
    dialog = page.locator("#compare-dialog")
    expect(dialog).to_be_visible()
    assert dialog.locator("#compare-L").input_value() == _cards(page).nth(2).get_attribute(
        "data-handle"
    )
    left = dialog.locator("#compare-text-L").inner_text()
    right = dialog.locator("#compare-text-R").inner_text()
    assert left == _cards(page).nth(2).locator(".response-text").inner_text()
    assert right == _cards(page).nth(3).locator(".response-text").inner_text()
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
