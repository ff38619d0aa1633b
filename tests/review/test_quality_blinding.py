"""A gold item is indistinguishable from any other review in everything the clinician receives.

As test_blinding_order.py is the attacker of the shown order, these tests are the attacker of
gold: two instructions alike in every word, one of them gold, assigned in one batch; then the
queue, both review pages, the record endpoints, autosave and submit are compared, with only what
names the object itself (its id, its handles, its instruction id, a CSRF token, a time) put
aside. Any difference a page, a JSON answer or a URL carried would tell a clinician which of
their reviews is a check.
"""

import json
import re
import time

import pytest
from django.urls import reverse

from review.models import (
    Assignment,
    Instruction,
    ModelResponse,
    ReferenceResponse,
    Review,
    Role,
)
from review.services import quality as services
from review.services.assignments import assignments_create
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db

ANSWER = "The latest creatinine was 1.2 mg/dL, stable since March."


def _twin(dataset, patient, code: str) -> Instruction:
    """An instruction, its four responses all saying the same words (so the random order of
    each review cannot make the pages differ), with the release's verdicts."""
    instruction = Instruction.objects.create(
        dataset=dataset,
        instruction_id=code,
        question="Is the kidney function worsening?",
        patient=patient,
        person_id=patient.person_id,
        category="information retrieval",
        specialty="Internal Medicine",
    )
    for k, name in enumerate(review_data.MODEL_NAMES[:4]):
        ModelResponse.objects.create(
            instruction=instruction,
            model_name=name,
            text=ANSWER,
            release_rank=float(k + 1),
            release_binary_correct=k < 2,
        )
    ReferenceResponse.objects.create(instruction=instruction, annotator="A_1", text="Stable.")
    return instruction


@pytest.fixture
def twins():
    factories.active_dua()
    dataset = review_data.make_dataset("gold-blind")
    patient = review_data.make_record(dataset, "P-TWIN", n_events=20)
    gold, ordinary = _twin(dataset, patient, "T-1"), _twin(dataset, patient, "T-2")
    study = factories.put_in_study(gold, ordinary)
    admin = factories.make_user("twin-admin@example.edu", roles=[Role.ADMIN])
    clinician = factories.make_user("twin@example.edu", roles=[Role.CLINICIAN])
    services.gold_items_from_release(study=study, instructions=[gold], use="gold", actor=admin)
    services.quality_policy_set(
        study=study, gold_rate=0.5, adjudication_tau=0.0, drift_window=10, actor=admin
    )
    plan = assignments_create(
        instructions=[gold, ordinary], clinicians=[clinician], overlap=1, actor=admin
    )
    assert plan.gold == 1 and plan.created == 1
    a_gold = Assignment.objects.get(instruction=gold, clinician=clinician)
    a_plain = Assignment.objects.get(instruction=ordinary, clinician=clinician)
    assert (a_gold.purpose, a_plain.purpose) == ("gold", "review")
    return clinician, a_gold, a_plain


def _normal(text: str, assignment: Assignment) -> str:
    """Put aside what names the object itself: ids, handles, the instruction's id, tokens."""
    instruction = assignment.instruction
    review = Review.objects.filter(assignment=assignment).first()
    if review is not None:
        for k, handle in enumerate(review.handles):
            text = text.replace(handle, f"<handle {k}>")
        text = re.sub(rf"/reviews/{review.pk}/", "/reviews/<review>/", text)
        text = re.sub(rf'"review": {review.pk}\b', '"review": "<review>"', text)
    text = text.replace(f"/instructions/{instruction.pk}/", "/instructions/<pk>/")
    text = text.replace(f"after={assignment.pk}", "after=<assignment>")
    text = text.replace(instruction.instruction_id, "<instruction id>")
    text = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "<csrf>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+(\+00:00|Z)?", "<time>", text)
    return text


def _page(client, assignment: Assignment) -> str:
    response = client.get(reverse("clinician_review", args=[assignment.instruction_id]))
    assert response.status_code == 200
    return _normal(response.content.decode(), assignment)


def _json(response, assignment: Assignment) -> dict:
    return json.loads(_normal(response.content.decode(), assignment))


def test_the_queue_rows_of_gold_and_ordinary_work_read_alike(client, twins):
    clinician, a_gold, a_plain = twins
    factories.sign_in(client, clinician)
    html = client.get(reverse("clinician_queue")).content.decode()
    rows = re.findall(r"<tr>\s*<td><a href.*?</tr>", html, re.S)
    assert len(rows) == 2
    by = {
        a.pk: next(r for r in rows if a.instruction.instruction_id in r) for a in (a_gold, a_plain)
    }
    assert _normal(by[a_gold.pk], a_gold) == _normal(by[a_plain.pk], a_plain)


def test_everything_a_clinician_receives_is_the_same_for_gold(client, twins):
    clinician, a_gold, a_plain = twins
    factories.sign_in(client, clinician)
    # The review page: its HTML, the data review.js reads, the links it carries.
    pages = {a.pk: _page(client, a) for a in (a_gold, a_plain)}
    assert pages[a_gold.pk] == pages[a_plain.pk]
    assert "gold" not in pages[a_gold.pk].lower()
    # The record's endpoints.
    for name in ("record_excerpt", "record_events"):
        got = [
            _normal(client.get(reverse(name, args=[a.instruction_id])).content.decode(), a)
            for a in (a_gold, a_plain)
        ]
        assert got[0] == got[1], name
    # Autosave and submit: the same edits, the same answers.
    answers = {}
    for a in (a_gold, a_plain):
        review = Review.objects.get(assignment=a)
        now = int(time.time() * 1000)
        edits = []
        for k, handle in enumerate(review.handles):
            edits += [
                {"handle": handle, "field": "rank", "value": k + 1, "at": now},
                {"handle": handle, "field": "is_correct", "value": k < 2, "at": now},
            ]
        body = {"edits": edits[:2], "tab": "x", "seq": 1, "active_seconds": 0}
        saved = client.post(
            reverse("review_save", args=[review.pk]), body, content_type="application/json"
        )
        body = {"edits": edits, "tab": "x", "seq": 2, "active_seconds": 0}
        done = client.post(
            reverse("review_submit", args=[review.pk]), body, content_type="application/json"
        )
        again = client.post(
            reverse("review_submit", args=[review.pk]), body, content_type="application/json"
        )
        answers[a.pk] = [
            (r.status_code, sorted(r.headers), _json(r, a)) for r in (saved, done, again)
        ]
    assert answers[a_gold.pk] == answers[a_plain.pk]
    # The submitted pages, and the queue and its "next" once both are done.
    assert _page(client, a_gold) == _page(client, a_plain)
    queue = client.get(reverse("clinician_queue")).content.decode()
    assert queue.count("Submitted</span>") == 2 and "alibration" not in queue


def test_gold_and_ordinary_work_arrive_together(twins):
    _clinician, a_gold, a_plain = twins
    assert a_gold.created_at == a_plain.created_at
    assert a_gold.assigned_by_id == a_plain.assigned_by_id and a_gold.study_id == a_plain.study_id
