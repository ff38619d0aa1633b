"""How many clinician reviews each study design needs, and which design to choose.

Every target of the report is a mean over instructions of a per-review quantity: a model's
share correct, the gap between two models' shares, the difference of two metrics' taus. For one
such column, split one clinician's label of instruction ``i`` into what any clinician would say
on average (``mu_i``) and that clinician's departure from it::

    B = Var(mu_i)                        between instructions
    W = E[Var(label | instruction)]      between clinicians on one instruction
    R2 = corr(mu, f)^2                   the share of B a predictor f explains

``W`` is the clinicians' own disagreement: only instructions with two reviews measure it. With
``n`` of the study's ``N`` instructions reviewed, ``k_i`` clinicians on instruction ``i`` and the
prediction-powered mean at its best ``lam`` (PPI++), the variance of the estimate is::

    V = [B (1 - R2 (1 - n/N)) + W mean_i(1/k_i)] / n

(``R2 = 0``: the clinicians-only mean). Three things follow. A predictor only removes the
between-instruction part; the clinicians' disagreement ``W`` stays. The correlation that
matters is with what clinicians mean (``mu``), not with one clinician's verdict, nor with the
average of two (``rho^2 = R2 B / (B + W/k)``, lower as clinicians disagree). And the finite pool
counts: the predictor's part of the variance is ``R2 B / N``, so its gain shrinks as the
reviewed share ``n/N`` grows. Each review on an instruction already reviewed buys ``W/2``; a
review of a new instruction buys ``B (1 - R2) + W``: spreading clinicians one to an
instruction is the cheapest design whenever the pool has instructions to spare.

What it gives up: an instruction seen by one clinician says nothing about how clinicians agree.
The report's human ceiling (two clinicians' tau on the same instruction, with an interval once
``MIN_CLUSTERS`` patients have a pair), leave-one-clinician-out and every estimate of ``W`` need
doubly reviewed instructions. The *mixed* design keeps them: one clinician on every reviewed
instruction and a second on an agreement subset sized for the human ceiling's interval.
Adaptive assignment (waves, ``adaptive_design``) gives up the unweighted sections (a report of
an adaptive round gives weighted estimates only) for at most the gain of its floor.

The floor of a design (the efficient-influence bound for its allocation, given what a predictor
could know, ``R2_floor``) is::

    V_floor = B R2_floor / N + 1 / sum_i (1 / v_i),   v_i = B (1 - R2_floor) + W / k_i

and, for adaptive sampling with the best probabilities, the second term uses the squared mean
of the conditional standard deviations instead (``adaptive_gain`` = (E sd)^2 / E var <= 1).

Everything here is closed form on a handful of moments, estimated from the reviews so far
(:func:`moments_from_labels`), or assumed before any (:func:`planning_column`); the counts are
a plan that extrapolates them, not a promise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import stats as sps

from .resampling import MIN_CLUSTERS
from .table import Array, JudgementTable

# What a report shows that some designs cannot give. Keys are stable (exports, tests).
SECTIONS: dict[str, str] = {
    "human_ceiling": "the human ceiling (two clinicians' agreement on the same instruction), "
    "with an interval",
    "clinicians_compared": "each metric placed among the clinicians (leave one clinician out)",
    "disagreement_measured": "how much clinicians disagree (the part of the variance no "
    "predictor removes), measured",
    "uniform_sample": "unweighted statistics (metric-clinician taus, agreement) on a uniform "
    "sample of instructions",
    "prediction_powered": "prediction-powered estimates and reviews still needed",
}
SECTION_NAMES: dict[str, str] = {
    "human_ceiling": "human ceiling",
    "clinicians_compared": "metrics among clinicians",
    "disagreement_measured": "clinicians' disagreement",
    "uniform_sample": "unweighted statistics",
    "prediction_powered": "prediction-powered sections",
}
# Planning values before any review: a clinician's verdict disagrees with the clinicians'
# majority view about one time in ten (the bench's clinicians err 5-15%, mean 10%), and two
# clinicians' rankings of one instruction agree with a tau whose spread over instructions is
# about 0.4 (tau-b of two rankings of a handful of responses).
PLANNING_DISAGREEMENT = 0.10
PLANNING_PAIR_TAU_SD = 0.4
# Fewer clinicians than this with a partner: leave-one-clinician-out places nothing.
MIN_CLINICIANS_COMPARED = 3
# A design with more moving parts is recommended only for at least this saving in reviews.
MIN_SAVING = 0.02


@dataclass(frozen=True)
class Column:
    """One quantity a target needs, with its moments (see the module docstring) and the
    standard error the target asks of it."""

    name: str
    between: float  # B
    within: float  # W, one clinician's label about the clinicians' mean
    explained: float  # R2 of the predictor (0 without one)
    se_target: float
    adaptive_gain: float = 1.0  # (E sd)^2 / E var of the labelled part, adaptive at its best


@dataclass(frozen=True)
class Target:
    key: str  # "top_two", "margin", "metric_tau"
    label: str
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Design:
    """How a round is reviewed: ``overlap`` clinicians on every reviewed instruction, or (with
    ``mixed``) one clinician and a second on the agreement subset; with or without the
    predictor; uniform or adaptive."""

    key: str
    label: str
    overlap: int = 1
    mixed: bool = False
    predictor: bool = False
    adaptive: bool = False


def standard_designs(max_overlap: int = 3, *, adaptive: bool = True) -> list[Design]:
    """Overlap 1..``max_overlap`` and mixed, each with and without the predictor, and adaptive
    (with the predictor) at overlap 2 and mixed's pattern is not offered: adaptive waves give
    every drawn instruction the same overlap."""
    out: list[Design] = []
    for predictor in (False, True):
        how = "prediction-powered" if predictor else "clinicians only"
        suffix = "ppi" if predictor else "classical"
        out.append(
            Design(
                f"mixed-{suffix}",
                f"mixed: one clinician, two on the agreement subset, {how}",
                1,
                True,
                predictor,
            )
        )
        for k in range(1, max_overlap + 1):
            out.append(
                Design(
                    f"overlap{k}-{suffix}",
                    f"uniform overlap {k}, {how}",
                    k,
                    False,
                    predictor,
                )
            )
    if adaptive:
        for k in range(1, max_overlap + 1):
            out.append(
                Design(
                    f"overlap{k}-adaptive",
                    f"adaptive waves at overlap {k}, prediction-powered",
                    k,
                    False,
                    True,
                    True,
                )
            )
    return out


def variance(
    *,
    between: float,
    within: float,
    explained: float,
    pool: int,
    labelled: Any,
    doubled: Any = 0,
    overlap: int = 1,
) -> Array:
    """The variance of the mean after ``labelled`` of ``pool`` instructions are reviewed, each
    by ``overlap`` clinicians except ``doubled`` of them by two (the mixed design: ``doubled``
    is meant with ``overlap=1``): ``[B (1 - R2 (1 - n/N)) + W mean(1/k)] / n``. Vectorised over
    ``labelled`` and ``doubled``."""
    n = np.asarray(labelled, dtype=float)
    d = np.asarray(doubled, dtype=float)
    r2 = min(max(explained, 0.0), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_k = ((n - d) / overlap + d / 2.0) / n
        out = (between * (1.0 - r2 * (1.0 - n / pool)) + within * inv_k) / n
    result: Array = np.where(n > 0, out, np.inf)
    return result


def floor_variance(
    *,
    between: float,
    within: float,
    explained: float,
    pool: int,
    labelled: Any,
    doubled: Any = 0,
    overlap: int = 1,
    adaptive_gain: float = 1.0,
) -> Array:
    """The efficient-influence bound of a design's allocation (module docstring), with
    ``explained`` the share of ``B`` the best predictor from the same information explains:
    ``B R2 / N`` plus the labelled part at its best weights, times ``adaptive_gain`` for
    adaptive sampling at its best probabilities."""
    n = np.asarray(labelled, dtype=float)
    d = np.asarray(doubled, dtype=float)
    r2 = min(max(explained, 0.0), 1.0)
    v_base = between * (1.0 - r2) + within / overlap
    v_two = between * (1.0 - r2) + within / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        info = (n - d) / v_base + d / v_two
        out = between * r2 / pool + adaptive_gain / info
    result: Array = np.where(n > 0, out, np.inf)
    return result


@dataclass(frozen=True)
class Pool:
    """What the study has to spend: its instructions (and their patients) and clinicians, the
    agreement subset the mixed design keeps, and the reviews already made."""

    instructions: int
    patients: int
    clinicians: int
    agreement_subset: int
    reviews_made: int = 0


def agreement_subset_size(
    *,
    instructions: int,
    pair_tau_sd: float = PLANNING_PAIR_TAU_SD,
    half_width: float | None = None,
    confidence: float = 0.95,
    min_clusters: int = MIN_CLUSTERS,
) -> int:
    """How many instructions need a second clinician for the report's agreement sections:
    enough patients for the human ceiling's interval (``min_clusters``, one instruction each:
    the subset is spread over patients), and, when ``half_width`` is given, enough pairs for
    its interval to be that narrow (``(z sd / half_width)^2`` for a mean of per-pair taus).
    Never more than the pool."""
    need = min_clusters
    if half_width is not None:
        if not half_width > 0:
            raise ValueError("the human ceiling's half-width must be positive")
        z = float(sps.norm.ppf(1.0 - (1.0 - confidence) / 2.0))
        need = max(need, math.ceil((z * pair_tau_sd / half_width) ** 2 - 1e-9))
    return max(1, min(need, instructions))


def human_ceiling_half_width(
    pairs: int, pair_tau_sd: float = PLANNING_PAIR_TAU_SD, confidence: float = 0.95
) -> float:
    """The expected half-width of the human ceiling's interval from ``pairs`` pairs."""
    if pairs < 1:
        return math.inf
    z = float(sps.norm.ppf(1.0 - (1.0 - confidence) / 2.0))
    return z * pair_tau_sd / math.sqrt(pairs)


@dataclass(frozen=True)
class Plan:
    """One design for one target (or for every target at once)."""

    design: Design
    reviews: int | None  # clinician reviews in all; None: beyond the pool
    labelled: int | None  # instructions reviewed
    doubled: int  # of them, with two clinicians or more
    yields: tuple[str, ...]  # SECTIONS keys it gives
    gives_up: tuple[str, ...]  # SECTIONS keys it cannot give
    ratio: float = math.nan  # reviews against uniform overlap-2 clinicians only
    why: str = ""

    @property
    def reachable(self) -> bool:
        return self.reviews is not None


def _doubled_for(design: Design, labelled: int, pool: Pool) -> int:
    if design.mixed:
        return min(pool.agreement_subset, labelled)
    return labelled if design.overlap >= 2 else 0


def sections_of(design: Design, *, doubled: int, pool: Pool) -> tuple[str, ...]:
    """The sections a design gives, at ``doubled`` instructions with two clinicians or more."""
    out = []
    # The subset is spread over patients (one instruction each while there are patients to
    # spare), so it reaches the interval's floor of patients when the pool has them.
    pairs_enough = doubled >= max(pool.agreement_subset, 1)
    if pairs_enough and min(doubled, pool.patients) >= MIN_CLUSTERS:
        out.append("human_ceiling")
    if pairs_enough and pool.clinicians >= MIN_CLINICIANS_COMPARED:
        out.append("clinicians_compared")
    if doubled > 0:
        out.append("disagreement_measured")
    if not design.adaptive:
        out += ["uniform_sample", "prediction_powered"]
    return tuple(out)


def _column_variance(design: Design, column: Column, pool: int, n: Array, d: Array) -> Array:
    v = variance(
        between=column.between,
        within=column.within,
        explained=column.explained if design.predictor else 0.0,
        pool=pool,
        labelled=n,
        doubled=d,
        overlap=design.overlap,
    )
    if design.adaptive:
        # Adaptive sampling at its best scales the labelled part; the predictor's own part
        # (R2 B / N) is what it is.
        fixed = column.between * (column.explained if design.predictor else 0.0) / pool
        v = fixed + column.adaptive_gain * (v - fixed)
    return v


def plan_design(design: Design, columns: Sequence[Column], pool: Pool) -> Plan:
    """The fewest reviews with which ``design`` brings every column to its standard error, and
    what it yields then. A design with pairs reviews at least the agreement subset (so its
    agreement sections exist); the mixed design adds second clinicians beyond the subset only
    once every instruction of the pool is reviewed."""
    big_n = pool.instructions
    usable = [c for c in columns if c.se_target > 0 and math.isfinite(c.se_target)]
    if big_n < 1 or not usable:
        return Plan(design, None, None, 0, (), tuple(SECTIONS), why="nothing to plan")
    n = np.arange(1, big_n + 1, dtype=float)
    floor_n = pool.agreement_subset if (design.mixed or design.overlap >= 2) else 1

    def ok(labelled: Array, doubled: Array) -> Any:
        good = np.ones(labelled.shape, dtype=bool)
        for c in usable:
            good &= _column_variance(design, c, big_n, labelled, doubled) <= c.se_target**2
        return good

    labelled: int | None = None
    doubled = 0
    if design.mixed:
        m = min(pool.agreement_subset, big_n)
        d = np.minimum(m, n)
        hit = np.flatnonzero(ok(n, d) & (n >= floor_n))
        if hit.size:
            labelled, doubled = int(n[hit[0]]), int(d[hit[0]])
        else:
            extra = np.arange(m, big_n + 1, dtype=float)
            hit = np.flatnonzero(ok(np.full(extra.shape, float(big_n)), extra))
            if hit.size:
                labelled, doubled = big_n, int(extra[hit[0]])
        reviews = None if labelled is None else labelled + doubled
    else:
        hit = np.flatnonzero(ok(n, np.zeros_like(n)))
        if hit.size:
            labelled = max(int(n[hit[0]]), min(floor_n, big_n))
            doubled = _doubled_for(design, labelled, pool)
        reviews = None if labelled is None else labelled * design.overlap
    if labelled is None:
        # Beyond the pool: say what it would give with every instruction reviewed.
        full = _doubled_for(design, big_n, pool)
        given = sections_of(design, doubled=full, pool=pool)
        return Plan(
            design,
            None,
            None,
            full,
            given,
            tuple(k for k in SECTIONS if k not in given),
            why="not reached even with every instruction of the round reviewed",
        )
    given = sections_of(design, doubled=doubled, pool=pool)
    return Plan(
        design,
        reviews,
        labelled,
        doubled,
        given,
        tuple(k for k in SECTIONS if k not in given),
    )


BASELINE = Design("overlap2-classical", "uniform overlap 2, clinicians only", 2)


@dataclass(frozen=True)
class Comparison:
    """Every design for one target (or all), the baseline, and the recommendation."""

    key: str
    label: str
    plans: list[Plan]
    baseline: Plan
    recommended: Plan | None
    required: tuple[str, ...]
    reason: str = ""
    notes: list[str] = field(default_factory=list)


def _complexity(design: Design) -> tuple[int, int, int, int]:
    # Ties (within MIN_SAVING) go to the design with fewer moving parts.
    return (int(design.adaptive), int(design.predictor), int(design.mixed), design.overlap)


def compare(
    key: str,
    label: str,
    columns: Sequence[Column],
    pool: Pool,
    *,
    designs: Sequence[Design] | None = None,
    required: Sequence[str] = tuple(SECTIONS),
) -> Comparison:
    """Plan every design, and recommend the one with the fewest reviews among those that
    reach the target and give every ``required`` section; a design with more moving parts
    (predictor, mixed, adaptive) must save at least ``MIN_SAVING`` of the reviews of the
    simpler one it beats."""
    unknown = [k for k in required if k not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown report sections: {', '.join(unknown)}")
    base = plan_design(BASELINE, columns, pool)
    plans = []
    for design in designs or standard_designs():
        p = plan_design(design, columns, pool)
        ratio = (
            p.reviews / base.reviews
            if p.reviews is not None and base.reviews is not None and base.reviews > 0
            else math.nan
        )
        plans.append(replace(p, ratio=ratio))
    eligible = [p for p in plans if p.reachable and all(k in p.yields for k in required)]
    best: Plan | None = None
    # Simplest first: each more complex design must beat the best so far by MIN_SAVING.
    for p in sorted(eligible, key=lambda p: (_complexity(p.design), p.reviews or 0)):
        if best is None or (p.reviews or 0) < (best.reviews or 0) * (1 - MIN_SAVING):
            best = p
    reason = ""
    if best is None:
        reason = (
            "no design reaches this target within the round's instructions and gives every "
            "section asked for: add instructions, or ask less of the target"
        )
    return Comparison(
        key,
        label,
        plans,
        replace(base, ratio=1.0 if base.reachable else math.nan),
        best,
        tuple(required),
        reason,
    )


# --- the moments, from reviews or assumed -------------------------------------------------------
@dataclass(frozen=True)
class LabelMoments:
    between: float
    within: float
    explained: float
    within_measured: bool  # from instructions with two reviews (else the planning value)
    pairs: int
    instructions: int


def moments_from_labels(
    instruction: Any,
    label: Any,
    prediction: Any | None = None,
    *,
    within_default: float | None = None,
) -> LabelMoments:
    """``B``, ``W`` and ``R2`` of one column from its per-review labels.

    ``instruction`` and ``label`` (one entry per review; nan labels are left out);
    ``prediction`` (one entry per review too, the predictor's value on that review's
    instruction, or None). ``W`` is half the mean squared difference of two reviews of one
    instruction (every pair of its reviews, each instruction weighted equally); without any,
    ``within_default`` (required then). ``B`` is the variance of one review's label over
    instructions (the first review of each) less ``W``, at least 0. ``R2`` is the squared
    covariance of the predictor with the instructions' mean label, over ``B`` and the
    predictor's variance: the correlation with what clinicians mean, corrected for their
    disagreement (which is independent of the predictor), then adjusted for the slope fitted
    (``1 - (1 - R2)(g - 1)/(g - 2)``, at least 0)."""
    inst = np.asarray(instruction)
    y = np.asarray(label, dtype=float)
    keep = ~np.isnan(y)
    inst, y = inst[keep], y[keep]
    f = None if prediction is None else np.asarray(prediction, dtype=float)[keep]
    ids, codes = np.unique(inst, return_inverse=True)
    codes = codes.reshape(-1)
    g = ids.shape[0]
    if g < 2:
        return LabelMoments(math.nan, math.nan, 0.0, False, 0, int(g))
    count = np.bincount(codes, minlength=g).astype(float)
    total = np.bincount(codes, weights=y, minlength=g)
    square = np.bincount(codes, weights=y * y, minlength=g)
    mean = total / count
    two = count >= 2
    pairs = int((count * (count - 1) / 2)[two].sum())
    if two.any():
        # Unbiased within-instruction variance (by k - 1): half the mean squared difference.
        within_each = (square[two] - count[two] * mean[two] ** 2) / (count[two] - 1)
        within = float(np.mean(within_each))
        measured = True
    else:
        if within_default is None:
            raise ValueError("no instruction has two reviews: give within_default")
        within, measured = float(within_default), False
    first = np.zeros(g)
    order = np.argsort(codes, kind="stable")
    starts = np.r_[0, np.cumsum(count)[:-1]].astype(int)
    first = y[order][starts]
    between = max(float(np.var(first, ddof=1)) - within, 0.0)
    explained = 0.0
    if f is not None and between > 0:
        f_inst = np.bincount(codes, weights=f, minlength=g) / count
        ok = ~np.isnan(f_inst)
        if ok.sum() >= 3 and float(np.var(f_inst[ok])) > 0:
            cov = float(np.cov(mean[ok], f_inst[ok])[0, 1])
            r2 = min(max(cov * cov / (float(np.var(f_inst[ok], ddof=1)) * between), 0.0), 1.0)
            # Adjusted for the one slope fitted: a useless predictor's R2 from g instructions
            # is about 1 / (g - 1), which would promise savings it cannot give.
            g_ok = int(ok.sum())
            explained = max(0.0, 1.0 - (1.0 - r2) * (g_ok - 1) / (g_ok - 2))
    return LabelMoments(between, within, explained, measured, pairs, int(g))


def planning_column(
    name: str,
    *,
    share: float | tuple[float, float],
    difficulty_correlation: float = 0.0,
    disagreement: float = PLANNING_DISAGREEMENT,
    explained: float = 0.0,
    se_target: float,
) -> Column:
    """A column before any review: a share correct ``p`` (or the gap of two, with the
    correlation of their verdicts on one instruction), clinicians who depart from the
    majority view at rate ``disagreement``: ``B = (1 - 2e)^2 p (1 - p)`` (for a gap, the
    variance of a difference of two such verdicts) and ``W = e (1 - e)`` per verdict."""
    e = disagreement
    if isinstance(share, tuple):
        a, b = share
        va, vb = a * (1 - a), b * (1 - b)
        cov = difficulty_correlation * math.sqrt(va * vb)
        between = (1 - 2 * e) ** 2 * (va + vb - 2 * cov)
        within = 2 * e * (1 - e)
    else:
        between = (1 - 2 * e) ** 2 * share * (1 - share)
        within = e * (1 - e)
    return Column(name, between, within, explained, se_target)


def target_se(
    kind: str,
    *,
    difference: float = math.nan,
    margin: float = 0.05,
    confidence: float = 0.95,
    power: float = 0.8,
) -> float:
    """The standard error a target asks: ``|d| / (z_{1-a/2} + z_power)`` to tell a difference
    ``d`` from 0 with ``power``; ``margin / z_{1-a/2}`` for a share within a margin."""
    z = float(sps.norm.ppf(1.0 - (1.0 - confidence) / 2.0))
    if kind == "margin":
        return margin / z
    if not math.isfinite(difference) or difference == 0:
        return math.nan
    return abs(difference) / (z + float(sps.norm.ppf(power)))


# --- a round's reviews so far, planned ------------------------------------------------------------
def _by_review(table: JudgementTable, values: Array, model: str) -> tuple[Array, Array, Array]:
    """``(review, instruction, value)`` of one model's rows (one response per model)."""
    rows = np.flatnonzero(np.asarray(table.model).astype(str) == model)
    return (
        np.asarray(table.review)[rows],
        np.asarray(table.instruction)[rows],
        np.asarray(values, dtype=float)[rows],
    )


def _column(
    name: str,
    instruction: Array,
    label: Array,
    prediction: Array | None,
    within_default: float,
    se: float,
) -> tuple[Column, LabelMoments]:
    m = moments_from_labels(instruction, label, prediction, within_default=within_default)
    return Column(name, m.between, m.within, m.explained, se), m


def round_targets(
    table: JudgementTable,
    prediction: Array | None,
    *,
    margin: float = 0.05,
    confidence: float = 0.95,
    power: float = 0.8,
    tau_difference: tuple[str, Array, Array] | None = None,
    disagreement: float = PLANNING_DISAGREEMENT,
) -> tuple[list[Target], list[LabelMoments]]:
    """The report's targets as columns, from a round's reviews (``table``) and the predictor's
    value on each row's response (``prediction``, or None): the top two models' shares apart,
    every share within ``margin``, and (``tau_difference``: a label and, per review, the two
    metrics' taus with the clinician) metric A against B, planned without the predictor.
    Where no instruction has two reviews, the clinicians' disagreement is assumed
    (``disagreement`` per verdict; half the per-review variance for a tau difference)."""
    correct = np.asarray(table.correct, dtype=float)
    models = sorted(set(np.asarray(table.model).astype(str)))
    shares = {m: float(np.nanmean(_by_review(table, correct, m)[2])) for m in models}
    z = float(sps.norm.ppf(1.0 - (1.0 - confidence) / 2.0))
    e = disagreement
    targets: list[Target] = []
    moments: list[LabelMoments] = []
    ranked = sorted(models, key=lambda m: -shares[m])
    if len(ranked) >= 2:
        a, b = ranked[0], ranked[1]
        ra, ia, ya = _by_review(table, correct, a)
        rb, _, yb = _by_review(table, correct, b)
        both, xa, xb = np.intersect1d(ra, rb, return_indices=True)
        f = None
        if prediction is not None:
            fa, fb = _by_review(table, prediction, a)[2], _by_review(table, prediction, b)[2]
            f = fa[xa] - fb[xb]
        diff = ya[xa] - yb[xb]
        d = float(np.nanmean(diff)) if diff.size else math.nan
        se = target_se("difference", difference=d, confidence=confidence, power=power)
        col, mom = _column(f"{a} - {b}", ia[xa], diff, f, 2 * e * (1 - e), se)
        targets.append(
            Target(
                "top_two",
                f"{a} and {b} (the top two, now {d:+.3f} apart) told apart at "
                f"{confidence:.0%} confidence with {power:.0%} power",
                (col,),
            )
        )
        moments.append(mom)
    cols = []
    for m in models:
        _, inst, y = _by_review(table, correct, m)
        f = None if prediction is None else _by_review(table, prediction, m)[2]
        col, mom = _column(m, inst, y, f, e * (1 - e), margin / z)
        cols.append(col)
        moments.append(mom)
    if cols:
        targets.append(
            Target(
                "margin",
                f"every model's share correct within ±{margin * 100:g} points at "
                f"{confidence:.0%} confidence",
                tuple(cols),
            )
        )
    if tau_difference is not None:
        label, inst, diff = tau_difference
        diff = np.asarray(diff, dtype=float)
        ok = ~np.isnan(diff)
        if ok.sum() >= 3:
            d = float(diff[ok].mean())
            se = target_se("difference", difference=d, confidence=confidence, power=power)
            half = 0.5 * float(np.var(diff[ok], ddof=1))
            col, mom = _column(label, np.asarray(inst)[ok], diff[ok], None, half, se)
            targets.append(
                Target(
                    "metric_tau",
                    f"{label}: the difference of their mean taus (now {d:+.3f}) told from 0 "
                    f"at {confidence:.0%} confidence with {power:.0%} power",
                    (col,),
                )
            )
            moments.append(mom)
    return targets, moments


def possible_sections(pool: Pool, designs: Sequence[Design] | None = None) -> set[str]:
    """The sections some design gives with every instruction of the pool doubly reviewed."""
    out: set[str] = set()
    for design in designs or standard_designs():
        doubled = pool.instructions if (design.mixed or design.overlap >= 2) else 0
        out |= set(sections_of(design, doubled=doubled, pool=pool))
    return out


def compare_round(
    targets: Sequence[Target],
    pool: Pool,
    *,
    required: Sequence[str] = tuple(SECTIONS),
    designs: Sequence[Design] | None = None,
) -> tuple[list[Comparison], Comparison | None]:
    """Each target's comparison, and one for every target at once (the slowest column of any
    target decides), which is the design to assign. A required section that no design can
    give with this pool (leave-one-clinician-out with two clinicians, a human ceiling's
    interval with fewer patients than its floor) is not asked of any: see
    :func:`possible_sections`."""
    possible = possible_sections(pool, designs)
    required = [k for k in required if k in possible]
    each = [
        compare(t.key, t.label, t.columns, pool, designs=designs, required=required)
        for t in targets
    ]
    columns = [c for t in targets for c in t.columns]
    every = (
        compare("all", "every target at once", columns, pool, designs=designs, required=required)
        if targets
        else None
    )
    return each, every
