"""Fuzzing the autosave and submit endpoints (hypothesis) with invalid payloads.

Unknown or foreign response handles, unknown fields, missing values or times, negative or
out-of-range ranks, wrong types, oversized comments, another clinician's review, non-JSON bodies
and wrong content types: each gets a clear 4xx (JSON with ``error`` and ``message`` where the view
answers), nothing partial is stored (except that an edit whose text the database cannot store is
refused by name and the rest of its batch saved), nothing 500s (the test client re-raises any
exception).

Short by default so it runs in `make test`; FUZZ_EXAMPLES=2000 for a long run.
"""

import copy
import json
import os

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from review.models import ResponseJudgement, Review, Role
from review.services.reviews import MAX_COMMENT_CHARS, review_get_or_start
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "30"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 100,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
ENDPOINTS = ["review_save", "review_submit"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


@pytest.fixture
def world(db):
    dataset = review_data.make_dataset()
    patient = review_data.make_record(dataset, "P-FUZZ-1", n_events=20)
    instruction = review_data.make_instruction(dataset, patient, "I-FUZZ-1")
    other_instruction = review_data.make_instruction(dataset, patient, "I-FUZZ-2")
    clinician = factories.make_user("fuzz@example.edu", roles=[Role.CLINICIAN])
    other = factories.make_user("fuzz-other@example.edu", roles=[Role.CLINICIAN])
    review = review_get_or_start(assignment=review_data.assign(instruction, clinician))
    foreign = review_get_or_start(assignment=review_data.assign(other_instruction, other))
    client = Client()
    client.force_login(clinician)
    return {
        "client": client,
        "review": review,
        "foreign": foreign,
        "foreign_handles": list(foreign.handles),
    }


def snapshot(review: Review) -> tuple:
    review.refresh_from_db()
    judgements = tuple(
        ResponseJudgement.objects.filter(review=review)
        .order_by("response_id")
        .values_list("response_id", "rank", "is_correct", "comment")
    )
    tags = tuple(
        ResponseJudgement.error_tags.through.objects.filter(responsejudgement__review=review)
        .order_by("pk")
        .values_list("responsejudgement_id", "errortag_id")
    )
    return (
        review.status,
        review.version,
        json.dumps(review.draft, sort_keys=True),
        review.cannot_assess,
        review.time_spent_seconds,
        judgements,
        tags,
    )


def valid(review: Review) -> dict:
    review.refresh_from_db()
    at = 1_700_000_000_000
    return {
        "tab": "fuzz",
        "seq": 1,
        "active_seconds": 2,
        "edits": [
            e
            for i, handle in enumerate(review.handles)
            for e in (
                {"handle": handle, "field": "rank", "value": i + 1, "at": at},
                {"handle": handle, "field": "is_correct", "value": True, "at": at},
                {"handle": handle, "field": "tags", "value": [], "at": at},
                {"handle": handle, "field": "comment", "value": "", "at": at},
            )
        ],
    }


def post(client: Client, name: str, review: Review, body: bytes, content_type: str):  # noqa: ANN201
    return client.post(
        reverse(name, args=[review.pk]),
        data=body,
        content_type=content_type,
        HTTP_ACCEPT="application/json",
    )


def check_refused(
    world: dict, name: str, body: bytes, content_type: str = "application/json"
) -> int:
    """POST; a 4xx must store nothing and say why in JSON. Returns the status."""
    review = world["review"]
    before = snapshot(review)
    response = post(world["client"], name, review, body, content_type)
    assert response.status_code < 500, response.content[:300]
    if response.status_code == 200:
        # A mutation that happens to be valid: fine, but put the review back as it was.
        Review.objects.filter(pk=review.pk).update(
            status=Review.Status.DRAFT, submitted_at=None, draft={}, version=before[1]
        )
        return 200
    assert 400 <= response.status_code < 500
    refused = response.json().get("refused") if response.status_code == 400 else None
    if refused:
        # Text the database cannot store is refused per edit and the rest of the batch is
        # saved (test_unstorable_text.py): only such edits may be named, and none is stored.
        from review.storable import storable

        edits = json.loads(body)["edits"]
        named = [edits[int(name[len("edits[") : -1])] for name in refused]
        assert all(not storable(e["value"]) for e in named), named
        review.refresh_from_db()
        assert not any(not storable(str(v)) for v, _ in review.draft["fields"].values())
        Review.objects.filter(pk=review.pk).update(
            status=Review.Status.DRAFT, submitted_at=None, draft={}, version=before[1]
        )
        return 400
    assert snapshot(review) == before, "a refused request changed the review"
    if response.status_code in (400, 409):
        data = response.json()
        assert data["error"] and data["message"], data
    return response.status_code


# --- mutations of a valid payload --------------------------------------------------------------
def _mutations(world: dict) -> st.SearchStrategy:
    foreign = world["foreign_handles"]

    def on_edit(key: str, values: st.SearchStrategy) -> st.SearchStrategy:
        return st.tuples(st.just(key), st.integers(0, 15), values)

    bad_ranks = st.one_of(
        st.integers(-(2**40), 0),
        st.integers(5, 2**40),
        st.booleans(),
        st.floats(),
        st.text(max_size=3),
        st.lists(st.integers(), max_size=2),
    )
    return st.one_of(
        on_edit("handle", st.one_of(st.text(max_size=12), st.sampled_from(foreign), json_values)),
        on_edit(
            "field",
            st.one_of(st.sampled_from(["model_name", "position", "response", ""]), json_values),
        ),
        on_edit("at", st.one_of(st.integers(-(2**40), -1), st.floats(), st.text(max_size=4))),
        on_edit("rank_value", bad_ranks),
        on_edit("correct_value", st.one_of(st.integers(), st.text(max_size=5), st.floats())),
        on_edit(
            "tags_value",
            st.one_of(
                json_values,
                st.lists(st.text(max_size=12), min_size=1, max_size=3),
                st.just(["omission", "omission"]),
                st.just([["omission"]]),
                st.just([{"a": 1}]),
            ),
        ),
        on_edit(
            "comment_value",
            st.one_of(
                st.just("x" * (MAX_COMMENT_CHARS + 1)),
                st.integers(),
                json_values,
                st.sampled_from(["a\x00b", "a\ud800b"]),  # text PostgreSQL cannot store
            ),
        ),
        on_edit("extra", json_values),
        st.tuples(st.just("drop_key"), st.integers(0, 15), st.sampled_from(["value", "at"])),
        st.tuples(
            st.just("top"),
            st.sampled_from(["tab", "seq", "active_seconds", "edits", "unknown"]),
            json_values.filter(lambda v: v not in ([], 0, "", None, False)),
        ),
        st.tuples(st.just("review_field"), st.sampled_from(["cannot_assess"]), json_values),
        st.tuples(st.just("whole"), st.just(0), json_values),
    )


def apply(body: dict, mutation: tuple) -> object:
    kind, where, value = mutation
    body = copy.deepcopy(body)
    items = body["edits"]
    if kind == "drop_key":
        del items[where % len(items)][value]
    elif kind == "top":
        body[where] = value
    elif kind == "review_field":
        items.append({"field": where, "value": value, "at": 1})
    elif kind == "whole":
        return value
    elif kind.endswith("_value"):
        field = {"rank": "rank", "correct": "is_correct", "tags": "tags", "comment": "comment"}[
            kind[: -len("_value")]
        ]
        [e for e in items if e.get("field") == field][where % (len(items) // 4)]["value"] = value
    else:
        items[where % len(items)][kind] = value
    return body


@FUZZ
@given(data=st.data(), endpoint=st.sampled_from(ENDPOINTS))
def test_invalid_payloads_get_a_clear_4xx_and_store_nothing(world, data, endpoint) -> None:
    mutations = data.draw(st.lists(_mutations(world), min_size=1, max_size=3))
    body = valid(world["review"])
    for mutation in mutations:
        try:
            body = apply(body, mutation)
        except (KeyError, TypeError, IndexError, ZeroDivisionError, AttributeError):
            break  # an earlier mutation already broke the structure this one edits
    check_refused(world, endpoint, json.dumps(body, allow_nan=True).encode())


@FUZZ
@given(
    body=st.binary(max_size=500),
    endpoint=st.sampled_from(ENDPOINTS),
    content_type=st.sampled_from(
        ["application/json", "text/plain", "application/x-www-form-urlencoded", ""]
    ),
)
def test_non_json_bodies_get_400(world, body, endpoint, content_type) -> None:
    status = check_refused(world, endpoint, body, content_type)
    assert status in (200, 400)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a":' * 50_000,
        b"\xff\xfe\x00",
        b"NaN",
        b"null",
        b"1e999",
    ],
    ids=["deep-list", "deep-object", "utf16", "nan", "null", "huge-float"],
)
def test_pathological_json_gets_400(world, endpoint, body) -> None:
    assert check_refused(world, endpoint, body) == 400


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_another_clinicians_review_is_404_and_untouched(world, endpoint) -> None:
    foreign = world["foreign"]
    before = snapshot(foreign)
    response = post(
        world["client"], endpoint, foreign, json.dumps(valid(foreign)).encode(), "application/json"
    )
    assert response.status_code == 404
    assert snapshot(foreign) == before


def test_a_body_over_the_upload_limit_is_refused(world, settings) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = valid(world["review"])
    body["edits"][3]["value"] = "x" * 4_000
    body["edits"] *= 5
    assert check_refused(world, "review_save", json.dumps(body).encode()) == 400


def test_submit_twice_makes_one_review(world) -> None:
    review = world["review"]
    body = json.dumps(valid(review)).encode()
    first = post(world["client"], "review_submit", review, body, "application/json")
    again = post(world["client"], "review_submit", review, body, "application/json")
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    assert Review.objects.filter(assignment=review.assignment).count() == 1
    assert ResponseJudgement.objects.filter(review=review).count() == len(review.shown_order)
