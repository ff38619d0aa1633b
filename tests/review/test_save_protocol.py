"""The save protocol as the page meets it: blinding by handles, masked self-identification,
JSON answers when the session ends or the token changed, conflicts that say what happened to
the edits, and the query cost of a save."""

import json
import re
import time

import pytest
from django.test import Client
from django.urls import reverse

from review.blinding import MASK, mask_model_names
from review.models import ModelResponse, Review, Role
from review.services import reviews as review_services
from review.services.reviews import review_get_or_start
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(db):
    dataset = review_data.make_dataset()
    patient = review_data.make_record(dataset, "P-PROT", n_events=60)
    instruction = review_data.make_instruction(dataset, patient, "I-PROT")
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    assignment = review_data.assign(instruction, clinician)
    return dataset, patient, instruction, clinician, assignment


def _edit(handle, field, value, at=None):
    return {"handle": handle, "field": field, "value": value, "at": at or int(time.time() * 1000)}


def _complete(review: Review) -> list[dict]:
    """Edits ranking every response in shown order and marking each correct."""
    return [
        e
        for i, h in enumerate(review.handles)
        for e in (_edit(h, "rank", i + 1), _edit(h, "is_correct", True))
    ]


def _save(client, review, edits, *, name="review_save", **headers):
    return client.post(
        reverse(name, args=[review.pk]),
        json.dumps({"edits": edits, "tab": "t"}),
        content_type="application/json",
        headers={"Accept": "application/json", **headers},
    )


def test_handles_carry_neither_ids_nor_import_order(setup):
    # Before: the page addressed responses by database id, and within every instruction the
    # same id offset was the same model. Handles are random per review.
    dataset, patient, instruction, clinician, assignment = setup
    others = [factories.make_user(f"c{i}@example.edu", roles=[Role.CLINICIAN]) for i in range(12)]
    reviews = [review_get_or_start(assignment=review_data.assign(instruction, c)) for c in others]
    reviews.append(review_get_or_start(assignment=assignment))
    ids = {str(pk) for pk in ModelResponse.objects.values_list("pk", flat=True)}
    every = [h for r in reviews for h in r.handles]
    assert len(set(every)) == len(every)  # unique across reviews: nothing links them
    assert not ids & set(every)
    # Sorting handles says nothing about import order: the model at the smallest id is not
    # consistently the first handle in sort order.
    first_by_handle = {r.shown_order[r.handles.index(min(r.handles))] for r in reviews if r.handles}
    assert len(first_by_handle) > 1


def test_the_page_never_shows_a_response_id(client, setup):
    _, _, instruction, clinician, _ = setup
    client.force_login(clinician)
    html = client.get(reverse("clinician_review", args=[instruction.pk])).content.decode()
    for pk in ModelResponse.objects.values_list("pk", flat=True):
        assert f"response-{pk}" not in html
        assert f'data-handle="{pk}"' not in html
        assert f'"id": {pk}' not in html
    assert len(re.findall(r'data-handle="[\w-]{11}"', html)) == 4


def test_a_response_naming_its_model_is_masked_for_clinicians(client, setup):
    _, _, instruction, clinician, _ = setup
    response = ModelResponse.objects.filter(instruction=instruction).first()
    response.text = f"As {response.model_name}, I would check the creatinine. GPT-4o agrees."
    response.names_own_model = True
    response.save()
    client.force_login(clinician)
    html = client.get(reverse("clinician_review", args=[instruction.pk])).content.decode()
    assert response.model_name not in html and "GPT-4o" not in html
    assert f"As {MASK}, I would check the creatinine. {MASK} agrees." in html
    assert "Words naming a model are masked" in html


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("I am Llama-2-70b-chat.", f"I am {MASK}."),
        ("claude 3 Opus says so", f"{MASK} says so"),
        ("As an OpenAI model", f"As an {MASK} model"),
        ("Give furosemide 40 mg.", "Give furosemide 40 mg."),
    ],
)
def test_masking_takes_version_suffixes_and_leaves_clinical_text(text, masked):
    assert mask_model_names(text, "mpt-7b-instruct") == masked


def test_a_signed_out_save_is_a_json_401_not_the_sign_in_page(client, setup):
    _, _, instruction, clinician, assignment = setup
    review = review_get_or_start(assignment=assignment)
    response = _save(client, review, [_edit(review.handles[0], "rank", 1)])
    assert response.status_code == 401
    assert response.json()["error"] == "signed_out"
    assert response.json()["login_url"] == reverse("account_login") + "?next=/session/resumed/"
    # The record panel's endpoints too: no HTML drawn into a JSON panel ("NaN events").
    events = client.get(
        reverse("record_events", args=[instruction.pk]), headers={"Accept": "application/json"}
    )
    assert events.status_code == 401 and events.json()["error"] == "signed_out"


def test_a_stale_csrf_token_is_a_json_403_the_page_can_recover_from(setup):
    _, _, instruction, clinician, assignment = setup
    review = review_get_or_start(assignment=assignment)
    client = Client(enforce_csrf_checks=True)
    client.force_login(clinician)
    client.get(reverse("clinician_review", args=[instruction.pk]))
    token = client.cookies["csrftoken"].value
    refused = _save(client, review, [_edit(review.handles[0], "rank", 1)], X_CSRFToken="stale")
    assert refused.status_code == 403 and refused.json()["error"] == "csrf"
    ok = _save(client, review, [_edit(review.handles[0], "rank", 1)], X_CSRFToken=token)
    assert ok.status_code == 200


def test_edits_after_a_submit_elsewhere_are_refused_by_name(client, setup):
    _, _, instruction, clinician, assignment = setup
    review = review_get_or_start(assignment=assignment)
    client.force_login(clinician)
    complete = _complete(review)
    assert _save(client, review, complete, name="review_submit").status_code == 200
    # Tab B still had the same values pending, and one new comment.
    late = complete + [_edit(review.handles[1], "comment", "second thoughts")]
    refused = _save(client, review, late)
    assert refused.status_code == 409
    assert refused.json()["unapplied"] == [f"{review.handles[1]}.comment"]
    assert refused.json()["state"]["status"] == "submitted"
    # The same final edits resent to submit (a retry after a lost answer) are not a conflict.
    assert _save(client, review, complete, name="review_submit").status_code == 200


def test_a_draft_save_is_one_read_and_one_write(client, setup, django_assert_num_queries):
    _, _, instruction, clinician, assignment = setup
    client.force_login(clinician)
    client.get(reverse("clinician_review", args=[instruction.pk]))
    review = Review.objects.get(assignment=assignment)
    _save(client, review, [_edit(review.handles[0], "rank", 1)])  # first save also audits
    # session, user and access (one cache entry), the review (one read), the draft (one UPDATE).
    from tests.review.test_record_views import SAVE_QUERIES

    with django_assert_num_queries(SAVE_QUERIES):
        assert _save(client, review, [_edit(review.handles[0], "rank", 2)]).status_code == 200


def test_a_submit_that_loses_a_race_with_a_save_submits_what_the_save_left(
    client, setup, monkeypatch
):
    # Submit takes no lock: a save from another tab that lands between the submit's read and
    # its write makes the write miss (another version), and the submit reads the review again.
    _, _, instruction, clinician, assignment = setup
    review = review_get_or_start(assignment=assignment)
    client.force_login(clinician)
    complete = _complete(review)
    assert _save(client, review, complete).status_code == 200
    validate = review_services.review_validate
    reads: list[int] = []

    def validate_then_another_tab_saves(row, payload):  # noqa: ANN001, ANN202
        if payload.get("tab") == "u":
            return validate(row, payload)  # the other tab's own save
        reads.append(row.version)
        if len(reads) == 1:
            late = _edit(review.handles[0], "comment", "from the other tab")
            other = Review.objects.get(pk=review.pk)
            review_services.review_save_draft(
                review=other, clinician=clinician, payload={"edits": [late], "tab": "u"}
            )
        return validate(row, payload)

    monkeypatch.setattr(review_services, "review_validate", validate_then_another_tab_saves)
    answer = _save(client, review, complete, name="review_submit")
    assert answer.status_code == 200 and answer.json()["status"] == "submitted"
    assert len(reads) == 2 and reads[1] == reads[0] + 1  # read again after the lost write
    stored = Review.objects.get(pk=review.pk)
    rows = list(stored.judgements.order_by("position"))
    assert len(rows) == len(review.handles)  # written once, by the write that won
    assert rows[0].comment == "from the other tab"
    assert stored.version == reads[1] + 1
