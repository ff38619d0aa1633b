"""The mixed design: one clinician on every instruction, a second on an agreement subset.

One clinician an instruction spends reviews best (a second review of an instruction only
removes that clinician's disagreement; a new instruction removes its own variance too), but
gives no pairs for the report's agreement sections (human ceiling, leave-one-clinician-out).
The mixed design keeps them with a subset of instructions drawn at random, with a recorded
seed, spread over patients (no patient gets a second instruction in the subset before every
patient has one), so the human ceiling describes the round's instructions and has as many
patients (its resampling units) as the subset allows.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable

from django.db import transaction

from review.models import Instruction, Study, User

from .assignments import AssignmentPlan, assignments_create


def agreement_subset(
    instructions: Iterable[Instruction], size: int, seed: int
) -> list[Instruction]:
    """``size`` instructions drawn with ``seed``: a random order, then each patient's first
    instruction in it before any patient's second (an instruction with no patient is its own)."""
    if size < 0:
        raise ValueError("the agreement subset cannot be negative")
    pool = sorted(instructions, key=lambda i: i.pk)
    order = list(range(len(pool)))
    random.Random(seed).shuffle(order)
    seen: dict[str, int] = defaultdict(int)
    keyed = []
    for place, k in enumerate(order):
        patient = pool[k].person_id or f"instruction {pool[k].pk}"
        keyed.append((seen[patient], place, k))
        seen[patient] += 1
    return [pool[k] for _, _, k in sorted(keyed)[:size]]


@transaction.atomic
def assignments_create_mixed(
    *,
    instructions: Iterable[Instruction],
    clinicians: Iterable[User],
    doubled: int,
    seed: int,
    actor: User | None,
    study: Study | None = None,
    repeat_reviewers: bool = False,
) -> tuple[AssignmentPlan, AssignmentPlan, list[Instruction]]:
    """One clinician on every instruction, a second on ``doubled`` of them
    (:func:`agreement_subset`), in one transaction; each step audited as any assignment is,
    and the design (with its seed and subset) recorded in the round's ``assignment_params``
    so every report names it."""
    chosen = list(instructions)
    people = list(clinicians)
    first = assignments_create(
        instructions=chosen,
        clinicians=people,
        overlap=1,
        actor=actor,
        study=study,
        repeat_reviewers=repeat_reviewers,
    )
    subset = agreement_subset(chosen, doubled, seed)
    second = assignments_create(
        instructions=subset,
        clinicians=people,
        overlap=2,
        actor=actor,
        study=study,
        repeat_reviewers=repeat_reviewers,
    )
    for round_ in Study.objects.select_for_update().filter(pk__in=set(first.studies.values())):
        round_.assignment_params = {
            **(round_.assignment_params or {}),
            "design": "mixed",
            "agreement_subset": sorted(i.instruction_id for i in subset),
            "agreement_seed": seed,
        }
        round_.save(update_fields=["assignment_params"])
    return first, second, subset
