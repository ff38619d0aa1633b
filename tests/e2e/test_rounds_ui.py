"""A small study of two rounds in Chromium: 10 patients, 3 clinicians and an account holding two
roles. The clinician's queue names rounds by number only; the assign page lists the chosen
dataset's rounds and leaves out who ranked a copied round's responses before; the progress page
names and filters rounds; the admin+clinician account is warned. At 1440x900 and 390x844, with
axe (``A11Y_SCREENSHOTS=DIR`` keeps the screenshots)."""

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from review.models import Assignment, Dataset, ModelResponse, Review, Role
from review.services import studies as study_services
from review.services.assignments import assignments_create
from tests import factories
from tests.e2e.test_accessibility import DESKTOP, PHONE, _watch_csp, assert_no_axe_violations
from tests.review import review_data

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROUND_NAME = "Round 2: adds Atlas-70B (OpenAI fine-tune)"


def _sign_in(page, live_server, user) -> None:
    page.context.clear_cookies()
    page.context.add_cookies([factories.session_cookie(user, live_server.url)])


@pytest.fixture
def small_study():
    factories.active_dua()
    dataset = review_data.make_dataset("small")
    instructions = []
    for p in range(10):
        patient = review_data.make_record(dataset, f"P-SMALL-{p}", n_events=20)
        instructions.append(review_data.make_instruction(dataset, patient, f"S-{p}", n_responses=3))
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN], full_name="Ada Admin")
    both = factories.make_user(
        "both@example.edu", roles=[Role.ADMIN, Role.CLINICIAN], full_name="Bo Both"
    )
    clinicians = [
        factories.make_user(f"c{i}@example.edu", roles=[Role.CLINICIAN], full_name=f"Clin {i}")
        for i in range(3)
    ]
    first = factories.put_in_study(*instructions)
    assignments_create(
        instructions=instructions, clinicians=clinicians[:2], overlap=2, actor=admin, study=first
    )
    factories.assign(instructions[0], both, study=first, fill=False)
    second = study_services.study_create(
        dataset=dataset, name=ROUND_NAME, actor=admin, copy_responses_from=first
    )
    for instruction in instructions:
        ModelResponse.objects.create(
            instruction=instruction, model_name="Atlas-70B@4096", text="The new model's answer."
        )
    study_services.study_add_responses(
        study=second,
        responses=ModelResponse.objects.filter(model_name="Atlas-70B@4096"),
        source="model Atlas-70B@4096",
        actor=admin,
    )
    other = Dataset.objects.create(name="zz-other", is_synthetic=True)
    study_services.study_create(dataset=other, name="Round 1: other data", actor=admin)
    return dataset, admin, both, clinicians, instructions, first, second


def test_a_small_two_round_study_in_the_browser(live_server, page, small_study):
    dataset, admin, both, clinicians, instructions, first, second = small_study
    _watch_csp(page.context)
    base = live_server.url
    page.set_viewport_size(DESKTOP)

    # The admin assigns round 2 from the assign page: only this dataset's rounds are offered,
    # and changing the dataset changes them.
    _sign_in(page, live_server, admin)
    page.goto(base + reverse("admin_assign"))
    page.get_by_label("Dataset").select_option(label="small")
    rounds = page.locator("#id_study option:not([hidden])").all_inner_texts()
    assert rounds[1:] == ["Round 1", "Round 2: adds Atlas-70B (OpenAI fine-tune)"]
    page.get_by_label("Dataset").select_option(label="zz-other")
    assert page.locator("#id_study option:not([hidden])").all_inner_texts()[1:] == [
        "Round 1: other data"
    ]
    page.get_by_label("Dataset").select_option(label="small")
    page.get_by_label("Study").select_option(label=rounds[2])
    page.get_by_label("Overlap").fill("2")
    for c in clinicians:
        page.get_by_label(c.email).check()
    page.get_by_label("both@example.edu").check()
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_test_id("assign-repeats")).to_contain_text("21 (instruction, clinician)")
    expect(page.get_by_test_id("assign-unblind")).to_contain_text("both@example.edu")
    assert_no_axe_violations(page, "assign preview of a copied round")
    page.get_by_role("button", name=re.compile(r"^Create \d+ assignment")).click()
    # c0 and c1 (and, for S-0, the two-role account) hold round 1's responses: 9 x 2 + 3
    # pairs left out; round 2 goes to c2 and the two-role account.
    holders = set(
        Assignment.objects.filter(study=second).values_list("clinician__email", flat=True)
    )
    assert holders == {"c2@example.edu", "both@example.edu"}

    # The clinician holding both rounds of S-0: numbers only, never the name.
    factories.assign(instructions[0], clinicians[0], study=second, fill=False)
    _sign_in(page, live_server, clinicians[0])
    page.goto(base + reverse("clinician_queue"))
    html = page.content()
    assert "Atlas" not in html and "OpenAI" not in html
    expect(page.get_by_test_id("queue-round")).to_have_text(["Round 1", "Round 2"])
    assert_no_axe_violations(page, "clinician queue with two rounds")

    # The two-role account is warned on its review page, and its review is flagged.
    _sign_in(page, live_server, both)
    page.goto(base + reverse("clinician_review", args=[instructions[0].pk]) + f"?study={first.pk}")
    expect(page.get_by_test_id("dual-role")).to_contain_text("admin and staff")
    assert Review.objects.get(
        assignment__clinician=both, assignment__study=first
    ).reviewer_could_unblind
    assert_no_axe_violations(page, "review page of an admin and clinician")

    # The progress page names each row's round and filters by round.
    _sign_in(page, live_server, admin)
    page.goto(base + reverse("progress_dataset", args=[dataset.pk]))
    first_card = page.get_by_test_id("progress-instruction").first
    expect(first_card.get_by_test_id("review-round")).to_have_count(5)
    assert_no_axe_violations(page, "progress of two rounds")
    page.get_by_label("In round").select_option(label="Round 2: adds Atlas-70B (OpenAI fine-tune)")
    page.get_by_role("button", name="Filter").click()
    expect(
        page.get_by_test_id("progress-instruction").first.get_by_test_id("review-round")
    ).to_have_count(2)
    page.set_viewport_size(PHONE)
    assert_no_axe_violations(page, "progress of round 2")
    # The studies page: the round that names a model is flagged, copied models offer no Add.
    page.set_viewport_size(DESKTOP)
    page.goto(base + reverse("admin_studies", args=[dataset.pk]))
    expect(page.get_by_test_id("round-name-warning")).to_have_count(1)
    row = page.locator(f"tr[data-model='{review_data.MODEL_NAMES[0]}']")
    expect(row.get_by_role("button", name=re.compile("Add to round"))).to_have_count(0)
    assert_no_axe_violations(page, "studies of two rounds")
