"""Adaptive assignment: recording a study's design, and drawing its next wave (audited).

Uniform assignment (every instruction, a fixed overlap) stays the default. A study turns
adaptive only before anyone is assigned in it (a design changed mid-study would leave earlier
reviews without known probabilities); its parameters are recorded in
``Study.assignment_params`` and every report names them. Each wave records every walked
instruction's probability and draw (``SamplingDraw``); a drawn instruction goes to
``overlap`` clinicians, as uniform assignment would, so agreement statistics keep their pairs.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.http import HttpRequest

from review.access import can_unblind
from review.models import AuditEvent, Instruction, SamplingDraw, Study, User
from review.selectors.adaptive import DEFAULTS, AdaptiveState, adaptive_state

from .assignments import MAX_OVERLAP, AssignmentPlan, assignments_create
from .audit import audit_record
from .studies import StudyError


def study_set_adaptive(
    *,
    study: Study,
    actor: User | None,
    predictor_config_id: int | None,
    predictor: str = "",
    overlap: int = DEFAULTS["overlap"],
    min_probability: float = DEFAULTS["min_probability"],
    budget: float = DEFAULTS["budget"],
    waves: int = DEFAULTS["waves"],
    confidence: float = DEFAULTS["confidence"],
    seed: int | None = None,
    request: HttpRequest | None = None,
) -> Study:
    """Make ``study`` adaptive with these parameters; refused once anyone is assigned in it."""
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study.pk)
        if study.assignments.exclude(clinician__is_simulated=True).exists():
            raise StudyError(
                f"{study.name} already has assignments: its design is fixed. Create a new "
                "round to assign adaptively."
            )
        if not 1 <= overlap <= MAX_OVERLAP:
            raise StudyError(f"The overlap must be between 1 and {MAX_OVERLAP}.")
        if not 0.0 < min_probability <= budget <= 1.0:
            raise StudyError(
                "Choose 0 < minimum probability <= expected share reviewed per wave <= 1."
            )
        if not 1 <= waves <= 50:
            raise StudyError("Choose between 1 and 50 waves.")
        if not 0.5 <= confidence < 1.0:
            raise StudyError("Choose a confidence between 50% and 100%.")
        params = {
            "overlap": overlap,
            "min_probability": min_probability,
            "budget": budget,
            "waves": waves,
            "confidence": confidence,
            # The seed orders the instructions and draws each one's uniform number: recorded,
            # so anyone can replay which instructions each wave's probabilities selected.
            "seed": secrets.randbelow(2**31) if seed is None else int(seed),
            "predictor_config_id": predictor_config_id,
            "predictor": predictor,
            "estimator": "active inference (inverse-probability weights; Zrnic & Candes 2024)",
            "stopping_rule": (
                "every gap between neighbours excludes 0, Bonferroni over all model pairs "
                "and all waves"
            ),
        }
        study.assignment_mode = Study.AssignmentMode.ADAPTIVE
        study.assignment_params = params
        study.save(update_fields=["assignment_mode", "assignment_params"])
        audit_record(
            action=AuditEvent.Action.STUDY_CHANGED,
            actor=actor,
            request=request,
            obj=study,
            details={"change": "adaptive design", **params},
        )
    return study


@dataclass
class WaveResult:
    wave: int
    walked: int
    drawn: int
    expected: float
    assignments: AssignmentPlan


@transaction.atomic
def adaptive_assign_wave(
    *,
    study: Study,
    clinicians: Iterable[User],
    actor: User | None,
    request: HttpRequest | None = None,
) -> tuple[WaveResult, AdaptiveState]:
    """Draw the study's next wave as ``adaptive_state`` shows it, record every probability,
    and assign each drawn instruction to ``overlap`` clinicians. Refused when the study is
    uniform, when every wave is drawn, or when the ranking is already settled."""
    study = Study.objects.select_for_update().get(pk=study.pk)  # one wave at a time
    if study.assignment_mode != Study.AssignmentMode.ADAPTIVE:
        raise StudyError(f"{study.name} is assigned uniformly: use the overlap assignment.")
    state = adaptive_state(study)
    if state.settled:
        raise StudyError(state.message)
    if state.next_wave is None:
        raise StudyError(f"Every wave of {study.name} has been drawn.")
    if state.waves_complete < state.waves_drawn:
        # The next wave's probabilities are fitted to the reviews so far: drawn before the last
        # wave's reviews are in, it would quietly fall back to uniform.
        raise StudyError(
            f"Wave {state.waves_drawn}'s reviews are not all submitted yet: the next wave is "
            "drawn from them."
        )
    # Blind like every review: an account with researcher, admin or staff access can see
    # model names; its reviews are left out of reports, so it would leave a drawn instruction
    # short.
    pool = [c for c in clinicians if not can_unblind(c)]
    SamplingDraw.objects.bulk_create(
        [
            SamplingDraw(
                study=study,
                instruction_id=row.instruction_id,
                wave=state.next_wave,
                probability=row.probability,
                draw=row.draw,
                drawn=row.drawn,
            )
            for row in state.plan
        ]
    )
    drawn = [row.instruction_id for row in state.plan if row.drawn]
    plan = assignments_create(
        instructions=Instruction.objects.filter(pk__in=drawn),
        clinicians=pool,
        overlap=state.design.overlap,
        actor=actor,
        study=study,
        adaptive_wave=True,
        fresh_only=True,
    )
    result = WaveResult(
        wave=state.next_wave,
        walked=len(state.plan),
        drawn=len(drawn),
        expected=state.expected_next,
        assignments=plan,
    )
    audit_record(
        action=AuditEvent.Action.STUDY_CHANGED,
        actor=actor,
        request=request,
        obj=study,
        details={
            "change": "adaptive wave",
            "wave": result.wave,
            "walked": result.walked,
            "drawn": result.drawn,
            "expected": round(result.expected, 3),
            "min_probability": min((r.probability for r in state.plan), default=None),
        },
    )
    return result, adaptive_state(study)
