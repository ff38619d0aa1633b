"""The record a clinician reads: the excerpt shows the latest notes and the latest values of what
the instruction names, always, with older material ranked below; every item is dated and says
how long before the record's last event it is; search and the excerpt match abbreviations,
synonyms and stems, and never show a stem."""

import json
import re

import pytest
from django.urls import reverse

from review.models import Role
from review.search import highlight, rank_concepts
from review.selectors import records
from review.vocabulary import concepts, stemmed
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db

DIABETIC = "Is this patient at high risk of diabetic complications?"


@pytest.fixture
def world(db):
    dataset = review_data.make_dataset()
    patient = review_data.make_clinical_record(dataset, "P-CLIN")
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    return dataset, patient, clinician


def _instruction(world, question: str, instruction_id: str = "I-1"):
    dataset, patient, clinician = world
    instruction = review_data.make_instruction(dataset, patient, instruction_id, question=question)
    review_data.assign(instruction, clinician)
    return instruction


def _excerpt_html(client, world, instruction) -> str:
    client.force_login(world[2])
    return client.get(reverse("record_excerpt", args=[instruction.pk])).json()["html"]


def _section(html: str, testid: str) -> str:
    match = re.search(rf'data-testid="{testid}">(.*?)</section>', html, re.S)
    assert match, testid
    return match.group(1)


# --- item 1: what the excerpt shows ----------------------------------------------------------------
def test_the_latest_note_and_the_latest_a1c_always_appear(client, world):
    instruction = _instruction(world, DIABETIC)
    excerpt = records.record_excerpt(instruction, world[1])
    assert excerpt.latest_notes[0].row.preview == review_data.LATEST_NOTE
    a1c = next(f for f in excerpt.findings if f.name == "Hemoglobin A1c")
    assert [o.value for o in a1c.occurrences][:1] == ["7.9"]
    html = _excerpt_html(client, world, instruction)
    latest = _section(html, "latest-notes")
    assert "Called about a refill of metformin" in latest and "1 May 2022" in latest
    assert "the last event&#x27;s day" not in latest and "1 day before the last event" in latest
    values = _section(html, "latest-values")
    assert re.search(r"<strong>7\.9 %</strong> <time[^>]*>20 Apr 2022, 08:00</time>", values)
    assert "12 days before the last event" in values
    assert "The record runs from 4 Jan 2016 to <strong>2 May 2022</strong>" in html


def test_the_latest_note_shows_even_when_no_note_matches(client, world):
    instruction = _instruction(world, "What is the latest heart rate?")
    html = _excerpt_html(client, world, instruction)
    assert review_data.LATEST_NOTE.split(". ")[1] in _section(html, "latest-notes")
    assert "<mark>Heart rate</mark>" in _section(html, "latest-values")


def test_a_question_answered_by_an_old_note_finds_it_below_the_latest(client, world, monkeypatch):
    # The recent window holds 10 notes: the 2016 note is found because it mentions the concept.
    monkeypatch.setattr(records, "EXCERPT_NOTE_CANDIDATES", 10)
    instruction = _instruction(world, "When did the patient have a knee arthroplasty?")
    excerpt = records.record_excerpt(instruction, world[1])
    assert [n.row.preview for n in excerpt.older_notes] == [review_data.OLD_ANSWER_NOTE]
    html = _excerpt_html(client, world, instruction)
    assert html.index('data-testid="latest-notes"') < html.index('data-testid="older-notes"')
    older = _section(html, "older-notes")
    assert "<mark>knee arthroplasty</mark>" in older
    assert "1 Feb 2016, 14:00" in older and "6.2 years before the last event" in older


def test_a_common_word_of_the_question_does_not_crowd_out_the_old_answer(world, monkeypatch):
    # Every progress note says "Plan"; only the 2016 note speaks of the arthroplasty.
    monkeypatch.setattr(records, "EXCERPT_NOTE_CANDIDATES", 10)
    monkeypatch.setattr(records, "EXCERPT_OLD_NOTE_CANDIDATES", 20)
    instruction = _instruction(world, "What was the plan after the knee arthroplasty?")
    excerpt = records.record_excerpt(instruction, world[1])
    assert review_data.OLD_ANSWER_NOTE in [n.row.preview for n in excerpt.older_notes]


def test_asking_for_medications_lists_the_latest_of_each(client, world):
    instruction = _instruction(world, "List the patient's current medications")
    excerpt = records.record_excerpt(instruction, world[1])
    drugs = {f.name: f.occurrences[0].timestamp.date().isoformat() for f in excerpt.findings}
    assert drugs == {
        "metformin 500 mg oral tablet": "2022-04-28",
        "lisinopril 10 mg oral tablet": "2022-04-28",
    }


def test_every_dated_item_says_how_long_before_the_last_event_newest_first(client, world):
    instruction = _instruction(world, f"{DIABETIC} Any chest pain?")
    excerpt = records.record_excerpt(instruction, world[1])
    for block in (excerpt.latest_notes, excerpt.older_notes):
        stamps = [n.row.timestamp for n in block]
        assert stamps == sorted(stamps, reverse=True) and stamps
    latest = [f.occurrences[0].timestamp for f in excerpt.findings]
    assert latest == sorted(latest, reverse=True) and len(latest) >= 2
    html = _excerpt_html(client, world, instruction)
    times = re.findall(r"<time [^>]*>[^<]*</time> (?:· )?<span class=\"ago\">([^<]+)</span>", html)
    assert len(times) == html.count("<time ") > 10
    assert all("before the last event" in t or t == "the last event&#x27;s day" for t in times), (
        times
    )


# --- item 2: abbreviations, synonyms, stems ----------------------------------------------------------
def _search(client, world, instruction, q: str) -> dict:
    client.force_login(world[2])
    url = reverse("record_search", args=[instruction.pk])
    response = client.post(url, json.dumps({"q": q}), content_type="application/json")
    assert response.status_code == 200
    return response.json()


@pytest.mark.parametrize("q", ["HbA1c", "hba1c", "A1c", "diabetes", "diabetic"])
def test_search_finds_hemoglobin_a1c_under_its_abbreviation_and_condition(client, world, q):
    instruction = _instruction(world, DIABETIC)
    found = _search(client, world, instruction, q)
    assert found["html"].count("Hemoglobin A1c") >= 10, q


def test_search_for_chest_pain_finds_chest_discomfort(client, world):
    instruction = _instruction(world, DIABETIC)
    found = _search(client, world, instruction, "chest pain")
    assert found["count"] == 14  # the notes that say "chest discomfort"
    assert found["html"].count("<mark>chest discomfort</mark>") == 14
    assert found["concepts"] == [
        {"text": "chest pain", "also": ["chest discomfort", "thoracic pain"]}
    ]


def test_the_excerpt_finds_a1c_for_a_diabetes_question(client, world):
    instruction = _instruction(world, DIABETIC)
    html = _excerpt_html(client, world, instruction)
    assert "<mark>Hemoglobin A1c</mark>" in _section(html, "latest-values")
    assert '<mark>diabetic</mark> <span class="also">(also hemoglobin A1c, glucose)' in html


def test_no_stem_is_ever_shown(client, world):
    instruction = _instruction(world, "Summarize the imaging studies and medications")
    html = _excerpt_html(client, world, instruction)
    found = _search(client, world, instruction, "studies medications")
    shown = html + json.dumps(found["concepts"])
    for stem in ("studi", "medic", "imag", "summar"):
        assert not re.search(rf"\b{stem}\b", shown), stem
    assert [c["text"] for c in found["concepts"]] == ["studies", "medications"]


def test_abbreviations_expand_and_ordinary_words_do_not():
    [htn] = concepts("htn")
    assert "hypertension" in htn.also
    [hypertension] = concepts("hypertension")
    assert "HTN" in hypertension.also  # unambiguous: written back
    [cp] = concepts("CP")
    assert "chest pain" in cp.also
    [chest_pain] = concepts("chest pain")
    assert "CP" not in chest_pain.also  # CP is also cerebral palsy: never written back
    [mass] = concepts("mass")
    assert mass.also == ()  # an ordinary word, not the abbreviation MASS
    [dyspnea] = concepts("shortness of breath")
    assert "dyspnea" in dyspnea.also and dyspnea.text == "shortness of breath"


def test_bm25_counts_every_variant_of_a_concept():
    docs = [
        stemmed("creatinine normal"),
        stemmed("chest discomfort and troponin"),
        stemmed("HbA1c 8.1, glycated hemoglobin rising"),
        stemmed("follow up visit"),
    ]
    ranked = rank_concepts(concepts("Hemoglobin A1c and chest pain"), docs)
    assert [s.index for s in ranked] == [2, 1]


def test_highlight_marks_phrases_and_escapes_everything_else():
    html = highlight("<b>Chest discomfort</b> & chest, pain", concepts("chest pain"))
    assert (
        str(html)
        == "&lt;b&gt;<mark>Chest discomfort</mark>&lt;/b&gt; &amp; <mark>chest, pain</mark>"
    )
