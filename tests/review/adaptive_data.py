"""An adaptive study to test with: instructions answered by three models whose correctness is
set (the first always right, the second on even instructions, the third never), a predictor
that knows it roughly, and approved clinicians."""

from django.utils import timezone

from review.models import Assignment, ModelResponse, ResponseJudgement, Review, Role
from scoring.models import MetricConfig, MetricScore
from tests import factories
from tests.review import review_data

QUALITY = {0: 0.9, 1: 0.5, 2: 0.1}  # by the model's place in review_data.MODEL_NAMES


def make_adaptive_world(n_instructions: int = 20, n_clinicians: int = 3):
    dataset = review_data.make_dataset("adaptive")
    # Two instructions a patient: the estimates count patients as the draws, and a study about
    # one patient can never settle its ranking.
    patients = [
        review_data.make_record(dataset, f"P-ADAPT-{j}", n_events=2)
        for j in range((n_instructions + 1) // 2)
    ]
    instructions = [
        review_data.make_instruction(dataset, patients[i // 2], f"AD-{i:02d}", n_responses=3)
        for i in range(n_instructions)
    ]
    study = factories.put_in_study(*instructions)
    config = MetricConfig.objects.create(
        backend="jury", identity={"test": "adaptive"}, identity_hash="a" * 64, label="Test jury"
    )
    names = review_data.MODEL_NAMES
    for response in ModelResponse.objects.filter(instruction__in=instructions):
        k = names.index(response.model_name)
        # Sure about some instructions, unsure about others: the doubt differs by instruction.
        wobble = 0.35 if response.instruction.instruction_id[-1] in "13579" else 0.0
        value = min(max(QUALITY[k] + (wobble if k == 2 else -wobble), 0.0), 1.0)
        MetricScore.objects.create(response=response, config=config, value=value)
    clinicians = [
        factories.make_user(f"clin{i}@example.edu", roles=[Role.CLINICIAN])
        for i in range(n_clinicians)
    ]
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    return dataset, study, config, clinicians, admin


def correct(model_name: str, instruction_code: str) -> bool:
    k = review_data.MODEL_NAMES.index(model_name)
    return k == 0 or (k == 1 and int(instruction_code[-2:]) % 2 == 0)


def submit_all(study) -> int:
    """Every assignment of ``study`` without a review gets a submitted one, verdicts as set."""
    n = 0
    for assignment in Assignment.objects.filter(study=study, review__isnull=True).select_related(
        "instruction"
    ):
        responses = list(
            ModelResponse.objects.filter(
                studies__study=study, instruction=assignment.instruction
            ).order_by("pk")
        )
        review = Review.objects.create(
            assignment=assignment,
            status=Review.Status.SUBMITTED,
            shown_order=[r.pk for r in responses],
            submitted_at=timezone.now(),
        )
        for position, response in enumerate(responses):
            ResponseJudgement.objects.create(
                review=review,
                response=response,
                position=position,
                rank=position + 1,
                is_correct=correct(response.model_name, assignment.instruction.instruction_id),
            )
        n += 1
    return n
