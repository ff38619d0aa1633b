"""Reads for adaptive studies: the next wave an admin would assign, the estimates so far and
whether the leaderboard is settled (the statistics: ``scoring.reports.statistics``).

An adaptive study (``Study.assignment_mode == "adaptive"``) walks its instructions in waves,
in an order drawn from the study's seed. Each instruction of a wave gets a probability of
being reviewed, fixed before the wave from the predictor everywhere and the clinicians'
verdicts so far (``adaptive_design``); it is reviewed when its uniform number (same seed)
falls below it. Estimates weight each review by one over that probability, so they stay
unbiased whatever the probabilities were (active inference, Zrnic & Candès 2024).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from review.models import ResponseJudgement, Review, SamplingDraw, Study, StudyResponse
from scoring.models import MetricConfig, MetricScore
from scoring.reports.statistics.active import ACTIVE_TUNE_MIN
from scoring.reports.statistics.adaptive_design import (
    MIN_PATIENTS_TO_STOP,
    MIN_REVIEWED_TO_STOP,
    RankingStatus,
    doubt_scores,
    inclusion_probabilities,
    ranking_status,
)

# Below this many reviewed patients the weighted estimates use a fixed lambda (the page says so).
FIXED_LAMBDA_BELOW = ACTIVE_TUNE_MIN

DEFAULTS: dict[str, Any] = {
    "overlap": 2,
    "min_probability": 0.1,
    "budget": 0.4,  # expected share of a wave's instructions reviewed
    "waves": 5,
    "confidence": 0.95,
    "seed": 0,
    "predictor_config_id": None,
    "predictor": "",
}


@dataclass(frozen=True)
class AdaptiveDesign:
    """An adaptive study's parameters, as recorded in ``Study.assignment_params``."""

    overlap: int
    min_probability: float
    budget: float
    waves: int
    confidence: float
    seed: int
    predictor_config_id: int | None
    predictor: str

    @classmethod
    def of(cls, study: Study) -> AdaptiveDesign:
        p = {**DEFAULTS, **(study.assignment_params or {})}
        config = p["predictor_config_id"]
        return cls(
            overlap=int(p["overlap"]),
            min_probability=float(p["min_probability"]),
            budget=float(p["budget"]),
            waves=int(p["waves"]),
            confidence=float(p["confidence"]),
            seed=int(p["seed"]),
            predictor_config_id=int(config) if config is not None else None,
            predictor=str(p["predictor"]),
        )


@dataclass
class StudyArrays:
    """The study's instructions in walking order, with predictor and verdicts per model."""

    instruction_ids: list[int]  # walking order
    codes: list[str]  # the release's instruction ids, for the admin
    models: list[str]
    yhat: NDArray[np.float64]  # (N, K) predictor, scaled to [0, 1]
    y: NDArray[np.float64]  # (N, K) mean verdict (correct = 1) where labelled
    labelled: NDArray[np.bool_]  # (N,)
    uniform: NDArray[np.float64]  # (N,) each instruction's uniform number
    wave_of: NDArray[np.intp]  # (N,) 1-based wave in the walking order
    patients: NDArray[np.int64]  # (N,) each instruction's patient (its own -id without one)


def _predictions(study: Study, config_id: int | None, response_ids: list[int]) -> dict[int, float]:
    if config_id is None:
        return {}
    return dict(
        MetricScore.objects.filter(config_id=config_id, response_id__in=response_ids).values_list(
            "response_id", "value"
        )
    )


def study_arrays(study: Study, design: AdaptiveDesign) -> StudyArrays:
    """Three queries: the response set, the predictor's scores, the submitted verdicts."""
    rows = list(
        StudyResponse.objects.filter(study=study).values_list(
            "instruction_id",
            "instruction__instruction_id",
            "response_id",
            "response__model_name",
            "instruction__patient_id",
        )
    )
    ids = sorted({r[0] for r in rows})
    models = sorted({r[3] for r in rows})
    rng = np.random.default_rng(design.seed)
    order = [ids[i] for i in rng.permutation(len(ids))]
    uniform = rng.random(len(ids))
    index = {pk: i for i, pk in enumerate(order)}
    col = {name: k for k, name in enumerate(models)}
    codes = [""] * len(order)
    patients = np.zeros(len(order), dtype=np.int64)
    scores = _predictions(study, design.predictor_config_id, [r[2] for r in rows])
    raw = np.full((len(order), len(models)), np.nan)
    for instruction_id, code, response_id, model, patient_id in rows:
        codes[index[instruction_id]] = code
        # Instructions about one patient are one draw for the intervals; one with no linked
        # record stands alone (a negative label no patient id takes).
        patients[index[instruction_id]] = patient_id if patient_id is not None else -instruction_id
        if response_id in scores:
            raw[index[instruction_id], col[model]] = scores[response_id]
    yhat = _scale(raw)
    total = np.zeros(raw.shape)
    count = np.zeros(raw.shape)
    for instruction_id, model, correct in (
        ResponseJudgement.objects.filter(
            review__assignment__study=study,
            review__status=Review.Status.SUBMITTED,
            review__cannot_assess="",
            is_correct__isnull=False,
        )
        .exclude(review__assignment__clinician__is_simulated=True)
        .values_list("review__assignment__instruction_id", "response__model_name", "is_correct")
    ):
        if instruction_id in index and model in col:
            total[index[instruction_id], col[model]] += bool(correct)
            count[index[instruction_id], col[model]] += 1
    labelled = (count > 0).any(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        # A verdict missing for one model of a reviewed instruction: its residual counts as 0.
        y = np.where(count > 0, total / np.maximum(count, 1), yhat)
    wave_size = max(1, math.ceil(len(order) / max(design.waves, 1)))
    wave_of = np.arange(len(order)) // wave_size + 1
    return StudyArrays(order, codes, models, yhat, y, labelled, uniform, wave_of, patients)


def _scale(raw: NDArray[np.float64]) -> NDArray[np.float64]:
    """Scores to [0, 1] (min-max over the study), a missing one at its model's mean. Any
    predictor keeps the estimates unbiased; the scale only affects how narrow they get."""
    if raw.size == 0 or np.isnan(raw).all():
        return np.full(raw.shape, 0.5)
    lo, hi = np.nanmin(raw), np.nanmax(raw)
    scaled = (raw - lo) / (hi - lo) if hi > lo else np.full(raw.shape, 0.5)
    with np.errstate(invalid="ignore"):
        means = np.nanmean(np.where(np.isnan(scaled), np.nan, scaled), axis=0)
    means = np.where(np.isnan(means), 0.5, means)
    return np.asarray(np.where(np.isnan(scaled), means[None, :], scaled), dtype=float)


@dataclass
class PlanRow:
    instruction_id: int
    code: str
    probability: float
    draw: float  # the instruction's uniform number: reviewed when below the probability
    drawn: bool


@dataclass
class GapRow:
    upper_model: str
    lower_model: str
    estimate: float
    lower: float
    upper: float
    separated: bool


@dataclass
class ShareRow:
    model: str
    estimate: float
    lower: float
    upper: float


@dataclass
class AdaptiveState:
    """What the admin's studies page shows of an adaptive study."""

    design: AdaptiveDesign
    instructions: int
    waves_drawn: int
    waves_complete: int
    next_wave: int | None  # None: every wave drawn
    plan: list[PlanRow] = field(default_factory=list)
    shares: list[ShareRow] = field(default_factory=list)
    gaps: list[GapRow] = field(default_factory=list)
    settled: bool = False
    reviews_assigned: int = 0
    reviews_uniform: int = 0  # what uniform assignment at the same overlap would ask
    message: str = ""

    @property
    def reviews_saved(self) -> int:
        return max(self.reviews_uniform - self.reviews_assigned, 0)

    @property
    def expected_next(self) -> float:
        return sum(r.probability for r in self.plan)

    @property
    def drawn_next(self) -> int:
        return sum(r.drawn for r in self.plan)


def _status(
    arrays: StudyArrays, draws: dict[int, SamplingDraw], design: AdaptiveDesign
) -> tuple[RankingStatus | None, NDArray[np.bool_], NDArray[np.float64], int]:
    """The estimates over the complete waves (every drawn instruction reviewed): a wave still
    under review would count its unreviewed draws as unlabelled, a bias."""
    n = len(arrays.instruction_ids)
    pi = np.ones(n)
    xi = np.zeros(n, dtype=bool)
    walked = np.zeros(n, dtype=bool)
    for i, pk in enumerate(arrays.instruction_ids):
        d = draws.get(pk)
        if d is not None:
            walked[i], pi[i], xi[i] = True, d.probability, d.drawn
    complete = 0
    for wave in range(1, design.waves + 1):
        in_wave = walked & (arrays.wave_of == wave)
        if not in_wave.any() or (xi[in_wave] & ~arrays.labelled[in_wave]).any():
            break
        complete = wave
    mask = walked & (arrays.wave_of <= complete)
    if not complete or not (xi & mask).any():
        return None, xi & mask, pi, complete
    status = ranking_status(
        arrays.yhat,
        arrays.y,
        xi & mask,
        pi,
        mask=mask.astype(float),
        alpha=1.0 - design.confidence,
        looks=design.waves,
        clusters=arrays.patients,
    )
    return status, xi & mask, pi, complete


def adaptive_state(study: Study) -> AdaptiveState:
    """The next wave (drawn from the recorded seed, writing nothing), the estimates so far,
    and the stopping rule's verdict."""
    design = AdaptiveDesign.of(study)
    arrays = study_arrays(study, design)
    draws = {d.instruction_id: d for d in SamplingDraw.objects.filter(study=study)}
    drawn_waves = {d.wave for d in draws.values()}
    status, xi, _, complete = _status(arrays, draws, design)
    n = len(arrays.instruction_ids)
    state = AdaptiveState(
        design=design,
        instructions=n,
        waves_drawn=max(drawn_waves, default=0),
        waves_complete=complete,
        next_wave=None,
        reviews_assigned=study.assignments.exclude(clinician__is_simulated=True).count(),
        reviews_uniform=n * design.overlap,
    )
    wave = state.waves_drawn + 1
    members = np.flatnonzero(arrays.wave_of == wave)
    if members.size:
        state.next_wave = wave
        budget = max(design.budget * members.size, design.min_probability * members.size)
        if status is None:
            pi = np.full(members.size, min(1.0, budget / members.size))
        else:
            score = doubt_scores(arrays.yhat[members], arrays.yhat, arrays.y, xi, status)
            pi = inclusion_probabilities(score, budget, design.min_probability)
        state.plan = [
            PlanRow(
                instruction_id=arrays.instruction_ids[i],
                code=arrays.codes[i],
                probability=float(p),
                draw=float(arrays.uniform[i]),
                drawn=bool(arrays.uniform[i] < p),
            )
            for i, p in zip(members, pi, strict=True)
        ]
        state.plan.sort(key=lambda r: (-r.probability, r.code))
    level = f"{design.confidence:.0%}"
    if status is None:
        state.message = (
            f"No estimate yet: the first wave is drawn uniformly; estimates start once its "
            f"reviews are in (wave 1 of {design.waves})."
        )
        return state
    names = arrays.models
    state.shares = [
        ShareRow(
            names[k],
            float(status.shares.estimate[k]),
            float(status.shares.lower[k]),
            float(status.shares.upper[k]),
        )
        for k in np.argsort(-status.shares.estimate, kind="stable")
    ]
    order = status.order
    state.gaps = [
        GapRow(
            names[int(order[p])],
            names[int(order[p + 1])],
            float(status.gaps.estimate[p]),
            float(status.gaps.lower[p]),
            float(status.gaps.upper[p]),
            bool(status.separated[p]),
        )
        for p in range(len(names) - 1)
    ]
    state.settled = bool(status.settled)
    if state.settled:
        state.message = (
            f"The ranking is settled at {level}; {state.reviews_saved} reviews saved against "
            f"uniform ({state.reviews_assigned} assigned of the {state.reviews_uniform} uniform "
            f"assignment at overlap {design.overlap} would ask). No further wave is needed."
        )
    elif not (open_gaps := [g for g in state.gaps if not g.separated]):
        # The studies page always passes the instructions' patients (``study_arrays``).
        assert status.patients is not None
        reviewed, patients = int(status.reviewed), int(status.patients)
        state.message = (
            f"Not settled at {level} yet: every gap between neighbours excludes 0, but the rule "
            f"waits for at least {MIN_REVIEWED_TO_STOP} reviewed instructions about at least "
            f"{MIN_PATIENTS_TO_STOP} patients (now {reviewed} about {patients}): intervals from "
            f"fewer are too narrow. Waves complete: {complete} of {design.waves}."
        )
    else:
        state.message = (
            f"Not settled at {level} yet: {len(open_gaps)} of {len(state.gaps)} gaps between "
            f"neighbours still include 0 ("
            + ", ".join(f"{g.upper_model} vs {g.lower_model}" for g in open_gaps)
            + f"). Waves complete: {complete} of {design.waves}."
        )
    return state


def predictor_choices(study: Study) -> list[tuple[int, str]]:
    """Metric configurations with scores on the study's responses: (id, label)."""
    return list(
        MetricConfig.objects.filter(scores__response__studies__study=study)
        .distinct()
        .order_by("label", "pk")
        .values_list("pk", "label")
    )
