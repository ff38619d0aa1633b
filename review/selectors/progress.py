"""Reads for the admins' progress pages: per dataset, each clinician's progress and each
instruction's reviews. A fixed number of queries whatever the size of the dataset."""

from dataclasses import dataclass, field
from datetime import datetime

from django.core.paginator import Page, Paginator
from django.db.models import Count, Max, Q

from review.models import Assignment, Dataset, Instruction, Review, Study, StudyResponse
from review.selectors.studies import study_label

INSTRUCTIONS_PER_PAGE = 50


@dataclass
class DatasetProgress:
    dataset: Dataset
    instructions: int
    assignments: int
    submitted: int

    @property
    def percent(self) -> int:
        return round(100 * self.submitted / self.assignments) if self.assignments else 0


def datasets_progress() -> list[DatasetProgress]:
    """Every dataset with its instruction, assignment and submitted-review counts (3 queries)."""
    datasets = list(Dataset.objects.order_by("name"))
    instructions = dict(
        Instruction.objects.values("dataset").annotate(n=Count("id")).values_list("dataset", "n")
    )
    assignments = {
        row["instruction__dataset"]: row
        for row in Assignment.objects.values("instruction__dataset").annotate(
            n=Count("id"),
            submitted=Count("id", filter=Q(review__status=Review.Status.SUBMITTED)),
        )
    }
    return [
        DatasetProgress(
            dataset=d,
            instructions=instructions.get(d.pk, 0),
            assignments=assignments.get(d.pk, {}).get("n", 0),
            submitted=assignments.get(d.pk, {}).get("submitted", 0),
        )
        for d in datasets
    ]


@dataclass
class ClinicianProgress:
    clinician_id: int
    email: str
    full_name: str
    assigned: int
    submitted: int
    in_progress: int  # draft or reopened
    reopened: int
    last_activity: datetime | None
    is_simulated: bool = False

    @property
    def not_started(self) -> int:
        return self.assigned - self.submitted - self.in_progress

    @property
    def percent(self) -> int:
        return round(100 * self.submitted / self.assigned) if self.assigned else 0


@dataclass
class ReviewRow:
    review_id: int | None  # None: assigned, never opened
    clinician_email: str
    status: str  # "new" | Review.Status
    submitted_at: datetime | None
    updated_at: datetime | None
    reopen_reason: str
    # The round the assignment belongs to: a clinician asked the instruction in two rounds
    # has a row in each, and the row says which.
    round: int = 0
    round_label: str = ""
    is_simulated: bool = False

    @property
    def can_reopen(self) -> bool:
        return self.status == Review.Status.SUBMITTED


@dataclass
class InstructionRow:
    pk: int
    instruction_id: str
    question: str
    category: str
    specialty: str
    reviews: list[ReviewRow] = field(default_factory=list)

    @property
    def submitted(self) -> int:
        return sum(1 for r in self.reviews if r.status == Review.Status.SUBMITTED)


@dataclass
class DatasetDetail:
    clinicians: list[ClinicianProgress]
    instructions: list[InstructionRow]
    page: Page


# Opening a review creates it (its order is drawn then) but is not work: a draft counts as in
# progress from its first edit, as the clinician's queue counts it (selectors.reviews).
_WORKED_ON = Q(review__status=Review.Status.REOPENED) | Q(
    review__status=Review.Status.DRAFT, review__edited_at__isnull=False
)


def clinicians_progress(dataset: Dataset, *, study: Study | None = None) -> list[ClinicianProgress]:
    """One row per clinician with assignments in ``dataset`` (in ``study`` alone if given):
    one query, grouped in SQL."""
    assignments = Assignment.objects.filter(instruction__dataset=dataset)
    if study is not None:
        assignments = assignments.filter(study=study)
    rows = (
        assignments.values(
            "clinician_id", "clinician__email", "clinician__full_name", "clinician__is_simulated"
        )
        .annotate(
            assigned=Count("id"),
            submitted=Count("id", filter=Q(review__status=Review.Status.SUBMITTED)),
            in_progress=Count("id", filter=_WORKED_ON),
            reopened=Count("id", filter=Q(review__status=Review.Status.REOPENED)),
            last_activity=Max("review__updated_at"),
        )
        .order_by("clinician__email")
    )
    return [
        ClinicianProgress(
            clinician_id=r["clinician_id"],
            email=r["clinician__email"],
            full_name=r["clinician__full_name"],
            assigned=r["assigned"],
            submitted=r["submitted"],
            in_progress=r["in_progress"],
            reopened=r["reopened"],
            last_activity=r["last_activity"],
            is_simulated=r["clinician__is_simulated"],
        )
        for r in rows
    ]


def _row_status(review: Review | None) -> str:
    if review is None or (review.status == Review.Status.DRAFT and review.edited_at is None):
        return "new"
    return str(review.status)


def _status_q(status: str) -> Q | None:
    """Assignments whose review is in ``status`` ("new", "draft", "reopened", "submitted"), as
    the clinician's queue counts them; None for any other value (no filter)."""
    if status == "new":
        return Q(review__isnull=True) | Q(
            review__status=Review.Status.DRAFT, review__edited_at__isnull=True
        )
    if status == Review.Status.DRAFT:
        return Q(review__status=Review.Status.DRAFT, review__edited_at__isnull=False)
    if status in Review.Status.values:
        return Q(review__status=status)
    return None


def dataset_progress_detail(
    dataset: Dataset,
    *,
    page_number: int | str = 1,
    status: str = "",
    study: Study | None = None,
) -> DatasetDetail:
    """Clinicians' progress and one page of instructions with their reviews (4 queries).

    ``status`` ("submitted", "reopened", "draft", "new") keeps only instructions that have a
    review in that state, so an admin looking for something to reopen finds it on page one.
    ``study`` keeps one round: its instructions (in its response set or assigned in it), its
    assignments, and the clinicians' counts in it.
    """
    clinicians = clinicians_progress(dataset, study=study)
    assignments_in = Assignment.objects.filter(instruction__dataset=dataset)
    if study is not None:
        assignments_in = assignments_in.filter(study=study)
    instructions = Instruction.objects.filter(dataset=dataset).order_by("pk")
    status_q = _status_q(status)
    if status_q is not None:
        # One subquery over the assignments: the state and the round hold for the same
        # assignment, not for two different ones of the instruction.
        instructions = instructions.filter(
            pk__in=assignments_in.filter(status_q).values("instruction_id")
        )
    elif study is not None:
        instructions = instructions.filter(
            Q(pk__in=assignments_in.values("instruction_id"))
            | Q(pk__in=StudyResponse.objects.filter(study=study).values("instruction_id"))
        )
    instructions = instructions.only("id", "instruction_id", "question", "category", "specialty")
    page = Paginator(instructions, INSTRUCTIONS_PER_PAGE).get_page(page_number)
    rows = {
        i.pk: InstructionRow(
            pk=i.pk,
            instruction_id=i.instruction_id,
            question=i.question,
            category=i.category,
            specialty=i.specialty,
        )
        for i in page.object_list
    }
    assignments = Assignment.objects.filter(instruction_id__in=list(rows))
    if study is not None:
        assignments = assignments.filter(study=study)
    assignments = (
        assignments.select_related("clinician", "review", "study")
        .only(
            "id",
            "instruction_id",
            "clinician__email",
            "clinician__is_simulated",
            "study__round",
            "study__name",
            "review__id",
            "review__status",
            "review__submitted_at",
            "review__updated_at",
            "review__reopen_reason",
            "review__edited_at",
        )
        .order_by("instruction_id", "study__round", "clinician__email")
    )
    for a in assignments:
        review = getattr(a, "review", None)
        rows[a.instruction_id].reviews.append(
            ReviewRow(
                review_id=review.pk if review else None,
                clinician_email=a.clinician.email,
                status=_row_status(review),
                submitted_at=review.submitted_at if review else None,
                updated_at=review.updated_at if review else None,
                reopen_reason=review.reopen_reason if review else "",
                round=a.study.round,
                round_label=study_label(a.study.round, a.study.name),
                is_simulated=a.clinician.is_simulated,
            )
        )
    return DatasetDetail(clinicians=clinicians, instructions=list(rows.values()), page=page)
