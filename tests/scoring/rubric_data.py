"""Rubric fixtures for the grading tests: accepted rubrics, clinicians' submitted grades."""

from __future__ import annotations

from review.models import (
    CriterionGrade,
    CriterionGrading,
    Dataset,
    Instruction,
    ModelResponse,
    Role,
    Rubric,
    Study,
    User,
)
from review.services import grading as grading_services
from review.services import rubrics as services
from review.services.rubrics import CriterionInput
from tests import factories
from tests.review.review_data import make_dataset, make_instruction, make_record

CRITERIA = [
    CriterionInput("States the latest creatinine with its date.", 8, ("axis:accuracy",)),
    CriterionInput("Says whether kidney function is worsening.", 4, ("axis:completeness",)),
    CriterionInput("Invents a value not in the record.", -6, ("axis:accuracy",)),
]


def people() -> tuple[User, User]:
    author = factories.make_user("author@example.edu", roles=[Role.CLINICIAN])
    reviewer = factories.make_user("reviewer@example.edu", roles=[Role.CLINICIAN])
    return author, reviewer


def accepted_rubric(
    instruction: Instruction, author: User, reviewer: User, criteria=CRITERIA
) -> Rubric:
    rubric = services.rubric_assign(
        instruction=instruction, author=author, reviewer=reviewer, actor=None
    )
    services.rubric_save_criteria(rubric=rubric, actor=author, criteria=list(criteria))
    services.rubric_submit(rubric=rubric, actor=author)
    return services.rubric_accept(rubric=rubric, actor=reviewer)


def assigned_grading(instruction: Instruction, grader_email: str) -> tuple[User, CriterionGrading]:
    """A new clinician asked to grade ``instruction``'s responses against an accepted rubric, in
    a study of its own: the grader and the grading."""
    study = factories.put_in_study(instruction)
    author, reviewer = people()
    rubric = accepted_rubric(instruction, author, reviewer)
    grader = factories.make_user(grader_email, roles=[Role.CLINICIAN])
    (grading,) = grading_services.gradings_assign(
        rubric=rubric, study=study, clinicians=[grader], actor=None
    )
    return grader, grading


def rubric_dataset(
    *, n_instructions: int = 2, n_responses: int = 2, draft_too: bool = True
) -> tuple[Dataset, list[Rubric]]:
    """Instructions on distinct patients, each with an accepted rubric (and one more instruction
    with a rubric still in draft, which is never graded)."""
    dataset = make_dataset("rubrics")
    author, reviewer = people()
    rubrics = []
    for i in range(n_instructions):
        patient = make_record(dataset, f"P-{i}", n_events=20)
        instruction = make_instruction(dataset, patient, f"I-{i}", n_responses=n_responses)
        rubrics.append(accepted_rubric(instruction, author, reviewer))
    if draft_too:
        patient = make_record(dataset, "P-draft", n_events=20)
        instruction = make_instruction(dataset, patient, "I-draft", n_responses=n_responses)
        services.rubric_assign(
            instruction=instruction, author=author, reviewer=reviewer, actor=None
        )
    return dataset, rubrics


def submit_grades(
    rubric: Rubric, clinician: User, met: dict[tuple[int, int], bool], study: Study | None = None
) -> CriterionGrading:
    """A clinician's submitted grading of ``rubric``: ``met[(response id, criterion id)]``."""
    study = (
        study
        or Study.objects.get_or_create(
            dataset=rubric.instruction.dataset, round=1, defaults={"name": "round 1"}
        )[0]
    )
    grading = CriterionGrading.objects.create(
        study=study,
        instruction=rubric.instruction,
        rubric=rubric,
        clinician=clinician,
        status=CriterionGrading.Status.SUBMITTED,
    )
    CriterionGrade.objects.bulk_create(
        CriterionGrade(
            grading=grading,
            clinician=clinician,
            response_id=response_id,
            rubric=rubric,
            criterion_id=criterion_id,
            met=value,
        )
        for (response_id, criterion_id), value in met.items()
    )
    return grading


def responses_of(rubric: Rubric) -> list[ModelResponse]:
    return list(ModelResponse.objects.filter(instruction=rubric.instruction).order_by("id"))
