"""Reads for adjudications: the adjudicator's queue and page, and an adjudication's current
values (submitted rows overlaid with the draft, as a review's are: ``review.selectors.drafts``).

The page shows the disagreeing clinicians as "Reviewer 1", "Reviewer 2"… in the adjudication's
own random order, never by name, pseudonym or id; the responses by the adjudication's handles
and labels, masked like the review page's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from review.blinding import mask_model_names
from review.models import (
    AdjudicatedJudgement,
    Adjudication,
    ErrorTag,
    ResponseJudgement,
    User,
    response_label,
)
from review.selectors.drafts import JUDGEMENT_FIELDS, Judged, draft_values
from review.selectors.reviews import (
    ResponseView,
    active_error_tags,
    error_tags,
    masking_names,
)
from review.selectors.studies import ResponseRow, study_response_rows


def adjudication_judgements(adjudication: Adjudication) -> list[AdjudicatedJudgement]:
    return list(AdjudicatedJudgement.objects.filter(adjudication=adjudication))


def adjudication_values(
    adjudication: Adjudication, judgements: list[AdjudicatedJudgement] | None = None
) -> tuple[dict[str, Judged], str]:
    """Each handle's current resolved judgement, and the reason."""
    if judgements is None:
        judgements = adjudication_judgements(adjudication) if adjudication.version else []
    by_response = {j.response_id: j for j in judgements}
    overlay = draft_values(adjudication)
    out: dict[str, Judged] = {}
    for handle, rid in zip(adjudication.handles, adjudication.shown_order, strict=True):
        row = by_response.get(int(rid))
        judged = Judged(
            rank=row.rank if row else None,
            is_correct=row.is_correct if row else None,
            tags=sorted(row.tags) if row else [],
            comment=row.comment if row else "",
        )
        for name in JUDGEMENT_FIELDS:
            key = f"{handle}.{name}"
            if key in overlay:
                setattr(judged, name, overlay[key])
        out[handle] = judged
    return out, str(overlay.get("reason", adjudication.reason))


@dataclass
class QueueRow:
    adjudication: Adjudication
    instruction_code: str
    question: str
    status: str  # "new" | "draft" | "submitted"
    reviews: int


def adjudicator_queue(user: User) -> list[QueueRow]:
    """The adjudicator's adjudications, open ones first (2 queries)."""
    rows = list(
        Adjudication.objects.filter(adjudicator=user)
        .select_related("instruction")
        .order_by("status", "created_at", "id")
    )
    through = Adjudication.reviews.through
    counts: dict[int, int] = {}
    for adjudication_id in through.objects.filter(
        adjudication__in=[a.pk for a in rows]
    ).values_list("adjudication_id", flat=True):
        counts[adjudication_id] = counts.get(adjudication_id, 0) + 1
    return [
        QueueRow(
            adjudication=a,
            instruction_code=a.instruction.instruction_id,
            question=a.instruction.question,
            status=(
                "submitted"
                if a.status == Adjudication.Status.SUBMITTED
                else "draft"
                if a.edited_at
                else "new"
            ),
            reviews=counts.get(a.pk, 0),
        )
        for a in rows
    ]


@dataclass
class ReviewerJudgement:
    reviewer: str  # "Reviewer 1"
    rank: int | None
    is_correct: bool | None
    tags: list[str]  # tag labels
    comment: str


@dataclass
class AdjudicationPage:
    responses: list[ResponseView]
    tags: list[ErrorTag]
    reviewers: list[str]
    # handle -> each reviewer's judgement of that response, in reviewer order
    judged_by: dict[str, list[ReviewerJudgement]] = field(default_factory=dict)
    reason: str = ""
    # Each reviewer's time of submission, for the adjudicator's context (no names).
    submitted: list[datetime | None] = field(default_factory=list)
    references: list[Any] = field(default_factory=list)
    cannot_assess: str = ""
    cannot_assess_note: str = ""


def adjudication_responses(adjudication: Adjudication) -> list[ResponseRow]:
    return study_response_rows(
        study_id=adjudication.study_id, instruction_id=adjudication.instruction_id
    )


def adjudication_page_data(
    adjudication: Adjudication, *, dataset_id: int, responses: list[ResponseRow]
) -> AdjudicationPage:
    """The responses in the adjudication's order with its current values, and every
    disagreeing reviewer's judgement of each, side by side (a fixed number of queries)."""
    by_id = {row[0]: row for row in responses}
    names = masking_names(dataset_id, responses)
    tags = active_error_tags()
    active = {t.slug for t in tags}
    label_of = {t.slug: t.label for t in error_tags()}
    values, reason = adjudication_values(adjudication)
    views = []
    for position, (rid, handle) in enumerate(
        zip((int(r) for r in adjudication.shown_order), adjudication.handles, strict=True)
    ):
        original = by_id[rid][1] if rid in by_id else ""
        text = mask_model_names(original, names)
        judged = values[handle]
        views.append(
            ResponseView(
                handle=handle,
                position=position,
                label=response_label(position),
                text=text,
                rank=judged.rank,
                is_correct=judged.is_correct,
                tag_slugs=[s for s in judged.tags if s in active],
                comment=judged.comment,
                masked=text != original,
            )
        )
    order = [int(r) for r in adjudication.reviewer_order]
    reviewers = [f"Reviewer {k + 1}" for k in range(len(order))]
    rows = ResponseJudgement.objects.filter(review_id__in=order).prefetch_related("error_tags")
    own: dict[tuple[int, int], ResponseJudgement] = {(j.review_id, j.response_id): j for j in rows}
    handle_of = {
        int(r): h for h, r in zip(adjudication.handles, adjudication.shown_order, strict=True)
    }
    judged_by: dict[str, list[ReviewerJudgement]] = {h: [] for h in adjudication.handles}
    for rid, handle in handle_of.items():
        for k, review_id in enumerate(order):
            j = own.get((review_id, rid))
            judged_by[handle].append(
                ReviewerJudgement(
                    reviewer=reviewers[k],
                    rank=j.rank if j else None,
                    is_correct=j.is_correct if j else None,
                    tags=[label_of.get(t.slug, t.slug) for t in j.error_tags.all()] if j else [],
                    comment=j.comment if j else "",
                )
            )
    return AdjudicationPage(
        responses=views, tags=tags, reviewers=reviewers, judged_by=judged_by, reason=reason
    )
