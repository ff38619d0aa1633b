"""What a review or a grading holds now: its submitted rows overlaid with its draft.

The page shows these values, autosave answers with them and submit checks them, so the merge
rule lives in one place that selectors and services both read.
"""

from dataclasses import dataclass
from typing import Any

from medalign_site.prepared import PreparedQuery
from review.models import Adjudication, CriterionGrade, CriterionGrading, ResponseJudgement, Review

JUDGEMENT_FIELDS = ("rank", "is_correct", "tags", "comment")


def draft_values(review: Review | Adjudication) -> dict[str, Any]:
    """The draft's current values by key, without their times: what the page overlays."""
    return {key: pair[0] for key, pair in review.draft.get("fields", {}).items()}


@dataclass
class Judged:
    rank: int | None
    is_correct: bool | None
    tags: list[str]
    comment: str


_JUDGEMENTS: PreparedQuery[ResponseJudgement] = PreparedQuery(
    lambda p: ResponseJudgement.objects.filter(review_id=p.review_id),
    params=("review_id",),
)
_JUDGEMENT_TAGS: PreparedQuery[tuple[int, str]] = PreparedQuery(
    lambda p: ResponseJudgement.error_tags.through.objects.filter(
        responsejudgement__review_id=p.review_id
    ).values_list("responsejudgement_id", "errortag__slug"),
    params=("review_id",),
)


def review_judgements(review: Review) -> list[ResponseJudgement]:
    """The review's judgement rows, each with ``tag_slugs``: one query, two when there are
    rows (none before the first submit)."""
    rows = _JUDGEMENTS.all(review_id=review.pk)
    if rows:
        slugs: dict[int, list[str]] = {}
        for judgement_id, slug in _JUDGEMENT_TAGS.all(review_id=review.pk):
            slugs.setdefault(judgement_id, []).append(slug)
        for row in rows:
            row.tag_slugs = slugs.get(row.pk, [])
    return rows


def review_values(
    review: Review, judgements: list[ResponseJudgement] | None = None
) -> tuple[dict[str, Judged], str, str]:
    """Each handle's current judgement (submitted rows overlaid with the draft), and the
    review's cannot-assess reason and note."""
    if judgements is None:
        # Rows are written at submit; a review never saved (version 0: every save, submit and
        # reopening bumps it) has none worth reading.
        judgements = review_judgements(review) if review.version else []
    by_response = {j.response_id: j for j in judgements}
    overlay = draft_values(review)
    out: dict[str, Judged] = {}
    for handle, rid in zip(review.handles, review.shown_order, strict=True):
        row = by_response.get(int(rid))
        judged = Judged(
            rank=row.rank if row else None,
            is_correct=row.is_correct if row else None,
            tags=sorted(row.tag_slugs) if row else [],
            comment=row.comment if row else "",
        )
        for field in JUDGEMENT_FIELDS:
            key = f"{handle}.{field}"
            if key in overlay:
                setattr(judged, field, overlay[key])
        out[handle] = judged
    reason = overlay.get("cannot_assess", review.cannot_assess)
    note = overlay.get("cannot_assess_note", review.cannot_assess_note)
    return out, reason, note


def criterion_ids(grading: CriterionGrading) -> list[int]:
    """The rubric version's criteria, in order: fixed once accepted."""
    return list(grading.rubric.criteria.order_by("order", "id").values_list("id", flat=True))


def grading_values(
    grading: CriterionGrading, *, criteria: list[int] | None = None
) -> dict[str, bool | None]:
    """Every "<handle>.c<criterion id>" with its current verdict: submitted rows overlaid with
    the draft, None where nothing is marked."""
    criteria = criteria if criteria is not None else criterion_ids(grading)
    handle_of = {int(rid): h for h, rid in zip(grading.handles, grading.shown_order, strict=True)}
    values: dict[str, bool | None] = {
        f"{h}.c{cid}": None for h in grading.handles for cid in criteria
    }
    if grading.status == CriterionGrading.Status.SUBMITTED:  # rows exist only once submitted
        for rid, cid, met in CriterionGrade.objects.filter(grading=grading).values_list(
            "response_id", "criterion_id", "met"
        ):
            if rid in handle_of:
                values[f"{handle_of[rid]}.c{cid}"] = met
    for key, (value, _at) in grading.draft.get("fields", {}).items():
        if key in values:
            values[key] = value
    return values
