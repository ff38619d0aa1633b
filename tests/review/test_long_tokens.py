"""Model output with one long unbroken token (a 10,000-digit run) stays bounded on the page.

The review page's summary names each response by its first words, copied into ``#review-data``;
bounded by words only, one "word" that is the whole digit run copied ~100 kB into the page.
"""

import pytest
from django.urls import reverse

from review.models import ModelResponse, Role
from review.selectors.reviews import PREVIEW_CHARS, response_preview
from tests import factories
from tests.review import review_data

DIGITS = "1234567890" * 1000  # one 10,000-character "word"


def test_a_preview_is_its_first_eight_words():
    assert response_preview("one two  three\nfour five six seven eight nine") == (
        "one two three four five six seven eight"
    )


def test_a_preview_of_one_long_token_is_bounded_by_characters():
    preview = response_preview(DIGITS + " and more")
    assert len(preview) <= PREVIEW_CHARS
    assert preview.endswith("…")
    assert preview.startswith("1234567890")


def test_a_short_text_has_no_ellipsis():
    assert response_preview("Creatinine 1.2 mg/dL.") == "Creatinine 1.2 mg/dL."


@pytest.mark.django_db
def test_the_review_pages_data_holds_no_long_token(client):
    factories.active_dua()
    dataset = review_data.make_dataset("long-token")
    patient = review_data.make_record(dataset, "P-LONG", n_events=5)
    instruction = review_data.make_instruction(dataset, patient, "I-LONG", n_responses=2)
    ModelResponse.objects.filter(instruction=instruction).update(text=("Result: " + DIGITS) * 10)
    clinician = factories.make_user("long@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    factories.sign_in(client, clinician)
    response = client.get(reverse("clinician_review", args=[instruction.pk]))
    assert response.status_code == 200
    previews = [r["preview"] for r in response.context["data"]["responses"]]
    assert previews and all(len(p) <= PREVIEW_CHARS for p in previews)
