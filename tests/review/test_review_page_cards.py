"""The review page's response cards (rendered in Python: review_page.py) show every saved value
and escape everything that came from an import or a clinician."""

import json
import time
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from review.models import ErrorTag, ModelResponse, Review, Role
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


class _Cards(HTMLParser):
    """Each card's controls as the browser would see them: {handle: {...}}."""

    def __init__(self) -> None:
        super().__init__()
        self.cards: dict[str, dict] = {}
        self.card: dict | None = None
        self.in_text = self.in_comment = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "article" and "data-handle" in a:
            self.card = {"rank": None, "verdict": {}, "tags": [], "text": "", "comment": ""}
            self.card["open"] = []
            self.cards[a["data-handle"]] = self.card
        if self.card is None:
            return
        if tag == "option" and "selected" in a:
            self.card["rank"] = a["value"]
        elif tag == "button" and a.get("data-field") == "is_correct":
            self.card["verdict"][a["data-value"]] = a["aria-pressed"]
        elif tag == "input" and a.get("data-field") == "tags" and "checked" in a:
            self.card["tags"].append(a["value"])
        elif tag == "details" and "open" in a:
            self.card["open"].append(a["class"])
        elif tag == "div" and a.get("class") == "response-text":
            self.in_text = True
        elif tag == "textarea" and a.get("data-field") == "comment":
            self.in_comment = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            self.in_text = False
        if tag == "textarea":
            self.in_comment = False
        if tag == "article":
            self.card = None

    def handle_data(self, data: str) -> None:
        if self.card is not None and self.in_text:
            self.card["text"] += data
        if self.card is not None and self.in_comment:
            self.card["comment"] += data


@pytest.fixture
def world(client):
    dataset = review_data.make_dataset()
    patient = review_data.make_record(dataset, "P-CARDS", n_events=40)
    instruction = review_data.make_instruction(dataset, patient, "I-CARDS", n_responses=3)
    hostile = ModelResponse.objects.filter(instruction=instruction).order_by("pk").first()
    hostile.text = '<script>alert(1)</script> & "first"\n\nsecond paragraph'
    hostile.save()
    ErrorTag.objects.create(slug="odd-tag", label="<b>Odd</b> & tag", order=99)
    clinician = factories.make_user("cards@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    factories.sign_in(client, clinician)
    return instruction, hostile


def _page(client, instruction) -> str:
    answer = client.get(reverse("clinician_review", args=[instruction.pk]))
    assert answer.status_code == 200
    return answer.content.decode()


def test_cards_show_the_draft_and_escape_what_came_from_outside(client, world):
    instruction, hostile = world
    _page(client, instruction)
    review = Review.objects.get(assignment__instruction=instruction)
    first, second, third = review.handles
    at = int(time.time() * 1000)
    edits = [
        {"handle": first, "field": "rank", "value": 2, "at": at},
        {"handle": first, "field": "tags", "value": ["odd-tag", "omission"], "at": at},
        {"handle": second, "field": "is_correct", "value": False, "at": at},
        {"handle": second, "field": "comment", "value": "</textarea><b>x</b> & y", "at": at},
        {"handle": third, "field": "is_correct", "value": True, "at": at},
    ]
    saved = client.post(
        reverse("review_save", args=[review.pk]),
        json.dumps({"edits": edits, "tab": "t"}),
        content_type="application/json",
        headers={"Accept": "application/json"},
    )
    assert saved.status_code == 200, saved.content

    html = _page(client, instruction)
    assert "<script>alert" not in html and "<b>Odd</b>" not in html and "</textarea><b>" not in html
    assert "&lt;b&gt;Odd&lt;/b&gt; &amp; tag" in html
    parser = _Cards()
    parser.feed(html)
    cards = parser.cards
    assert list(cards) == review.handles  # in the order shown
    assert cards[first]["rank"] == "2" and sorted(cards[first]["tags"]) == ["odd-tag", "omission"]
    assert cards[first]["open"] == ["tags-box"]
    assert cards[second]["verdict"] == {"true": "false", "false": "true"}
    assert cards[second]["comment"] == "</textarea><b>x</b> & y"  # escaped, read back whole
    assert cards[second]["open"] == ["comment-box"]
    assert cards[third]["verdict"] == {"true": "true", "false": "false"}
    assert cards[third]["rank"] is None and cards[third]["tags"] == []
    shown = cards[review.handles[[int(x) for x in review.shown_order].index(hostile.pk)]]
    assert '<script>alert(1)</script> & "first"' in shown["text"]
    assert "second paragraph" in shown["text"]
    # One rank option per response, on every card.
    assert html.count('<option value="3"') == 3 and '<option value="4"' not in html


# --- the page's other loops, rendered by tags: the markup the template loops wrote --------------
# The template text these tags replaced, verbatim: each tag must write exactly what it did.
_TAG_DEFINITIONS_LOOP = (
    '<dl>{% for tag in page.tags %}<dt>{{ tag.label }}</dt><dd id="tagdef-{{ tag.slug }}">'
    '{{ tag.description|default:"—" }}</dd>{% endfor %}</dl>'
)
_CANNOT_ASSESS_LOOP = (
    '{% for value, label in cannot_assess_choices %}<option value="{{ value }}"'
    "{% if value == page.cannot_assess %} selected{% endif %}>{{ label }}</option>{% endfor %}"
)
_COMPARE_LOOP = """{% for side in "LR" %}<section>
      <label for="compare-{{ side }}" class="visually-hidden">{% if side == "L" %}Left{% else %}Right{% endif %} response</label>
      <select id="compare-{{ side }}" data-compare-side>{% for r in page.responses %}<option value="{{ r.handle }}">Response {{ r.label }}</option>{% endfor %}</select>
      <div class="compare-text" id="compare-text-{{ side }}"></div>
    </section>{% endfor %}"""  # noqa: E501 - the template's own lines


@pytest.mark.parametrize("reason", ["", "not_enough_information", "other"])
def test_the_page_tags_write_what_the_template_loops_wrote(reason):
    from types import SimpleNamespace

    from django.template import engines

    from review.selectors.reviews import ResponseView

    tags = [
        ErrorTag(slug="omission", label="Omits <key> facts", description='Says "none" & more'),
        ErrorTag(slug="bare", label="No description", description=""),
    ]
    responses = [
        ResponseView(
            handle=h,
            position=i,
            label=lab,
            text="",
            rank=None,
            is_correct=None,
            tag_slugs=[],
            comment="",
            masked=False,
        )
        for i, (h, lab) in enumerate([("aB3<x>", "A"), ("q&9", "B"), ("zz", "C")])
    ]
    page = SimpleNamespace(tags=tags, responses=responses, cannot_assess=reason)
    engine = engines["django"]
    context = {
        "page": page,
        "cannot_assess_choices": [c for c in Review.CannotAssess.choices if c[0]],
    }

    def render(source: str) -> str:
        return engine.from_string("{% load review_page %}" + source).render(context)

    assert render("{% tag_definitions page.tags %}") == render(_TAG_DEFINITIONS_LOOP)
    assert render("{% cannot_assess_options page.cannot_assess %}") == render(_CANNOT_ASSESS_LOOP)
    assert render("{% compare_columns page %}") == render(_COMPARE_LOOP)
    assert "&lt;key&gt;" in render("{% tag_definitions page.tags %}")  # escaped, not raw


_PATIENT_LINE = """{% load humanize %}Patient {{ patient.person_id }}{% if patient.gender %} · {{ patient.gender|lower }}{% endif %}{% if patient.birth_date %} · born {{ patient.birth_date|date:"Y" }}{% endif %} · {{ patient.event_count|intcomma }} events, {{ patient.note_count|intcomma }} notes{% if patient.source_format == "meds" %} · MEDS record{% elif patient.source_format == "omop" %} · OMOP CDM record{% endif %}{% if patient.first_event_at %} · {{ patient.first_event_at|date:"M Y" }} – {{ patient.last_event_at|date:"M Y" }}{% endif %}"""  # noqa: E501 - the template's own line


def test_the_patient_line_is_what_the_template_wrote_and_follows_the_timezone():
    from datetime import UTC, date, datetime

    from django.template import engines
    from django.utils import timezone

    from review.models import Patient

    engine = engines["django"]
    patients = [
        Patient(
            person_id="P<1>&2",
            gender="FEMALE",
            birth_date=date(1950, 3, 1),
            event_count=1234567,
            note_count=89,
            source_format="meds",
            first_event_at=datetime(2020, 1, 31, 23, 30, tzinfo=UTC),
            last_event_at=datetime(2024, 12, 31, 23, 30, tzinfo=UTC),
        ),
        Patient(person_id="P2", source_format="omop", event_count=0, note_count=0),
        Patient(person_id="P3", gender="x", source_format="record", event_count=5, note_count=1),
    ]
    for zone in ("UTC", "Pacific/Kiritimati"):  # +14:00: the last day of a month moves on
        with timezone.override(zone):
            for patient in patients:
                context = {"patient": patient}
                expected = engine.from_string(_PATIENT_LINE).render(context)
                got = engine.from_string(
                    "{% load review_page %}{% patient_summary patient %}"
                ).render(context)
                assert got == expected
                got_again = engine.from_string(
                    "{% load review_page %}{% patient_summary patient %}"
                ).render(context)
                assert got_again == expected
    with timezone.override("Pacific/Kiritimati"):
        line = engine.from_string("{% load review_page %}{% patient_summary patient %}").render(
            {"patient": patients[0]}
        )
    assert "P&lt;1&gt;&amp;2" in line and "1,234,567 events" in line
    assert "Feb 2020 – Jan 2025" in line  # in the viewer's timezone, not UTC's
