"""The review page in a real browser: rank by keyboard and by drag-and-drop, tie, autosave and
reload, offline status, record search and notes, double submit, 404 for unassigned work.

Uses the browser fixtures of tests/e2e/conftest.py (Debian's Chromium; skipped without it).
The browser is signed in by copying a ``force_login`` session cookie, which skips TOTP.
"""

import re

import pytest
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from review.models import AuditEvent, ErrorTag, Review, Role
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


def _sign_in(page, live_server, user) -> None:
    client = Client()
    client.force_login(user)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )


def _ranked_labels(page) -> list[str]:
    return page.locator("#ranked .rank-name").all_inner_texts()


def _badges(page) -> list[str]:
    return page.locator("#ranked .rank-badge").all_inner_texts()


def _drag(page, source, target) -> None:
    # SortableJS runs in fallback (mouse-event) mode: move the mouse in steps like a person.
    box = source.bounding_box()
    to = target.bounding_box()
    page.mouse.move(box["x"] + 20, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + 30, box["y"] + box["height"] / 2 + 5, steps=3)
    page.mouse.move(to["x"] + 40, to["y"] + to["height"] - 6, steps=12)
    page.mouse.move(to["x"] + 42, to["y"] + to["height"] - 4, steps=2)
    page.mouse.up()
    page.wait_for_timeout(250)  # let SortableJS finish its drop animation


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


def test_rank_autosave_reload_search_and_submit_once(live_server, page, review_world):
    instruction, unassigned, clinician = review_world
    _sign_in(page, live_server, clinician)
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    url = live_server.url + reverse("clinician_review", args=[instruction.pk])
    page.goto(url)
    page.wait_for_selector("[data-testid=excerpt]")
    assert page.locator("#unranked .rank-item").count() == 4

    # Keyboard only: Enter ranks the focused response, Alt+Up moves it, T ties it.
    page.locator("#unranked .rank-item").first.focus()
    page.keyboard.press("Enter")
    page.locator("#unranked .rank-item").first.focus()
    page.keyboard.press("Enter")
    first_two = _ranked_labels(page)
    assert first_two == ["Response A", "Response B"]
    assert page.evaluate("document.activeElement.dataset.id") is not None
    page.locator("#ranked .rank-item").nth(1).focus()
    page.keyboard.press("Alt+ArrowUp")
    assert _ranked_labels(page) == ["Response B", "Response A"]
    expect(page.locator("#rank-announcer")).to_contain_text("is at rank 1")
    page.locator("#ranked .rank-item").nth(1).focus()
    page.keyboard.press("t")
    assert _badges(page) == ["1", "1"]  # a tie shows as a shared rank
    expect(page.locator("#rank-announcer")).to_contain_text("tied with Response B")

    # Drag-and-drop the other two into the ranking.
    for _ in range(2):
        _drag(page, page.locator("#unranked .rank-item").first, page.locator("#ranked"))
    assert page.locator("#unranked .rank-item").count() == 0
    assert _badges(page) == ["1", "1", "3", "4"]
    assert sorted(_ranked_labels(page)[2:]) == ["Response C", "Response D"]

    # Mark every response; tag one; comment.
    for response in page.locator("[data-testid=response]").all():
        response.get_by_label("Correct", exact=True).check()
    page.locator("[data-testid=response]").nth(2).get_by_label("Incorrect").check()
    page.locator("[data-testid=response]").nth(2).get_by_label("Omission").check()
    page.locator("#comment-" + str(_ids(instruction)[2])).fill("Leaves out the trend.")
    page.wait_for_selector("#save-status[data-state=saved]")

    # Reload mid-way: the draft is all there.
    page.reload()
    page.wait_for_selector("[data-testid=excerpt]")
    assert _badges(page) == ["1", "1", "3", "4"]
    # Tied responses share rank 1; within a tie they come back in the order shown.
    assert _ranked_labels(page)[:2] == ["Response A", "Response B"]
    third = page.locator("[data-testid=response]").nth(2)
    assert third.get_by_label("Incorrect").is_checked()
    assert third.get_by_label("Omission").is_checked()
    assert "Leaves out the trend." in third.locator("textarea").input_value()

    # Offline: the page says so and retries; back online it saves.
    page.context.set_offline(True)
    third.locator("textarea").fill("Leaves out the trend (offline edit).")
    page.wait_for_selector("#save-status[data-state=offline]")
    assert "Offline" in page.locator("#save-status").inner_text()
    page.context.set_offline(False)
    page.wait_for_selector("#save-status[data-state=saved]", timeout=15_000)

    # Search the record and open a note.
    page.get_by_role("tab", name="Full record").click()
    page.wait_for_selector("#record-list .tl-event")
    page.fill("#record-q", "pericardial")
    page.press("#record-q", "Enter")
    page.wait_for_selector("#record-list mark")
    assert page.locator("#record-list .tl-event").count() == 1
    assert "pericardial" in page.locator("#record-list mark").first.inner_text().lower()
    page.locator("#record-list .note-expand").first.click()
    page.wait_for_selector("#record-list .note-full:not([hidden]) .note-text")
    assert "Echocardiogram" in page.locator("#record-list .note-full").first.inner_text()

    # Double submit: a double click and a second tab's request make one review.
    page.locator("#submit-review").dblclick()
    second_tab = page.context.new_page()
    second_tab.goto(url)
    page.wait_for_selector("#save-status[data-state=submitted]")
    assert page.locator("#submit-review").is_disabled()
    assert page.locator("#comment-" + str(_ids(instruction)[0])).is_disabled()
    reviews = Review.objects.filter(assignment__instruction=instruction)
    assert reviews.count() == 1 and reviews.get().status == Review.Status.SUBMITTED
    assert AuditEvent.objects.filter(action=AuditEvent.Action.REVIEW_SUBMITTED).count() == 1
    second_tab.reload()
    assert second_tab.locator("[data-testid=read-only]").is_visible()
    ranks = dict(reviews.get().judgements.values_list("response_id", "rank"))
    assert sorted(ranks.values()) == [1, 1, 3, 4]

    # Work not assigned to this clinician is a 404.
    response = page.goto(live_server.url + reverse("clinician_review", args=[unassigned.pk]))
    assert response.status == 404
    # No Content-Security-Policy violations (no inline script or style anywhere).
    assert not [e for e in console_errors if re.search("Content Security Policy", e)]
    for name in review_data.MODEL_NAMES:
        assert name not in page.content()


def _ids(instruction) -> list[int]:
    review = Review.objects.get(assignment__instruction=instruction)
    return [int(x) for x in review.shown_order]
