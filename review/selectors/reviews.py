"""Reads for the clinician queue and the review page.

Model names never leave this module: they are read only to mask a response that names its own
model, and the page addresses responses by per-review handles, never by database ids.
"""

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from review.blinding import mask_model_names, model_name_hits
from review.models import (
    Assignment,
    ErrorTag,
    ReferenceResponse,
    Review,
    User,
    response_label,
)
from review.selectors.datasets import dataset_model_names
from review.selectors.drafts import review_values
from review.selectors.studies import ResponseRow, clinician_round_label, study_response_rows

QUEUE_STATUSES = ("new", "draft", "reopened", "submitted")


@dataclass
class QueueItem:
    assignment_id: int
    instruction_pk: int
    instruction_id: str
    question: str
    category: str
    subcategory: str
    specialty: str
    status: str  # "new" | "draft" | "reopened" | "submitted"
    updated_at: datetime | None
    # Set while an admin has reopened the review: their reason, for the clinician to read.
    reopen_reason: str = ""
    study_id: int | None = None
    # Set where the clinician is asked the same instruction in several rounds: the row names its
    # round and its link carries ``?study=`` (without it the page opens the latest round).
    round_label: str = ""
    # A calibration item (open: the clinician gets feedback on it). A gold item is blind and
    # reads as any other row.
    calibration: bool = False


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
    # Opening a review starts it but is not work: only the first edit makes it "in progress".
    if review is None or (review.status == Review.Status.DRAFT and review.edited_at is None):
        return "new"
    if review.status == Review.Status.REOPENED:
        return "reopened"  # its own filter: work an admin sent back, with their reason
    return "submitted" if review.status == Review.Status.SUBMITTED else "draft"


def clinician_reopen_reason(reason: str, dataset_id: int) -> str:
    """An admin's reason for reopening, as the clinician reads it: what it says of a model
    ("the Atlas-70B answer") masked against the dataset's names, as responses are."""
    return mask_model_names(reason, dataset_model_names(dataset_id)) if reason else ""


def reopen_reason_hits(reason: str, dataset_id: int) -> list[str]:
    """The words of a reopen reason that name a model, as typed: what the admin is warned of."""
    return list(dict.fromkeys(model_name_hits(reason, dataset_model_names(dataset_id))))


def clinician_queue(user: User, *, status: str = "", category: str = "") -> Queue:
    """The clinician's assignments, one query whatever their number.

    Counts and categories are worked out from the same rows, so the progress bar always shows
    the whole queue while the list below follows the filters.
    """
    assignments = (
        Assignment.objects.filter(clinician=user)
        .select_related("instruction", "review", "study")
        .only(
            "id",
            "instruction__id",
            "instruction__instruction_id",
            "instruction__question",
            "instruction__category",
            "instruction__subcategory",
            "instruction__specialty",
            "instruction__dataset",
            "review__id",
            "review__status",
            "review__updated_at",
            "review__edited_at",
            "review__reopen_reason",
            "study__id",
            "study__round",
            "purpose",
        )
        .order_by("id")
    )
    per_instruction = Counter(a.instruction_id for a in assignments)
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
                    clinician_reopen_reason(review.reopen_reason, a.instruction.dataset_id)
                    if review and review.status == Review.Status.REOPENED
                    else ""
                ),
                study_id=a.study_id,
                round_label=(
                    clinician_round_label(a.study.round)
                    if per_instruction[a.instruction_id] > 1 and a.study is not None
                    else ""
                ),
                calibration=a.purpose == Assignment.Purpose.CALIBRATION,
            )
        )
    # Calibration first: a new clinician calibrates before their other work.
    every.sort(key=lambda item: not item.calibration)
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


def clinician_next_instruction(
    user: User, *, after_assignment: int | None = None
) -> tuple[int, int | None] | None:
    """The instruction (pk) of the next unfinished assignment, in queue order, with its study's
    id where the clinician holds that instruction in several rounds (else None: the page's
    default, the latest round, is the right one).

    With ``after_assignment`` it is the first unfinished one after that assignment, wrapping
    around, so "next" from a review page moves forward through the queue.
    """
    every = list(
        Assignment.objects.filter(clinician=user)
        .order_by("id")
        .values_list("id", "instruction_id", "study_id", "review__status", "purpose")
    )
    # Calibration first, as the queue lists it; then by id.
    every.sort(key=lambda row: row[4] != Assignment.Purpose.CALIBRATION)
    place = {row[0]: k for k, row in enumerate(every)}
    held = Counter(row[1] for row in every)
    rows = [r for r in every if r[3] != Review.Status.SUBMITTED]
    if after_assignment is not None:
        here = place.get(after_assignment)
        if here is None:
            later = [r for r in rows if r[0] > after_assignment]
            rows = later + [r for r in rows if r[0] < after_assignment]
        else:
            rows = [r for r in rows if place[r[0]] > here] + [r for r in rows if place[r[0]] < here]
    if not rows:
        return None
    _, instruction_id, study_id, _, _ = rows[0]
    return instruction_id, (study_id if held[instruction_id] > 1 else None)


PREVIEW_WORDS = 8
PREVIEW_CHARS = 80


def response_preview(text: str) -> str:
    """A response's first words, naming it in the ranking summary: at most ``PREVIEW_WORDS``
    words and ``PREVIEW_CHARS`` characters, so one unbroken run of model output (10,000 digits)
    is never copied whole into the page's data."""
    words = " ".join(text.split(None, PREVIEW_WORDS)[:PREVIEW_WORDS])
    if len(words) <= PREVIEW_CHARS:
        return words
    return words[: PREVIEW_CHARS - 1].rstrip() + "…"


@dataclass
class ResponseView:
    """One response as a clinician sees it: handle, neutral label, text. No model name, no id."""

    handle: str
    position: int
    label: str
    text: str
    rank: int | None
    is_correct: bool | None
    tag_slugs: list[str]
    comment: str
    masked: bool  # the text named a model, and those words are masked

    @property
    def preview(self) -> str:
        return response_preview(self.text)


@dataclass
class ReviewPage:
    responses: list[ResponseView]
    tags: list[ErrorTag]
    references: list[ReferenceResponse]
    cannot_assess: str
    cannot_assess_note: str


_tags_cache: tuple[float, list[ErrorTag]] = (0.0, [])
TAGS_CACHE_SECONDS = 30.0


def error_tags() -> list[ErrorTag]:
    """Every error tag, in order (retired ones included: submitted judgements keep theirs).

    Admins change tags a few times a year, yet the page and every save and submit need them: each
    process reads them at most every half minute, and at once after a change it made itself
    (``review.receivers``). Another process's change shows within the half minute, which only
    delays a new tag's first use; a retired tag is refused by the next save after that.
    """
    global _tags_cache
    loaded_at, tags = _tags_cache
    if not tags or time.monotonic() - loaded_at > TAGS_CACHE_SECONDS:
        tags = list(ErrorTag.objects.all())
        _tags_cache = (time.monotonic(), tags)
    return tags


def active_error_tags() -> list[ErrorTag]:
    return [t for t in error_tags() if t.is_active]


def error_tags_forget() -> None:
    global _tags_cache
    _tags_cache = (0.0, [])


def masking_names(dataset_id: int, responses: list[ResponseRow]) -> tuple[str, ...]:
    """What a clinician page masks its responses against: the dataset's model names and those
    of the responses it shows; the same tuple on every page of the dataset once read."""
    names = dataset_model_names(dataset_id)
    own = {row[2] for row in responses}
    return names if own <= set(names) else tuple(sorted(own.union(names)))


def instruction_responses(*, study_id: int, instruction_id: int) -> list[ResponseRow]:
    """The responses the instruction is reviewed with in the study, as (id, text, model name):
    one statement. The review page reads them first, so a first open draws its order from the
    same rows (``review_get_or_start(response_ids=...)``) instead of a query of its own."""
    return study_response_rows(study_id=study_id, instruction_id=instruction_id)


def review_page_data(
    review: Review, *, dataset_id: int, show_references: bool, responses: list[ResponseRow]
) -> ReviewPage:
    """Responses in the order shown with their current judgements (submitted values overlaid
    with the draft), the active tags, and references if shown.

    A fixed number of queries (judgements and their tags once saved, references if shown; the
    responses come from the caller, the tags and the dataset's model names from the process's
    copy), whatever the instruction or the record.
    """
    order = [int(rid) for rid in review.shown_order]
    # ``responses`` are the instruction's set in the review's study (``instruction_responses``):
    # the ones its reviews show, since a review's order is drawn from them and the set is
    # frozen once one has started.
    responses_by_id = {row[0]: row for row in responses}
    # Every response is masked, flagged at import or not, against the families and makers
    # ``review.blinding`` knows and every model of the dataset: a response may name another
    # model than its own ("Unlike Atlas-13B…"). This set's own names are added in case the
    # process's copy of the dataset's predates them.
    model_names = masking_names(dataset_id, responses)
    tags = active_error_tags()
    active = {t.slug for t in tags}
    values, reason, note = review_values(review)
    views = []
    for position, (rid, handle) in enumerate(zip(order, review.handles, strict=True)):
        row = responses_by_id.get(rid)
        original = row[1] if row else ""
        text = mask_model_names(original, model_names)
        masked = text != original
        judged = values[handle]
        views.append(
            ResponseView(
                handle=handle,
                position=position,
                label=response_label(position),
                text=text,
                rank=judged.rank,
                is_correct=judged.is_correct,
                # Tags an admin has since retired are dropped: the next save would refuse them.
                tag_slugs=[slug for slug in judged.tags if slug in active],
                comment=judged.comment,
                masked=masked,
            )
        )
    references = (
        list(ReferenceResponse.objects.filter(instruction_id=review.assignment.instruction_id))
        if show_references
        else []
    )
    return ReviewPage(
        responses=views,
        tags=tags,
        references=references,
        cannot_assess=reason,
        cannot_assess_note=note,
    )
