"""Demo rubrics for `load_demo`: the demo clinicians find rubric work of every kind."""

from review.demo.assignments import DEMO_CLINICIANS
from review.models import Dataset, Rubric, User
from review.selectors.studies import study_current
from review.services.grading import gradings_assign
from review.services.rubrics import (
    CriterionInput,
    rubric_accept,
    rubric_assign,
    rubric_save_criteria,
    rubric_submit,
)

# Generic enough for any instruction of the synthetic demo: what a clinician would ask of any
# answer grounded in a record.
DEMO_CRITERIA = [
    CriterionInput(
        "Answers the question with facts the record supports, with their dates.",
        7,
        ("axis:accuracy",),
    ),
    CriterionInput(
        "Says when the record lacks the information instead of guessing.",
        4,
        ("axis:completeness", "theme:hedging"),
    ),
    CriterionInput(
        "States a value, diagnosis or medication that is not in the record.",
        -8,
        ("axis:accuracy",),
    ),
]


def demo_rubrics(*, dataset_name: str) -> list[str]:
    """Two accepted rubrics with both demo clinicians asked to grade them, one rubric in review
    and one to write (idempotent: nothing is added once the dataset has rubrics)."""
    clinicians = list(User.objects.filter(email__in=DEMO_CLINICIANS).order_by("email"))
    dataset = Dataset.objects.filter(name=dataset_name).first()
    if len(clinicians) < 2 or dataset is None:
        return ["Demo rubrics skipped: no demo clinicians or dataset yet."]
    if Rubric.objects.filter(instruction__dataset=dataset).exists():
        return ["Demo rubrics: already there."]
    study = study_current(dataset)
    instructions = list(dataset.instructions.order_by("instruction_id")[:4])
    if study is None or len(instructions) < 4:
        return ["Demo rubrics skipped: the dataset has no study or too few instructions."]
    one, two = clinicians
    for i, instruction in enumerate(instructions[:2]):
        author, reviewer = (one, two) if i == 0 else (two, one)
        rubric = rubric_assign(
            instruction=instruction, author=author, reviewer=reviewer, actor=None
        )
        rubric_save_criteria(rubric=rubric, actor=author, criteria=DEMO_CRITERIA)
        rubric_submit(rubric=rubric, actor=author)
        rubric = rubric_accept(rubric=rubric, actor=reviewer)
        gradings_assign(rubric=rubric, study=study, clinicians=clinicians, actor=None)
    in_review = rubric_assign(instruction=instructions[2], author=one, reviewer=two, actor=None)
    rubric_save_criteria(rubric=in_review, actor=one, criteria=DEMO_CRITERIA[:2])
    rubric_submit(rubric=in_review, actor=one)
    rubric_assign(instruction=instructions[3], author=two, reviewer=one, actor=None)
    return [
        f"Demo rubrics: 2 accepted (graded by {one.email} and {two.email}), 1 in review by "
        f"{two.email}, 1 for {two.email} to write."
    ]
