"""The record endpoints (excerpt, timeline, search, notes), blinding across every payload the
review page loads, and query counts that stay constant whatever the record or queue size."""

import json
import re
from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from review.models import Event, ModelResponse, Role
from review.search import highlight, rank_concepts
from review.selectors.records import Cursor, record_timeline_page
from review.vocabulary import concepts, stemmed
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db

# Pinned: the review page and the queue cost this many queries whatever the record or queue size
# (session from the shared cache, the user with their access check from one shared-cache entry,
# the assignment with its review, responses, the stored excerpt's HTML delivered inline, one
# audit INSERT for both events; the queue: session, user and access, one query for the
# assignments). With the embedded database cache each of the two cache reads is a query; with
# Redis they are none. The dataset's model names (what responses are masked against) come from
# the process's copy, read on the first view: test_annotation_cost.py pins that read too.
# tests/review/test_annotation_cost.py pins the rest of an annotation (first open, submit).
_CACHE_READS = 2 if settings.CACHES["default"]["BACKEND"].endswith("DatabaseCache") else 0
REVIEW_PAGE_QUERIES = 4 + _CACHE_READS
QUEUE_PAGE_QUERIES = 1 + _CACHE_READS
# An autosave: session, then user and access check (one shared-cache entry), the review, one
# conditional UPDATE, a statement by itself (no transaction around it). Before: 4, with the
# UPDATE in a savepoint pair; 5 with the user row read.
SAVE_QUERIES = 2 + _CACHE_READS


@pytest.fixture
def clinician(db):
    return factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])


@pytest.fixture
def dataset(db):
    return review_data.make_dataset()


def _review_url(instruction) -> str:
    return reverse("clinician_review", args=[instruction.pk])


def search(client, url, params):
    """Record search is a POST with a JSON body: search terms stay out of URLs and logs."""
    return client.post(url, json.dumps(params), content_type="application/json")


def test_no_model_name_reaches_the_browser_on_any_endpoint(client, clinician, dataset):
    patient = review_data.make_record(dataset, "P-BLIND", n_events=400)
    instruction = review_data.make_instruction(dataset, patient, "I-BLIND")
    review_data.assign(instruction, clinician)
    client.force_login(clinician)
    payloads: list[bytes] = []

    def get(url, params=None, status=200):
        response = client.get(url, params or {})
        assert response.status_code == status, url
        payloads.append(response.content)
        payloads.extend(f"{k}: {v}".encode() for k, v in response.headers.items())
        return response

    page = get(_review_url(instruction))
    data = page.context["data"]
    urls = data["urls"]
    get(reverse("clinician_queue"))
    get(urls["excerpt"])
    first = get(urls["events"]).json()
    second = get(urls["events"], {"cursor": first["next"]}).json()
    get(urls["events"], {"cursor": second["next"], "type": "note"})
    get(urls["events"], {"day": "2019-02-01"})
    for query in ("pericardial effusion", "creatinine"):
        response = search(client, urls["search"], {"q": query})
        assert response.status_code == 200
        payloads.append(response.content)
    found = search(client, urls["search"], {"q": "pericardial effusion"}).json()
    for event_url in set(re.findall(r'data-url="([^"]+)"', found["html"])):
        get(event_url)
    at = 1_700_000_000_000
    body = {
        "tab": "t",
        "edits": [
            e
            for r in data["responses"]
            for e in (
                {"handle": r["handle"], "field": "rank", "value": r["position"] + 1, "at": at},
                {"handle": r["handle"], "field": "is_correct", "value": True, "at": at},
            )
        ],
    }
    for name in ("save", "submit", "submit"):
        response = client.post(urls[name], json.dumps(body), content_type="application/json")
        assert response.status_code == 200
        payloads.append(response.content)
    payloads.append(get(_review_url(instruction)).content)  # the read-only page

    names = set(ModelResponse.objects.values_list("model_name", flat=True))
    assert names == set(review_data.MODEL_NAMES[:4])  # the responses do carry model names
    for content in payloads:
        text = content.decode()
        for name in review_data.MODEL_NAMES:
            assert name not in text
            assert name.lower() not in text.lower()
        assert "model_name" not in text
    # The JSON handed to the page is handles, positions, labels and values: no ids.
    assert set(data["responses"][0]) == {
        "handle",
        "position",
        "label",
        "rank",
        "is_correct",
        "tags",
        "comment",
        "preview",
    }
    ids = {str(pk) for pk in ModelResponse.objects.values_list("pk", flat=True)}
    assert not ids & {r["handle"] for r in data["responses"]}
    assert [r["label"] for r in data["responses"]] == ["A", "B", "C", "D"]


def _count_queries(client, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return len(ctx.captured_queries)


def test_the_review_page_costs_the_same_queries_for_a_small_and_a_large_record(
    client, clinician, dataset, django_assert_num_queries
):
    small = review_data.make_record(dataset, "P-SMALL", n_events=20)
    large = review_data.make_record(dataset, "P-LARGE", n_events=6000)
    small_i = review_data.make_instruction(dataset, small, "I-SMALL", n_responses=2)
    large_i = review_data.make_instruction(dataset, large, "I-LARGE", n_responses=4)
    for instruction in (small_i, large_i):
        review_data.assign(instruction, clinician)
    client.force_login(clinician)
    for instruction in (small_i, large_i):
        client.get(_review_url(instruction))  # first open starts the review (a write)
    counts = [_count_queries(client, _review_url(i)) for i in (small_i, large_i)]
    assert counts[0] == counts[1]
    with django_assert_num_queries(REVIEW_PAGE_QUERIES):
        client.get(_review_url(large_i))


def test_the_queue_costs_the_same_queries_for_a_short_and_a_long_queue(
    client, dataset, django_assert_num_queries
):
    patient = review_data.make_record(dataset, "P-Q", n_events=20)
    short = factories.make_user("short@example.edu", roles=[Role.CLINICIAN])
    long = factories.make_user("long@example.edu", roles=[Role.CLINICIAN])
    for i in range(25):
        instruction = review_data.make_instruction(dataset, patient, f"I-Q-{i}", n_responses=1)
        review_data.assign(instruction, long)
        if i < 2:
            review_data.assign(instruction, short)
    client.force_login(long)
    client.get(_review_url(instruction))  # one started review, so all three statuses can occur
    counts = []
    for user in (short, long):
        client.force_login(user)
        client.get(reverse("clinician_queue"))  # the session's first request writes it
        counts.append(_count_queries(client, reverse("clinician_queue")))
    assert counts[0] == counts[1]
    with django_assert_num_queries(QUEUE_PAGE_QUERIES):
        client.get(reverse("clinician_queue"))


def test_the_queue_shows_progress_filters_and_next(client, clinician, dataset):
    patient = review_data.make_record(dataset, "P-QQ", n_events=20)
    instructions = [
        review_data.make_instruction(
            dataset, patient, f"I-QQ-{i}", category="diagnosis support" if i else "other"
        )
        for i in range(3)
    ]
    for instruction in instructions:
        review_data.assign(instruction, clinician)
    client.force_login(clinician)
    queue = client.get(reverse("clinician_queue")).context["queue"]
    assert (queue.done, queue.total, queue.counts["new"]) == (0, 3, 3)
    response = client.get(reverse("clinician_next"))
    assert response.status_code == 302 and response.url == _review_url(instructions[0])
    page = client.get(response.url)
    queue = client.get(reverse("clinician_queue"), {"status": "draft"}).context["queue"]
    assert queue.items == []  # opening is not working on it
    handle = page.context["data"]["responses"][0]["handle"]
    edit = {"edits": [{"handle": handle, "field": "rank", "value": 1, "at": 1}], "tab": "t"}
    saved = client.post(
        page.context["data"]["urls"]["save"], json.dumps(edit), content_type="application/json"
    )
    assert saved.status_code == 200
    queue = client.get(reverse("clinician_queue"), {"status": "draft"}).context["queue"]
    assert [i.instruction_pk for i in queue.items] == [instructions[0].pk]
    queue = client.get(reverse("clinician_queue"), {"category": "other"}).context["queue"]
    assert [i.instruction_pk for i in queue.items] == [instructions[0].pk]
    assert queue.total == 3  # the progress bar counts the whole queue
    after = client.get(reverse("clinician_next"), {"after": instructions[0].assignments.get().pk})
    assert after.url == _review_url(instructions[1])


def test_the_excerpt_shows_the_best_matching_note_and_events_highlighted(
    client, clinician, dataset
):
    patient = review_data.make_record(dataset, "P-EX", n_events=200)
    instruction = review_data.make_instruction(
        dataset, patient, "I-EX", question="Is there a pericardial effusion on the echo?"
    )
    review_data.assign(instruction, clinician)
    client.force_login(clinician)
    html = client.get(reverse("record_excerpt", args=[instruction.pk])).json()["html"]
    assert "<mark>pericardial effusion</mark>" in html
    assert "Most recent events" in html


def test_record_text_is_escaped_even_when_highlighted(client, clinician, dataset):
    patient = review_data.make_record(dataset, "P-XSS", n_events=40)
    Event.objects.filter(patient=patient, event_type="note").update(
        text="<script>alert('creatinine')</script> creatinine <b>high</b>"
    )
    instruction = review_data.make_instruction(dataset, patient, "I-XSS")
    review_data.assign(instruction, clinician)
    client.force_login(clinician)
    for url, params in (
        (reverse("record_excerpt", args=[instruction.pk]), {}),
        (reverse("record_search", args=[instruction.pk]), {"q": "creatinine"}),
        (reverse("record_events", args=[instruction.pk]), {}),
    ):
        if "search" in url:
            html = search(client, url, params).json()["html"]
        else:
            html = client.get(url, params).json()["html"]
        assert "<script>" not in html and "<b>" not in html
        assert "&lt;script&gt;" in html


def test_the_timeline_pages_through_the_whole_record_once_newest_first(dataset):
    patient = review_data.make_record(dataset, "P-TL", n_events=250)
    # Two undated events come after every dated one.
    Event.objects.create(patient=patient, seq=1000, event_type="observation", name="undated A")
    Event.objects.create(patient=patient, seq=1001, event_type="observation", name="undated B")
    seen = []
    cursor = None
    pages = 0
    while True:
        page = record_timeline_page(patient, cursor=cursor, limit=40)
        pages += 1
        seen.extend(page.rows)
        if not page.next_cursor:
            break
        cursor = Cursor.decode(page.next_cursor)
    assert pages == 7
    assert len(seen) == len({r.id for r in seen}) == 252
    dated = [(r.timestamp, r.seq) for r in seen if r.timestamp]
    assert dated == sorted(dated, reverse=True)
    assert [r.name for r in seen[-2:]] == ["undated B", "undated A"]


def test_the_timeline_filters_by_type_and_jumps_to_a_date(client, clinician, dataset):
    patient = review_data.make_record(dataset, "P-TF", n_events=300)
    instruction = review_data.make_instruction(dataset, patient, "I-TF")
    review_data.assign(instruction, clinician)
    client.force_login(clinician)
    url = reverse("record_events", args=[instruction.pk])
    first = client.get(url).json()
    assert first["types"] == ["measurement", "note"]
    assert first["count"] == 100 and first["next"]
    notes = client.get(url, {"type": "note"}).json()
    assert notes["count"] == 15 and not notes["next"]
    assert notes["html"].count('class="tl-event type-note"') == 15
    jumped = client.get(url, {"day": "2019-01-08"}).json()
    days = re.findall(r'data-key="(\d{4}-\d\d-\d\d)', jumped["html"])
    assert days and max(days) == "2019-01-08"
    assert client.get(url, {"cursor": "garbage"}).status_code == 400
    assert client.get(url, {"day": "not-a-date"}).status_code == 400
    # Out-of-range dates and cursors are bad input too, not server errors.
    for bad in (
        {"day": "9999-12-31"},
        {"cursor": "t99999999999999999999.1"},
        {"cursor": "t-99999999999999999.1"},
        {"cursor": "u99999999999999999999999"},
    ):
        assert client.get(url, bad).status_code == 400, bad
        search_url = reverse("record_search", args=[instruction.pk])
        assert search(client, search_url, {"q": "note", **bad}).status_code in (200, 400), bad


def test_search_finds_a_note_and_pages_through_matches(client, clinician, dataset):
    patient = review_data.make_record(dataset, "P-S", n_events=400)
    instruction = review_data.make_instruction(dataset, patient, "I-S")
    review_data.assign(instruction, clinician)
    client.force_login(clinician)
    url = reverse("record_search", args=[instruction.pk])
    found = search(client, url, {"q": "Pericardial EFFUSION"}).json()
    assert found["count"] == 1
    assert "<mark>pericardial effusion</mark>" in found["html"]
    labs = search(client, url, {"q": "creatinine"}).json()  # 95 lab rows + 20 notes mention it
    assert labs["count"] == 50 and labs["next"]
    rest = search(client, url, {"q": "creatinine", "cursor": labs["next"]}).json()
    last = search(client, url, {"q": "creatinine", "cursor": rest["next"]}).json()
    assert labs["count"] + rest["count"] + last["count"] == 100 + 20
    assert not last["next"]
    assert search(client, url, {"q": "zzzz"}).json()["count"] == 0
    assert search(client, url, {"q": ""}).json()["count"] == 0
    assert client.get(url, {"q": "creatinine"}).status_code == 405  # never in a URL


def test_a_whole_note_opens_on_demand(client, clinician, dataset):
    patient = review_data.make_record(dataset, "P-N", n_events=40)
    note = Event.objects.filter(patient=patient, event_type="note").first()
    Event.objects.filter(pk=note.pk).update(text="Long note. " * 100 + "The very end.")
    instruction = review_data.make_instruction(dataset, patient, "I-N")
    review_data.assign(instruction, clinician)
    client.force_login(clinician)
    timeline = client.get(reverse("record_events", args=[instruction.pk])).json()["html"]
    event_url = reverse("record_event", args=[instruction.pk, note.pk])
    assert event_url in timeline and "The very end." not in timeline
    assert "The very end." in client.get(event_url).json()["html"]


# --- BM25 and highlighting ----------------------------------------------------------------------
def test_bm25_prefers_documents_with_rarer_matching_terms():
    docs = [
        stemmed("creatinine normal"),
        stemmed("chest pain and troponin"),
        stemmed("creatinine rising, acute kidney injury"),
        stemmed("follow up visit"),
    ]
    ranked = rank_concepts(concepts("Is the kidney injury acute? Check creatinine."), docs)
    assert [s.index for s in ranked] == [2, 0]


def test_query_concepts_drop_stopwords_and_keep_the_words_as_written():
    assert [c.text for c in concepts("What are the patient's current medications?")] == [
        "medications"
    ]


def test_highlight_escapes_everything_but_its_marks():
    html = highlight("<b>Creatinine</b> & creatinines", concepts("creatinine"))
    assert str(html) == "&lt;b&gt;<mark>Creatinine</mark>&lt;/b&gt; &amp; <mark>creatinines</mark>"


def test_cursors_round_trip():
    at = datetime(2020, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    assert Cursor.decode(Cursor(at, 42).encode()) == Cursor(at, 42)
    assert Cursor.decode("u17") == Cursor(None, 17)
    for bad in ("x1", "t1.-2", "tabc.1", "u", "t" + "9" * 50):
        with pytest.raises(ValueError):
            Cursor.decode(bad)


# --- a NUL byte in a parameter is a 400, never a 500 (PostgreSQL refuses NUL in text) ------------
def test_a_nul_byte_in_a_record_parameter_is_refused_not_a_server_error(world, client):
    client.force_login(world.clinician)
    events = reverse("record_events", args=[world.instruction.pk])
    assert client.get(events, {"type": "note\x00"}).status_code == 400
    search = client.post(
        reverse("record_search", args=[world.instruction.pk]),
        json.dumps({"q": "chest\x00pain"}),
        content_type="application/json",
    )
    assert search.status_code == 400
    assert client.get(reverse("clinician_queue"), {"category": "x\x00"}).status_code == 200
