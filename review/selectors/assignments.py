"""Reads for assigning work: which instructions match a filter, who may be assigned."""

from django.db.models import QuerySet

from review.access import user_access
from review.models import AccessApplication, Dataset, Instruction, User


def instructions_for_assignment(
    *, dataset: Dataset, specialty: str = "", category: str = ""
) -> QuerySet[Instruction]:
    qs = Instruction.objects.filter(dataset=dataset)
    if specialty:
        qs = qs.filter(specialty__iexact=specialty)
    if category:
        qs = qs.filter(category__iexact=category)
    return qs.order_by("pk")


def clinicians_approved() -> list[User]:
    """Users who hold clinician access today (approved, unexpired, DUA signed), simulated
    demo accounts left out.

    The database narrows to users with an approved clinician application; ``user_access`` then
    applies every rule (expiry, certificate, DUA), so this list can never disagree with what the
    views let through.
    """
    candidates = (
        User.objects.filter(
            is_active=True,
            applications__status=AccessApplication.Status.APPROVED,
            applications__is_clinician=True,
        )
        # The demo's simulated clinicians are not people to give work to.
        .exclude(is_simulated=True)
        .distinct()
    )
    return [user for user in candidates.order_by("email") if user_access(user).is_clinician]


def assignment_choices(dataset: Dataset | None = None) -> tuple[list[str], list[str]]:
    """Distinct specialties and categories (of one dataset, or all) for the filter form."""
    qs = (
        Instruction.objects.all()
        if dataset is None
        else Instruction.objects.filter(dataset=dataset)
    )
    specialties = sorted(set(qs.exclude(specialty="").values_list("specialty", flat=True)))
    categories = sorted(set(qs.exclude(category="").values_list("category", flat=True)))
    return specialties, categories
