"""The design calculator for a round (``statistics.design``), from its reviews so far: which
assignment reaches the report's targets with the fewest clinician reviews, and what each gives
up. The assign page and ``manage.py assign --recommend`` show it; nothing here writes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from review.models import Dataset, Study
from review.selectors.studies import study_latest_reviewed
from scoring.reports import statistics as st
from scoring.reports.prediction import PredictorError, choose_predictor, default_pair, mean_taus
from scoring.reports.selectors import report_inputs, study_responses
from scoring.reports.statistics.design import (
    PLANNING_DISAGREEMENT,
    PLANNING_PAIR_TAU_SD,
    SECTION_NAMES,
    SECTIONS,
    Comparison,
    Plan,
    Pool,
    Target,
    agreement_subset_size,
    compare_round,
    human_ceiling_half_width,
    planning_column,
    possible_sections,
    round_targets,
    target_se,
)

# Before any review: MedAlign's six models (share correct 65% to 32%), their verdicts on one
# instruction correlated through its difficulty (the bench generator's 0.3), no predictor.
PLANNING_SHARES = (0.65, 0.59, 0.53, 0.47, 0.40, 0.32)
PLANNING_DIFFICULTY_CORRELATION = 0.3


def planning_targets(*, margin: float, confidence: float, power: float) -> list[Target]:
    """The two share targets on planning values (module constants, ``design``'s)."""
    a, b = PLANNING_SHARES[0], PLANNING_SHARES[1]
    gap = planning_column(
        "top two",
        share=(a, b),
        difficulty_correlation=PLANNING_DIFFICULTY_CORRELATION,
        se_target=target_se("difference", difference=a - b, confidence=confidence, power=power),
    )
    each = tuple(
        planning_column(f"model {k + 1}", share=p, se_target=target_se("margin", margin=margin))
        for k, p in enumerate(PLANNING_SHARES)
    )
    return [
        Target("top_two", f"the top two ({a:.0%} and {b:.0%}) told apart", (gap,)),
        Target("margin", f"every share correct within ±{margin * 100:g} points", each),
    ]


def _pair_tau_sd(table: st.JudgementTable) -> tuple[float, int]:
    """The spread of two clinicians' tau over pairs, from the human ceiling's interval."""
    ceiling = st.human_ceiling(table, n_resamples=400, min_clusters=2)
    pairs = int(ceiling["n_pairs"])
    lo, hi = ceiling["ci_low"], ceiling["ci_high"]
    if pairs < 10 or not (math.isfinite(lo) and math.isfinite(hi)):
        return PLANNING_PAIR_TAU_SD, pairs
    return (hi - lo) / (2 * 1.959964) * math.sqrt(pairs), pairs


def _row(plan: Plan, made: int, recommended: Plan | None) -> dict[str, Any]:
    return {
        "key": plan.design.key,
        "label": plan.design.label,
        "reviews": plan.reviews,
        "more": None if plan.reviews is None else max(0, plan.reviews - made),
        "labelled": plan.labelled,
        "doubled": plan.doubled,
        "ratio": plan.ratio,
        "ratio_text": f"{plan.ratio:.2f}x" if math.isfinite(plan.ratio) else "n/a",
        "gives_up": [SECTION_NAMES[k] for k in plan.gives_up],
        "gives_up_long": [SECTIONS[k] for k in plan.gives_up],
        "why": plan.why,
        "recommended": recommended is not None and plan.design.key == recommended.design.key,
    }


def _comparison(c: Comparison, made: int) -> dict[str, Any]:
    pick = c.recommended
    return {
        "key": c.key,
        "label": c.label,
        "rows": [_row(p, made, pick) for p in c.plans],
        "baseline_reviews": c.baseline.reviews,
        "recommended": None if pick is None else _row(pick, made, pick),
        "reason": c.reason,
    }


def study_design(
    *,
    dataset: Dataset,
    study: Study | None = None,
    instructions: int | None = None,
    patients: int | None = None,
    clinicians: int | None = None,
    predictor: str = "auto",
    margin: float = 0.05,
    confidence: float = 0.95,
    power: float = 0.8,
    half_width: float | None = None,
    required: Sequence[str] = tuple(SECTIONS),
) -> dict[str, Any]:
    """Every design for the round (``study``, else the dataset's latest reviewed), from its
    reviews so far, or from planning values before any: per target and for every target at
    once, the reviews each needs, against uniform overlap 2 clinicians only, what it gives up,
    and the recommendation. ``instructions``/``patients``/``clinicians``: the pool being
    assigned (default: the round's response set, and the clinicians who reviewed in it)."""
    study = study or study_latest_reviewed(dataset)
    table = None
    prediction = None
    predictor_label = ""
    notes: list[str] = []
    tau: tuple[str, Any, Any] | None = None
    if study is not None and study.assignment_mode == Study.AssignmentMode.ADAPTIVE:
        notes.append(
            "this round is assigned adaptively: its reviewed instructions were chosen for "
            "doubt, and the plan takes them as a uniform sample"
        )
    if study is not None:
        inputs = report_inputs(dataset=dataset, study=study)
        if len(inputs.table):
            table = inputs.table
            try:
                key = choose_predictor(predictor, inputs.metrics)
            except PredictorError as exc:
                key = None
                notes.append(str(exc))
            if key is not None:
                prediction = np.asarray(inputs.scores[key], dtype=float)
                predictor_label = next(
                    (str(m["label"]) for m in inputs.metrics if m["key"] == key), key
                )
            a, b = default_pair(mean_taus(table, inputs.scores), exclude=key)
            if a is not None and b is not None:
                ta = st.per_review_tau(table, inputs.scores[a])
                tb = st.per_review_tau(table, inputs.scores[b])
                _, ia, ib = np.intersect1d(ta.review, tb.review, return_indices=True)
                tau = (f"{a} vs {b}", ta.instruction[ia], ta.tau[ia] - tb.tau[ib])
        if instructions is None:
            responses = study_responses(dataset=dataset, study=study)
            if responses.instruction_ids:
                instructions = len(set(responses.instruction_ids))
                patients = len(set(responses.patient))
    if instructions is None:
        instructions = dataset.instructions.count()
    patients = instructions if patients is None else patients
    pair_sd, pairs = (PLANNING_PAIR_TAU_SD, 0) if table is None else _pair_tau_sd(table)
    made = 0 if table is None else int(np.unique(np.asarray(table.review)).shape[0])
    if table is None:
        targets = planning_targets(margin=margin, confidence=confidence, power=power)
        notes.append(
            "no reviews in this round yet: planned on MedAlign's shares correct (65% to 32%), "
            f"clinicians departing from each other's verdict {PLANNING_DISAGREEMENT:.0%} of the "
            "time, and no predictor counted; the plan measures these on the first reviews"
        )
        seen = 0
    else:
        targets, moments = round_targets(
            table, prediction, margin=margin, confidence=confidence, power=power,
            tau_difference=tau,
        )  # fmt: skip
        seen = len({int(c) for c in np.asarray(table.clinician)})
        if not any(m.within_measured for m in moments):
            notes.append(
                "no instruction has two reviews yet: the clinicians' disagreement is assumed "
                f"({PLANNING_DISAGREEMENT:.0%} a verdict), not measured"
            )
        if prediction is None:
            notes.append("no predictor: the prediction-powered designs plan as clinicians only")
    pool = Pool(
        instructions=instructions,
        patients=patients,
        clinicians=clinicians if clinicians is not None else max(seen, 1),
        agreement_subset=agreement_subset_size(
            instructions=instructions, pair_tau_sd=pair_sd, half_width=half_width
        ),
        reviews_made=made,
    )
    each, every = compare_round(targets, pool, required=required)
    notes.append(
        "adaptive waves are planned at the uniform count: what they save (1-2% of the reviews "
        "on the bench, where the predictor is equally sure everywhere) is not counted, and "
        "their report gives weighted estimates only"
    )
    impossible = [SECTION_NAMES[k] for k in required if k not in possible_sections(pool)]
    if impossible:
        notes.append(
            "no design can give the "
            + ", ".join(impossible)
            + f" with {pool.clinicians} clinician{'s' if pool.clinicians != 1 else ''} and "
            f"{pool.patients} patients: not asked of any"
        )
    return {
        "study": study,
        "planning": table is None,
        "predictor_label": predictor_label,
        "instructions": instructions,
        "patients": patients,
        "clinicians": pool.clinicians,
        "reviews_made": made,
        "pairs_so_far": pairs,
        "agreement_subset": pool.agreement_subset,
        "human_ceiling_half_width": human_ceiling_half_width(pool.agreement_subset, pair_sd),
        "targets": [_comparison(c, made) for c in each],
        "every": None if every is None else _comparison(every, made),
        "notes": notes,
    }
