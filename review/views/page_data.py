"""What review.js reads on both pages it drives (the review page and the adjudication page):
each response's handle, label and current values, and the record's endpoints. Nothing here
names a model or carries a database id of a response."""

from collections.abc import Iterable
from typing import Any

from django.urls import reverse

from review.models import Instruction


def response_data(responses: Iterable[Any]) -> list[dict[str, Any]]:
    """One entry per shown response, in the page's order."""
    return [
        {
            "handle": r.handle,
            "position": r.position,
            "label": r.label,
            "rank": r.rank,
            "is_correct": r.is_correct,
            "tags": r.tag_slugs,
            "comment": r.comment,
            "preview": r.preview,
        }
        for r in responses
    ]


def record_urls(instruction: Instruction) -> dict[str, str]:
    """The record panel's endpoints; none for an instruction without a patient record."""
    if instruction.patient_id is None:
        return {}
    return {
        "excerpt": reverse("record_excerpt", args=[instruction.pk]),
        "events": reverse("record_events", args=[instruction.pk]),
        "search": reverse("record_search", args=[instruction.pk]),
    }
