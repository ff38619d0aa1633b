"""Demo assignments with overlap, so a demo clinician lands on a populated queue."""

from review.models import Dataset, Instruction, User
from review.services.assignments import assignments_create

DEMO_CLINICIANS = ("clinician1@demo.medalign.local", "clinician2@demo.medalign.local")
DEMO_OVERLAP = 2


def demo_assignments(*, dataset_name: str) -> list[str]:
    """Assign every instruction of the demo dataset to the demo clinicians (idempotent)."""
    clinicians = list(User.objects.filter(email__in=DEMO_CLINICIANS).order_by("email"))
    if not clinicians:
        return [
            "Demo assignments skipped: no demo clinicians yet "
            f"({', '.join(DEMO_CLINICIANS)}); run `load_demo --accounts-only` once they exist."
        ]
    dataset = Dataset.objects.filter(name=dataset_name).first()
    if dataset is None:
        return [f"Demo assignments skipped: no dataset {dataset_name!r}."]
    plan = assignments_create(
        instructions=Instruction.objects.filter(dataset=dataset),
        clinicians=clinicians,
        overlap=min(DEMO_OVERLAP, len(clinicians)),
        actor=None,
    )
    return [
        f"Demo assignments: {plan.created} new for {plan.instructions} instructions "
        f"(overlap {plan.overlap}; {plan.already_full} already assigned) to "
        + ", ".join(c.email for c in clinicians)
        + "."
    ]
