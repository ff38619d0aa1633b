"""Nothing a clinician can see predicts which model is where.

The order of a review's responses used to be ``random.Random(sha256("medalign-order:{clinician
id}:{instruction id}"))``: the page carried the clinician's id, the URL the instruction's, and
response ids follow import order, so a clinician could compute every order and one self-naming
response unblinded its model on every instruction. These tests are the attacker: they predict
the order from everything a clinician receives, and must not beat chance.
"""

import hashlib
import json
import math
import random
import re
from collections import Counter

import pytest
from django.urls import reverse

from review.models import Review, Role
from review.services.reviews import review_get_or_start
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db

N_INSTRUCTIONS = 120
N_MODELS = 6


def _old_formula(clinician_id: int, instruction_id: int, response_ids: list[int]) -> list[int]:
    """The seeded order a clinician could compute from the page and the URL."""
    digest = hashlib.sha256(f"medalign-order:{clinician_id}:{instruction_id}".encode()).digest()
    order = sorted(response_ids)
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return order


@pytest.fixture
def study():
    dataset = review_data.make_dataset("blind-order")
    patient = review_data.make_record(dataset, "P-ORDER", n_events=10)
    clinician = factories.make_user("order@example.edu", roles=[Role.CLINICIAN])
    assignments = []
    for i in range(N_INSTRUCTIONS):
        instruction = review_data.make_instruction(
            dataset, patient, f"O-{i:03d}", n_responses=N_MODELS
        )
        assignments.append(review_data.assign(instruction, clinician))
    return clinician, assignments


def _chance_bound(p: float, n: int, sigmas: float = 5.0) -> float:
    return p + sigmas * math.sqrt(p * (1 - p) / n)


def test_no_clinician_visible_rule_predicts_the_order(study):
    clinician, assignments = study
    exact_old = 0
    first_model: Counter[str] = Counter()
    same_as_previous = 0
    import_order_first = 0
    previous: list[str] | None = None
    for assignment in assignments:
        review = review_get_or_start(assignment=assignment)
        ids = sorted(int(r) for r in review.shown_order)
        names = dict(assignment.instruction.responses.values_list("id", "model_name"))
        shown = [names[int(r)] for r in review.shown_order]
        if review.shown_order == _old_formula(clinician.pk, assignment.instruction_id, ids):
            exact_old += 1
        first_model[shown[0]] += 1
        import_order_first += review.shown_order[0] == ids[0]
        if previous is not None and shown == previous:
            same_as_previous += 1
        previous = shown
    # The old seeded formula: every order matched. Chance is 1/720 per review, so about 0.17
    # matches in 120 reviews; "at most 1" failed one CI run in ~80 (P(>= 2) = 1.3%). At most 4:
    # by chance P(>= 5) is about 1e-6, and the old formula's 120 of 120 stays far beyond it.
    stats = (exact_old, import_order_first, same_as_previous, dict(first_model))
    assert exact_old <= 4, stats
    # The first model shown follows neither import order nor the previous instruction's order.
    bound = _chance_bound(1 / N_MODELS, N_INSTRUCTIONS)
    assert import_order_first / N_INSTRUCTIONS < bound, stats
    assert same_as_previous <= 4, stats  # chance 1/720 a pair: the same tail as above
    # Every model is shown first about as often (a model always first would be spotted).
    assert max(first_model.values()) / N_INSTRUCTIONS < bound, stats


def test_the_order_is_not_a_function_of_any_id_the_page_shows(study):
    """Reopening the same (clinician, instruction, responses) afresh — what a second
    installation with the same ids would do — draws a new order: no id, secret-less hash or
    import position determines it."""
    _, assignments = study
    assignment = assignments[0]
    orders = set()
    for _ in range(30):
        Review.objects.filter(assignment=assignment).delete()
        assignment.refresh_from_db()
        review = review_get_or_start(assignment=assignment)
        orders.add(tuple(review.shown_order))
    assert len(orders) > 20  # 30 draws from 720 orders


def test_the_page_carries_no_user_id_and_no_response_id(client, study):
    clinician, assignments = study
    factories.sign_in(client, clinician)
    html = client.get(
        reverse("clinician_review", args=[assignments[0].instruction_id])
    ).content.decode()
    found = re.search(
        r'<script id="review-data" type="application/json">(.*?)</script>', html, re.S
    )
    data = json.loads(found.group(1))
    assert not {"user", "user_id", "clinician"} & set(data)
    # The key of the tab's unsent edits is an HMAC of the account, not its id.
    assert re.fullmatch(r"[0-9a-f]{16}", data["owner"]) and data["owner"] != str(clinician.pk)
    review = Review.objects.get(assignment=assignments[0])
    for response, rid in zip(data["responses"], review.shown_order, strict=True):
        assert set(response) == {
            "handle", "position", "label", "rank", "is_correct", "tags", "comment", "preview"
        }  # fmt: skip
        assert response["handle"] != str(rid) and f"response-{rid}" not in html
