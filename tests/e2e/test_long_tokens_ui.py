"""One long unbroken token in model output or the record never widens a page.

An outside test put ~100 kB responses made of 10,000-digit runs on a review page: the page
became ~102,000 px wide at desktop and phone sizes and the text ran out of its card. Text that
came from a model or a record wraps anywhere inside its box; nothing scrolls sideways.
"""

import pytest
from django.urls import reverse

from review.models import Event, ModelResponse, Role
from tests import factories
from tests.e2e.test_review_ui import _cards, _open, _sign_in
from tests.review import review_data
from tests.scoring.rubric_data import assigned_grading

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DIGITS = "1234567890" * 1000  # one 10,000-character "word"
LONG_RESPONSE = " ".join(["Result:", DIGITS] * 10)  # ~100 kB
SHOTS = "/tmp/small2-shots"
SIZES = {"desktop": (1280, 800), "phone": (390, 844)}


@pytest.fixture
def long_world(db):
    factories.active_dua()
    dataset = review_data.make_dataset("e2e-long")
    patient = review_data.make_record(dataset, "P-LONG", n_events=30)
    instruction = review_data.make_instruction(
        dataset, patient, "I-LONG", question="Explain " + DIGITS[:3000], n_responses=3
    )
    ModelResponse.objects.filter(instruction=instruction).update(text=LONG_RESPONSE)
    Event.objects.filter(patient=patient).update(text="Note " + DIGITS[:4000])
    clinician = factories.make_user("long@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    return instruction, clinician


def _widths(page) -> dict:
    return page.evaluate(
        """() => ({
            scroll: document.documentElement.scrollWidth,
            viewport: window.innerWidth,
            spilled: [...document.querySelectorAll(
                '.response-text, .compare-text, .note-text, .instruction, .tl-event, .excerpt'
            )].filter(el => el.offsetParent && el.scrollWidth > el.clientWidth + 1)
             .map(el => el.className),
        })"""
    )


@pytest.mark.parametrize("size", SIZES, ids=list(SIZES))
def test_a_review_page_with_long_tokens_fits_the_screen(live_server, page, long_world, size):
    instruction, clinician = long_world
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    _sign_in(page.context, live_server, clinician)
    _open(page, live_server, instruction)
    page.get_by_role("tab", name="Full record").click()
    page.wait_for_selector(".tl-event")
    page.screenshot(path=f"{SHOTS}/review-long-{size}.png")
    widths = _widths(page)
    assert widths["scroll"] <= widths["viewport"], widths
    assert widths["spilled"] == [], widths
    # The compare dialog shows two responses side by side (one above the other on a phone).
    _cards(page).nth(0).locator("[data-compare]").click()
    page.wait_for_selector("#compare-dialog[open]")
    page.screenshot(path=f"{SHOTS}/compare-long-{size}.png")
    widths = _widths(page)
    assert widths["scroll"] <= widths["viewport"], widths
    assert widths["spilled"] == [], widths


def test_the_queue_on_a_phone_fits_a_long_instruction(live_server, page, long_world):
    _, clinician = long_world
    page.set_viewport_size({"width": 390, "height": 844})
    _sign_in(page.context, live_server, clinician)
    page.goto(live_server.url + reverse("clinician_queue"))
    page.screenshot(path=f"{SHOTS}/queue-long-phone.png")
    widths = _widths(page)
    assert widths["scroll"] <= widths["viewport"], widths


@pytest.mark.parametrize("size", SIZES, ids=list(SIZES))
def test_the_grading_page_fits_long_tokens(live_server, page, long_world, size):
    instruction, _ = long_world
    grader, grading = assigned_grading(instruction, "grader-long@example.edu")
    page.context.add_cookies([factories.session_cookie(grader, live_server.url)])
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    page.goto(live_server.url + reverse("grading_page", args=[grading.pk]))
    page.wait_for_selector("#grading-form[data-ready=true]")
    page.screenshot(path=f"{SHOTS}/grading-long-{size}.png")
    widths = _widths(page)
    assert widths["scroll"] <= widths["viewport"], widths
    assert widths["spilled"] == [], widths
