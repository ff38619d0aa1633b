"""The review page's response cards, rendered in Python.

The cards were a template loop nested two deep (a rank option per response and an error-tag
checkbox per tag, for every response): with six responses and a dozen tags, some 8,000 template
nodes per page, the largest part of the page's Python CPU. The markup is
the same as the template wrote, byte for byte; every value that came from the database is
escaped exactly as Django's autoescape does (``html.escape``), and the text goes through Django's
own ``linebreaks``.
"""

from collections.abc import Mapping, Sequence
from datetime import date
from functools import lru_cache
from html import escape
from types import SimpleNamespace
from typing import Any

from django import template
from django.template import engines
from django.utils import timezone, translation
from django.utils.html import linebreaks
from django.utils.safestring import SafeString, mark_safe

from review.models import ErrorTag, Review
from review.selectors.adjudications import AdjudicationPage, ReviewerJudgement
from review.selectors.reviews import ResponseView, ReviewPage
from review.services.reviews import MAX_COMMENT_CHARS

register = template.Library()

_MASKED_NOTE = (
    '<p class="muted small masked-note">Words naming a model are masked as [model name].</p>'
)


@lru_cache(maxsize=64)
def _tag_inputs(tags: tuple[tuple[str, str, str], ...]) -> tuple[tuple[str, str, str], ...]:
    """Per tag: its slug and the checkbox's markup before and after the ``checked`` attribute.

    Tags change a few times a year; the markup around each box is the same on every card.
    """
    parts = []
    for slug, label, description in tags:
        before = f'<label><input type="checkbox" data-field="tags" value="{escape(slug)}"'
        described = f' aria-describedby="tagdef-{escape(slug)}"' if description else ""
        parts.append((slug, before, f"{described}> {escape(label)}</label>"))
    return tuple(parts)


def _count(text: str, limit: int) -> str:
    """ "120 / 5,000 characters": what review.js keeps up to date as the clinician types. No
    maxlength on the box: a browser silently cuts a paste at it; the page refuses instead."""
    return f"{len(text):,} / {limit:,} characters"


def _card(r: ResponseView, n: int, tags: tuple[tuple[str, str, str], ...], extra: str = "") -> str:
    handle, label = escape(r.handle), escape(r.label)
    options = "".join(
        f'<option value="{i}"{" selected" if r.rank == i else ""}>{i}</option>'
        for i in range(1, n + 1)
    )
    chosen = set(r.tag_slugs)
    boxes = "".join(
        f"{before}{' checked' if slug in chosen else ''}{after}" for slug, before, after in tags
    )
    count = f"({len(r.tag_slugs)})" if r.tag_slugs else ""
    return (
        f'\n    <article class="card response" data-handle="{handle}" tabindex="0" '
        f'aria-labelledby="label-{handle}" aria-describedby="keys-hint" data-testid="response">'
        f'\n      <header class="response-head">'
        f'\n        <h3 id="label-{handle}">Response {label}</h3>'
        f'\n        <label class="rank-pick">Rank'
        f'\n          <select name="rank" data-field="rank" aria-label="Rank of Response {label}">'
        f'\n            <option value="">–</option>'
        f"\n            {options}"
        f"\n          </select>"
        f"\n        </label>"
        f'\n        <span class="verdict" role="group" aria-label="Is Response {label} correct?">'
        f'\n          <button type="button" class="toggle ok" data-field="is_correct" '
        f'data-value="true" aria-pressed="{"true" if r.is_correct is True else "false"}">'
        f"Correct</button>"
        f'\n          <button type="button" class="toggle bad" data-field="is_correct" '
        f'data-value="false" aria-pressed="{"true" if r.is_correct is False else "false"}">'
        f"Incorrect</button>"
        f"\n        </span>"
        f'\n        <button type="button" class="button quiet small-button compare-pick" '
        f'data-compare aria-haspopup="dialog">Compare…</button>'
        f"\n      </header>"
        f"\n      {_MASKED_NOTE if r.masked else ''}"
        f'\n      <div class="response-text">{linebreaks(r.text, autoescape=True)}</div>{extra}'
        f'\n      <div class="response-foot">'
        f'\n        <details class="tags-box"{" open" if r.tag_slugs else ""}>'
        f'\n          <summary>Error tags <span class="tag-count" data-tag-count>{count}</span>'
        f"</summary>"
        f'\n          <fieldset class="tags">'
        f'\n            <legend class="visually-hidden">Errors in Response {label}</legend>'
        f"\n            {boxes}"
        f"\n          </fieldset>"
        f"\n        </details>"
        f'\n        <details class="comment-box"{" open" if r.comment else ""}>'
        f"\n          <summary>Comment</summary>"
        f'\n          <label for="comment-{handle}" class="visually-hidden">'
        f"Comment on Response {label}</label>"
        f'\n          <textarea id="comment-{handle}" data-field="comment" '
        f'data-max="{MAX_COMMENT_CHARS}" rows="4" aria-describedby="count-{handle}">'
        f"{escape(r.comment)}</textarea>"
        f'\n          <p class="char-count small" id="count-{handle}">'
        f"{_count(r.comment, MAX_COMMENT_CHARS)}</p>"
        f"\n        </details>"
        f"\n      </div>"
        f"\n    </article>"
        f"\n    "
    )


def response_cards_html(
    responses: Sequence[ResponseView],
    tags: Sequence[ErrorTag],
    extras: Mapping[str, SafeString] | None = None,
) -> SafeString:
    """Every response's card in the order shown: rank picker, verdict, text, tags, comment.
    ``extras`` (safe markup by handle) goes under a response's text: the adjudication page's
    other clinicians' judgements."""
    tag_parts = _tag_inputs(tuple((t.slug, t.label, t.description) for t in tags))
    n = len(responses)
    extra = extras or {}
    return mark_safe(  # noqa: S308 - escaped above; extras are SafeStrings
        "".join(_card(r, n, tag_parts, str(extra.get(r.handle, ""))) for r in responses)
    )


@register.simple_tag
def response_cards(page: ReviewPage) -> SafeString:
    return response_cards_html(page.responses, page.tags)


def _verdict(value: bool | None) -> str:
    return "not marked" if value is None else "correct" if value else "incorrect"


def _reviewers_html(label: str, judgements: Sequence[ReviewerJudgement]) -> str:
    """The other clinicians' judgements of one response, as a list (it stacks on a phone)."""
    items = []
    for j in judgements:
        rank = f"rank {j.rank}" if j.rank is not None else "not ranked"
        tags = f" · {escape(', '.join(j.tags))}" if j.tags else ""
        comment = f'<br><span class="muted">“{escape(j.comment)}”</span>' if j.comment else ""
        items.append(
            f"<li><strong>{escape(j.reviewer)}</strong>: {rank} · {_verdict(j.is_correct)}"
            f"{tags}{comment}</li>"
        )
    return (
        f'\n      <div class="reviewers" data-testid="reviewer-judgements">'
        f'<p class="small"><strong>The reviewers on Response {escape(label)}</strong></p>'
        f'<ul class="reviewer-list small">{"".join(items)}</ul></div>'
    )


@register.simple_tag
def adjudication_cards(page: AdjudicationPage) -> SafeString:
    """The adjudication page's cards: the review page's, each with the disagreeing
    clinicians' judgements of that response under its text."""
    extras = {
        r.handle: mark_safe(_reviewers_html(r.label, page.judged_by.get(r.handle, [])))  # noqa: S308
        for r in page.responses
    }
    return response_cards_html(page.responses, page.tags, extras)


# --- the rest of the page's loops (same reasoning: a few hundred template nodes per view) -------
@lru_cache(maxsize=16)
def _tag_definitions(tags: tuple[tuple[str, str, str], ...]) -> str:
    items = "".join(
        f'<dt>{escape(label)}</dt><dd id="tagdef-{escape(slug)}">{escape(description or "—")}</dd>'
        for slug, label, description in tags
    )
    return f"<dl>{items}</dl>"


@register.simple_tag
def tag_definitions(tags: Sequence[ErrorTag]) -> SafeString:
    """The error tags' definitions list (``<dl>``), the same for every page until a tag changes."""
    html = _tag_definitions(tuple((t.slug, t.label, t.description) for t in tags))
    return mark_safe(html)  # noqa: S308 - escaped above


@register.simple_tag
def cannot_assess_options(current: str) -> SafeString:
    """The cannot-assess reasons as ``<option>``s, the current one selected."""
    return mark_safe(  # noqa: S308 - escaped
        "".join(
            f'<option value="{escape(str(value))}"{" selected" if value == current else ""}>'
            f"{escape(str(label))}</option>"
            for value, label in Review.CannotAssess.choices
            if value
        )
    )


@register.simple_tag
def compare_columns(page: ReviewPage) -> SafeString:
    """The compare dialog's two columns, each a picker of every response."""
    options = "".join(
        f'<option value="{escape(r.handle)}">Response {escape(r.label)}</option>'
        for r in page.responses
    )
    columns = (
        f'<section>\n      <label for="compare-{side}" class="visually-hidden">{name} response'
        f'</label>\n      <select id="compare-{side}" data-compare-side>{options}</select>\n      '
        f'<div class="compare-text" id="compare-text-{side}"></div>\n    </section>'
        for side, name in (("L", "Left"), ("R", "Right"))
    )
    return mark_safe("".join(columns))  # noqa: S308 - escaped above


# --- the patient line: once per patient, language and timezone ---------------------------------
# Five filters (three dates, two numbers) for a line that changes only when the record is
# imported again, yet was worked out on every page view. The line is rendered by the template
# it replaces (kept here verbatim) the first time a patient's values are seen in a language and
# timezone, and reused while they stay the same, so its markup and escaping are the template's.
_PATIENT_FIELDS = (
    "person_id",
    "gender",
    "birth_date",
    "event_count",
    "note_count",
    "source_format",
    "first_event_at",
    "last_event_at",
)
_BIRTH_DATE = _PATIENT_FIELDS.index("birth_date")
_PATIENT_LINE = (
    "{% load humanize %}Patient {{ patient.person_id }}"
    "{% if patient.gender %} · {{ patient.gender|lower }}{% endif %}"
    '{% if patient.birth_date %} · born {{ patient.birth_date|date:"Y" }}{% endif %}'
    " · {{ patient.event_count|intcomma }} events, {{ patient.note_count|intcomma }} notes"
    '{% if patient.source_format == "meds" %} · MEDS record'
    '{% elif patient.source_format == "omop" %} · OMOP CDM record{% endif %}'
    '{% if patient.first_event_at %} · {{ patient.first_event_at|date:"M Y" }}'
    ' – {{ patient.last_event_at|date:"M Y" }}{% endif %}'
)


@lru_cache(maxsize=1)
def _patient_line_template() -> Any:
    return engines["django"].from_string(_PATIENT_LINE)


@lru_cache(maxsize=1024)
def _patient_line(values: tuple[Any, ...], language: str | None, zone: str) -> str:
    del language, zone  # part of the key: the filters read them from the thread
    patient = SimpleNamespace(**dict(zip(_PATIENT_FIELDS, values, strict=True)))
    return str(_patient_line_template().render({"patient": patient}))


@register.simple_tag
def patient_summary(patient: Any) -> SafeString:
    values = [getattr(patient, name) for name in _PATIENT_FIELDS]
    if values[_BIRTH_DATE] is not None:
        # The line shows the year of birth alone: the process keeps no more than that.
        values[_BIRTH_DATE] = date(values[_BIRTH_DATE].year, 1, 1)
    line = _patient_line(
        tuple(values), translation.get_language(), timezone.get_current_timezone_name()
    )
    return mark_safe(line)  # noqa: S308 - rendered by the template above, autoescape on
