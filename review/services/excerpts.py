"""Writes of the stored record excerpts (``RecordExcerpt``): one per instruction."""

from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db import transaction

from review.models import Instruction, Patient, RecordExcerpt

if TYPE_CHECKING:
    from review.selectors.records import Excerpt


@transaction.atomic
def record_excerpt_store(
    *, instruction: Instruction, patient: Patient, fingerprint: str, excerpt: "Excerpt"
) -> None:
    """Store (or replace) the excerpt of ``instruction`` computed from ``patient``'s record."""
    RecordExcerpt.objects.update_or_create(
        instruction=instruction,
        defaults={"patient": patient, "fingerprint": fingerprint, "content": excerpt.to_json()},
    )


@transaction.atomic
def record_excerpts_invalidate(
    *, patients: Iterable[int] = (), instructions: Iterable[int] = ()
) -> int:
    """Delete the stored excerpts of reloaded records and changed instructions (ids)."""
    patients, instructions = list(patients), list(instructions)
    deleted = 0
    if patients:
        deleted += RecordExcerpt.objects.filter(patient_id__in=patients).delete()[0]
    if instructions:
        deleted += RecordExcerpt.objects.filter(instruction_id__in=instructions).delete()[0]
    return deleted
