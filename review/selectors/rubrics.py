"""Reads for rubric work: a clinician's rubrics to write, review and grade; a rubric with its
criteria; the grading page (responses masked and addressed by per-grading handles, as on the
review page; no model name reaches it); and the submitted grades, for analyses."""

from dataclasses import dataclass, field

from django.db.models import QuerySet

from review.blinding import mask_model_names
from review.models import (
    Criterion,
    CriterionGrade,
    CriterionGrading,
    Dataset,
    ReferenceResponse,
    Rubric,
    Study,
    User,
    response_label,
)
from review.selectors.drafts import grading_values
from review.selectors.reviews import masking_names
from review.selectors.studies import study_response_rows


@dataclass
class RubricWork:
    to_write: list[Rubric] = field(default_factory=list)  # draft or sent back, theirs to write
    to_review: list[Rubric] = field(default_factory=list)  # in review, theirs to review
    to_grade: list[CriterionGrading] = field(default_factory=list)  # not yet submitted
    graded: int = 0

    @property
    def total(self) -> int:
        return len(self.to_write) + len(self.to_review) + len(self.to_grade)


def clinician_rubric_work(user: User) -> RubricWork:
    """What a clinician is asked to do with rubrics: three short queries."""
    open_statuses = (Rubric.Status.DRAFT, Rubric.Status.SENT_BACK)
    gradings = CriterionGrading.objects.filter(clinician=user).select_related(
        "instruction", "rubric"
    )
    return RubricWork(
        to_write=list(
            Rubric.objects.filter(author=user, status__in=open_statuses)
            .select_related("instruction")
            .order_by("updated_at")
        ),
        to_review=list(
            Rubric.objects.filter(reviewer=user, status=Rubric.Status.IN_REVIEW)
            .select_related("instruction")
            .order_by("submitted_at")
        ),
        to_grade=list(gradings.exclude(status=CriterionGrading.Status.SUBMITTED)),
        graded=gradings.filter(status=CriterionGrading.Status.SUBMITTED).count(),
    )


def rubric_criteria(rubric: Rubric) -> list[Criterion]:
    return list(rubric.criteria.order_by("order", "id"))


def instruction_references(instruction_id: int) -> list[ReferenceResponse]:
    """The clinician reference answers: an author writes the rubric with them at hand."""
    return list(ReferenceResponse.objects.filter(instruction_id=instruction_id))


def rubrics_of(dataset: Dataset) -> QuerySet[Rubric]:
    """Every version of the dataset's rubrics, newest first per instruction (the admin page)."""
    return (
        Rubric.objects.filter(instruction__dataset=dataset)
        .select_related("instruction", "author", "reviewer")
        .order_by("instruction__instruction_id", "-version")
    )


def gradings_of(dataset: Dataset) -> QuerySet[CriterionGrading]:
    return (
        CriterionGrading.objects.filter(instruction__dataset=dataset)
        .select_related("instruction", "rubric", "clinician", "study")
        .order_by("instruction__instruction_id", "clinician__email")
    )


def studies_with(dataset: Dataset) -> QuerySet[Study]:
    return Study.objects.filter(dataset=dataset).order_by("-round")


@dataclass
class GradedResponse:
    handle: str
    label: str
    text: str
    masked: bool


@dataclass
class GradingPage:
    responses: list[GradedResponse]
    criteria: list[Criterion]
    values: dict[str, bool | None]


def grading_page_data(grading: CriterionGrading) -> GradingPage:
    """The responses in the grading's order (masked, by handle) and the current verdicts."""
    rows = {
        row[0]: row
        for row in study_response_rows(
            study_id=grading.study_id, instruction_id=grading.instruction_id
        )
    }
    # As on the review page: every model name of the dataset, this set's included.
    model_names = masking_names(grading.instruction.dataset_id, list(rows.values()))
    responses = []
    for position, (rid, handle) in enumerate(
        zip(grading.shown_order, grading.handles, strict=True)
    ):
        row = rows.get(int(rid))
        original = row[1] if row else ""
        text = mask_model_names(original, model_names)
        responses.append(
            GradedResponse(
                handle=handle, label=response_label(position), text=text, masked=text != original
            )
        )
    criteria = rubric_criteria(grading.rubric)
    values = grading_values(grading, criteria=[c.pk for c in criteria])
    return GradingPage(responses=responses, criteria=criteria, values=values)


@dataclass(frozen=True)
class GradeRow:
    """One submitted clinician verdict, with what analyses group by (model names included:
    for researchers' reports, never for clinicians' pages)."""

    clinician_id: int
    response_id: int
    model_name: str
    instruction_id: int
    rubric_id: int
    rubric_version: int
    criterion_id: int
    points: int
    tags: tuple[str, ...]
    met: bool | None


def submitted_grade_rows(
    *, dataset: Dataset, rubric_ids: list[int] | None = None
) -> list[GradeRow]:
    """Every submitted clinician grade of the dataset (rows exist only once a grading is
    submitted), optionally of some rubric versions only: one query."""
    qs = CriterionGrade.objects.filter(rubric__instruction__dataset=dataset)
    if rubric_ids is not None:
        qs = qs.filter(rubric_id__in=rubric_ids)
    return [
        GradeRow(
            clinician_id=row[0],
            response_id=row[1],
            model_name=row[2],
            instruction_id=row[3],
            rubric_id=row[4],
            rubric_version=row[5],
            criterion_id=row[6],
            points=row[7],
            tags=tuple(row[8] or ()),
            met=row[9],
        )
        for row in qs.order_by(
            "rubric_id", "response_id", "criterion_id", "clinician_id"
        ).values_list(
            "clinician_id",
            "response_id",
            "response__model_name",
            "rubric__instruction_id",
            "rubric_id",
            "rubric__version",
            "criterion_id",
            "criterion__points",
            "criterion__tags",
            "met",
        )
    ]
