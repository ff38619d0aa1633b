"""Reads for the clinician queue and the review page. Model names are never selected here."""

from dataclasses import dataclass, field
from datetime import datetime

from review.models import (
    Assignment,
    ErrorTag,
    ModelResponse,
    ReferenceResponse,
    ResponseJudgement,
    Review,
    User,
    response_label,
)

QUEUE_STATUSES = ("new", "draft", "submitted")


@dataclass
class QueueItem:
    assignment_id: int
    instruction_pk: int
    instruction_id: str
    question: str
    category: str
    subcategory: str
    specialty: str
    status: str  # "new" | "draft" | "submitted"
    updated_at: datetime | None
    # Set while an admin has reopened the review: their reason, for the clinician to read.
    reopen_reason: str = ""


@dataclass
class Queue:
    items: list[QueueItem]  # after the filters
    total: int  # before the filters
    done: int
    counts: dict[str, int] = field(default_factory=dict)
    categories: list[str] = field(default_factory=list)

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0


def _queue_status(review: Review | None) -> str:
    if review is None:
        return "new"
    return "submitted" if review.status == Review.Status.SUBMITTED else "draft"


def clinician_queue(user: User, *, status: str = "", category: str = "") -> Queue:
    """The clinician's assignments, one query whatever their number.

    Counts and categories are worked out from the same rows, so the progress bar always shows
    the whole queue while the list below follows the filters.
    """
    assignments = (
        Assignment.objects.filter(clinician=user)
        .select_related("instruction", "review")
        .only(
            "id",
            "instruction__id",
            "instruction__instruction_id",
            "instruction__question",
            "instruction__category",
            "instruction__subcategory",
            "instruction__specialty",
            "review__id",
            "review__status",
            "review__updated_at",
            "review__reopen_reason",
        )
        .order_by("id")
    )
    every = []
    for a in assignments:
        review = getattr(a, "review", None)
        every.append(
            QueueItem(
                assignment_id=a.pk,
                instruction_pk=a.instruction.pk,
                instruction_id=a.instruction.instruction_id,
                question=a.instruction.question,
                category=a.instruction.category,
                subcategory=a.instruction.subcategory,
                specialty=a.instruction.specialty,
                status=_queue_status(review),
                updated_at=review.updated_at if review else None,
                reopen_reason=(
                    review.reopen_reason
                    if review and review.status == Review.Status.REOPENED
                    else ""
                ),
            )
        )
    counts = {s: sum(1 for i in every if i.status == s) for s in QUEUE_STATUSES}
    items = [
        i
        for i in every
        if (not status or i.status == status) and (not category or i.category == category)
    ]
    return Queue(
        items=items,
        total=len(every),
        done=counts["submitted"],
        counts=counts,
        categories=sorted({i.category for i in every if i.category}),
    )


def clinician_has_assignments(user: User) -> bool:
    return Assignment.objects.filter(clinician=user).exists()


def clinician_next_instruction(user: User, *, after_assignment: int | None = None) -> int | None:
    """The instruction (pk) of the next unfinished assignment, in queue order.

    With ``after_assignment`` it is the first unfinished one after that assignment, wrapping
    around, so "next" from a review page moves forward through the queue.
    """
    rows = list(
        Assignment.objects.filter(clinician=user)
        .exclude(review__status=Review.Status.SUBMITTED)
        .order_by("id")
        .values_list("id", "instruction_id")
    )
    if after_assignment is not None:
        later = [r for r in rows if r[0] > after_assignment]
        rows = later + [r for r in rows if r[0] < after_assignment]
    return rows[0][1] if rows else None


@dataclass
class ResponseView:
    """One response as a clinician sees it: position, neutral label, text. No model name."""

    id: int
    position: int
    label: str
    text: str
    rank: int | None
    is_correct: bool | None
    tag_slugs: list[str]
    comment: str


@dataclass
class ReviewPage:
    responses: list[ResponseView]
    tags: list[ErrorTag]
    references: list[ReferenceResponse]


def review_page_data(review: Review, *, show_references: bool) -> ReviewPage:
    """Responses in the order shown with their judgements, the active tags, references if shown.

    A fixed number of queries (responses, judgements, their tags, tags, references), whatever
    the instruction or the record.
    """
    order = [int(rid) for rid in review.shown_order]
    texts = dict(ModelResponse.objects.filter(pk__in=order).order_by().values_list("id", "text"))
    tags = list(ErrorTag.objects.filter(is_active=True))
    active = {t.pk for t in tags}
    judgements = {
        j.response_id: j
        for j in ResponseJudgement.objects.filter(review=review).prefetch_related("error_tags")
    }
    responses = []
    for position, rid in enumerate(order):
        j = judgements.get(rid)
        responses.append(
            ResponseView(
                id=rid,
                position=position,
                label=response_label(position),
                text=texts.get(rid, ""),
                rank=j.rank if j else None,
                is_correct=j.is_correct if j else None,
                # Tags an admin has since retired are dropped: the next save would refuse them.
                tag_slugs=[t.slug for t in j.error_tags.all() if t.pk in active] if j else [],
                comment=j.comment if j else "",
            )
        )
    references = (
        list(ReferenceResponse.objects.filter(instruction_id=review.assignment.instruction_id))
        if show_references
        else []
    )
    return ReviewPage(responses=responses, tags=tags, references=references)
