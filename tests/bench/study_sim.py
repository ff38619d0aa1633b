"""A synthetic study with a known truth, replayed many times (``manage.py bench_study``).

Six models with set shares correct; instructions drawn afresh in every replicate, each with a
difficulty shared by the six responses (so the models' verdicts are correlated, as on real
instructions); clinicians who flip the true verdict at stated rates, each review by one
clinician drawn at random; a predictor of correctness whose quality is set, from noise that
knows nothing to a sharp, calibrated signal.

What the intervals estimate: the share of a model's responses a clinician would mark correct,
``p (1 - e) + (1 - p) e`` with ``e`` the clinicians' mean error rate. That is the quantity
clinicians' judgements measure (the clinicians are the reference), known exactly here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps
from scipy.special import expit, logit

from scoring.reports.statistics.active import Array, MeanCI
from scoring.reports.statistics.adaptive_design import gap_contrasts, ranking_status
from tests.bench.adaptive_sim import simulate_adaptive
from tests.bench.shipped import clinicians_only, prediction_powered, se_width

MEDALIGN_CORRECT = (0.65, 0.59, 0.53, 0.47, 0.40, 0.32)  # GPT-4 erred 35%, MPT-7B 68%
# Signal strength per level; several values: each instruction draws one (a predictor sure of some
# instructions, e.g. plain retrievals, and blind on others, e.g. long reasoning).
PREDICTORS: dict[str, tuple[float, ...]] = {
    "useless": (-1.0,),
    "weak": (0.5,),
    "moderate": (1.0,),
    "good": (1.6,),
    "strong": (2.4,),
    "uneven": (0.0, 3.0),
}
METHODS = ("classical", "ppi", "ppi+adaptive")


@dataclass(frozen=True)
class SimStudy:
    true_correct: tuple[float, ...] = MEDALIGN_CORRECT
    n_instructions: int = 303
    overlap: int = 2
    clinician_error: tuple[float, ...] = (0.05, 0.08, 0.10, 0.12, 0.15)
    difficulty_sd: float = 0.8
    waves: int = 5
    pi_min: float = 0.1

    @property
    def mean_error(self) -> float:
        return float(np.mean(self.clinician_error))

    @property
    def estimand(self) -> Array:
        """What a clinician would mark correct, on average, per model."""
        p = np.asarray(self.true_correct)
        e = self.mean_error
        return np.asarray(p * (1 - e) + (1 - p) * e, dtype=float)

    def wave_slices(self) -> list[slice]:
        edges = np.linspace(0, self.n_instructions, self.waves + 1).round().astype(int)
        return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def simulate_study(
    study: SimStudy,
    strength: float | tuple[float, ...],
    replicates: int,
    rng: np.random.Generator,
) -> tuple[Array, Array, Array]:
    """``(yhat, y, truth)``, each (replicates, instructions, models).

    A ``strength`` below 0 is the useless predictor: a probability drawn independently of
    everything. Otherwise the predictor is the calibrated posterior ``P(correct | s)`` of a
    signal ``s = strength (2T - 1) + N(0, 1)``: stronger signals, sharper predictions; with
    several strengths, each instruction draws one (sure of some instructions, blind on others)."""
    p = np.asarray(study.true_correct)
    shape = (replicates, study.n_instructions, p.shape[0])
    sd = study.difficulty_sd
    latent = rng.normal(0.0, sd, shape[:2])[..., None] + rng.normal(0.0, 1.0, shape)
    truth = (latent < sps.norm.ppf(p) * np.sqrt(1.0 + sd**2)).astype(float)
    errors = np.asarray(study.clinician_error)
    y = np.zeros(shape)
    for _ in range(study.overlap):
        # One review judges all six responses of an instruction: one clinician, one rate.
        rate = errors[rng.integers(0, errors.shape[0], shape[:2])][..., None]
        flip = rng.random(shape) < rate
        y += np.where(flip, 1.0 - truth, truth)
    y /= study.overlap
    levels = np.atleast_1d(np.asarray(strength, dtype=float))
    if levels.size == 1 and levels[0] < 0:
        yhat = expit(rng.normal(0.0, 1.5, shape))
    else:
        per = levels[rng.integers(0, levels.size, shape[:2])][..., None]
        signal = per * (2.0 * truth - 1.0) + rng.normal(0.0, 1.0, shape)
        yhat = expit(logit(p) + 2.0 * per * signal)
    return np.asarray(yhat, dtype=float), y, truth


def _within_model(values: Array) -> Array:
    """Each model's column centred on its own mean (over replicates and instructions)."""
    return np.asarray(values - values.mean(axis=(0, 1), keepdims=True), dtype=float)


def _pearson(a: Array, b: Array) -> float:
    """Pearson's correlation of two flattened arrays; 0 where either is constant."""
    a, b = np.ravel(a) - np.mean(a), np.ravel(b) - np.mean(b)
    scale = float(np.sqrt((a @ a) * (b @ b)))
    return float(a @ b) / scale if scale > 0 else 0.0


def truth_correlations(yhat: Array, truth: Array) -> tuple[float, float]:
    """The predictor's Pearson correlation with the true verdict: pooled over every response
    (what ``bench_study`` prints) and within model (each model centred on its own means, so the
    models' different shares correct add nothing; what a model's share or a gap leans on)."""
    return _pearson(yhat, truth), _pearson(_within_model(yhat), _within_model(truth))


MAX_STRENGTH = 6.0  # correlation 0.999+ with the truth: past every level worth asking for


def strength_for_correlation(
    study: SimStudy,
    target: float,
    *,
    within_model: bool = False,
    replicates: int = 40,
    seed: int = 0,
    tol: float = 1e-4,
) -> float:
    """The signal strength whose predictor reaches ``target`` correlation with the truth
    (pooled, or ``within_model``), by bisection on one fixed draw (the same random numbers at
    every strength, so the correlation rises smoothly with it). A strength of 0 still knows each
    model's share correct (pooled correlation about 0.22, within model 0): a target below what
    strength 0 reaches, or above ``MAX_STRENGTH``'s, is a ``ValueError``."""

    def corr(strength: float) -> float:
        yhat, _, truth = simulate_study(study, strength, replicates, np.random.default_rng(seed))
        return truth_correlations(yhat, truth)[1 if within_model else 0]

    low, high = 0.0, MAX_STRENGTH
    c_low, c_high = corr(low), corr(high)
    if not c_low <= target <= c_high:
        kind = "within model" if within_model else "pooled"
        raise ValueError(
            f"a correlation of {target:g} with the truth ({kind}) is outside what this "
            f"predictor reaches: {c_low:.3f} to {c_high:.3f}"
        )
    while high - low > tol:
        mid = (low + high) / 2
        if corr(mid) < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def _neighbours(values: Array) -> Array:
    """Model k minus model k+1 (models in their true order), as (…, K-1, N)."""
    v = np.swapaxes(values, -1, -2)
    return np.asarray(v[..., :-1, :] - v[..., 1:, :], dtype=float)


@dataclass
class MethodResult:
    shares: MeanCI
    gaps: MeanCI
    gaps_truth: Array  # (…, K-1): the true gaps in the order the gaps were taken
    instructions: float  # mean instructions reviewed


def run_methods(
    study: SimStudy,
    yhat: Array,
    y: Array,
    n: int,
    rng: np.random.Generator,
    *,
    alpha: float = 0.05,
    interval: bool = True,
) -> dict[str, MethodResult]:
    """The three designs at (about) ``n`` reviewed instructions of each replicate, each with
    the estimator the report ships (``tests.bench.shipped``; adaptive: ``ranking_status``,
    its gaps between the neighbours of the estimated order). Without ``interval`` the
    clinicians-only estimates carry their standard errors alone."""
    if alpha != 0.05:
        raise ValueError("the shipped intervals are 95% ones")
    big_n = study.n_instructions
    truth = study.estimand
    ys, fs = np.swapaxes(y, -1, -2), np.swapaxes(yhat, -1, -2)  # (R, K, N)
    dy, df = _neighbours(y), _neighbours(yhat)  # (R, K-1, N)
    true_gaps = np.broadcast_to(truth[:-1] - truth[1:], (y.shape[0], truth.shape[0] - 1))
    counts = np.full(n, float(study.overlap))
    out: dict[str, MethodResult] = {}
    # Instructions are exchangeable draws: the first n are a uniform sample.
    out["classical"] = MethodResult(
        clinicians_only(ys[..., :n] * counts, counts, (0.0, 1.0), interval),
        clinicians_only(dy[..., :n] * counts, counts, (-1.0, 1.0), interval),
        true_gaps,
        float(n),
    )
    out["ppi"] = MethodResult(
        prediction_powered(ys, fs, n, cross_fitted=False),
        prediction_powered(dy, df, n, cross_fitted=False),
        true_gaps,
        float(n),
    )
    run = simulate_adaptive(
        yhat,
        y,
        study.wave_slices(),
        budget_fraction=n / big_n,
        pi_min=min(study.pi_min, n / big_n),
        rng=rng,
        alpha=alpha,
    )
    status = ranking_status(yhat, y, run.xi, run.pi, alpha=alpha)
    out["ppi+adaptive"] = MethodResult(
        status.shares,
        status.gaps_raw,
        np.einsum("...pk,k->...p", gap_contrasts(status.order), truth),
        float(run.xi.sum(-1).mean()),
    )
    return out


@dataclass
class PredictorReport:
    name: str
    correlation: float  # predictor vs true verdict, pooled
    within_correlation: float = float("nan")  # the same, each model centred on its own means
    coverage: dict[str, float] = field(default_factory=dict)  # shares and gaps pooled
    coverage_shares: dict[str, float] = field(default_factory=dict)
    coverage_gaps: dict[str, float] = field(default_factory=dict)
    width: dict[str, float] = field(default_factory=dict)  # mean gap width at the fixed budget
    width_shares: dict[str, float] = field(default_factory=dict)
    reviews_ratio: dict[str, float] = field(default_factory=dict)  # vs uniform classical


@dataclass
class BenchResult:
    replicates: int
    reviews: int  # the fixed budget, in clinician reviews
    target_width: float
    seconds: float
    cpu_seconds: float  # this process's CPU time (the wall clock counts other loads too)
    predictors: list[PredictorReport]


def _reviews_to_reach(curve: list[tuple[float, float]], target: float, ceiling: float) -> float:
    """Instructions at which a width curve ``[(instructions, width)]`` first reaches
    ``target`` (log-log interpolation); ``ceiling`` if it never does."""
    pts = sorted(curve)
    for (n0, w0), (n1, w1) in zip(pts[:-1], pts[1:], strict=True):
        if w0 >= target >= w1 and w0 > w1:
            t = (np.log(w0) - np.log(target)) / (np.log(w0) - np.log(w1))
            return float(np.exp(np.log(n0) + t * (np.log(n1) - np.log(n0))))
    if pts and pts[0][1] <= target:
        return pts[0][0]
    return ceiling


def bench(
    study: SimStudy,
    *,
    replicates: int = 500,
    reviews: int = 240,
    seed: int = 0,
    alpha: float = 0.05,
    grid: tuple[float, ...] = (0.15, 0.25, 0.55, 0.75),
    predictors: dict[str, tuple[float, ...]] | None = None,
    progress: Callable[[str], None] | None = None,
) -> BenchResult:
    """Coverage and width at ``reviews`` clinician reviews, and reviews to reach the width
    uniform classical reaches with every instruction reviewed, for every predictor."""
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    cpu_started = time.process_time()
    big_n = study.n_instructions
    n_fixed = max(2, round(reviews / study.overlap))
    truth = study.estimand
    z = float(sps.norm.ppf(1.0 - alpha / 2.0))
    reports = []
    target = float("nan")
    for name, strength in (predictors or PREDICTORS).items():
        yhat, y, verdict = simulate_study(study, strength, replicates, rng)
        pooled, within = truth_correlations(yhat, verdict)
        report = PredictorReport(name=name, correlation=pooled, within_correlation=within)
        curves: dict[str, list[tuple[float, float]]] = {m: [] for m in METHODS}
        sizes = sorted({n_fixed, *(max(2, round(f * big_n)) for f in grid)})
        for n in sizes:
            results = run_methods(study, yhat, y, n, rng, alpha=alpha, interval=n == n_fixed)
            for method, res in results.items():
                curves[method].append((res.instructions, se_width(res.gaps, z)))
            if n != n_fixed:
                continue
            for method, res in results.items():
                cs = res.shares.covers(truth)
                cg = res.gaps.covers(res.gaps_truth)
                report.coverage_shares[method] = float(cs.mean())
                report.coverage_gaps[method] = float(cg.mean())
                report.coverage[method] = float((cs.sum() + cg.sum()) / (cs.size + cg.size))
                report.width[method] = se_width(res.gaps, z)
                report.width_shares[method] = se_width(res.shares, z)
        # The target: the width uniform classical reaches at the fixed budget.
        target = report.width["classical"] if np.isnan(target) else target
        base = _reviews_to_reach(curves["classical"], target, big_n)
        for method in METHODS:
            report.reviews_ratio[method] = _reviews_to_reach(curves[method], target, big_n) / base
        reports.append(report)
        if progress is not None:
            progress(name)
    return BenchResult(
        replicates=replicates,
        reviews=n_fixed * study.overlap,
        target_width=target,
        seconds=time.perf_counter() - started,
        cpu_seconds=time.process_time() - cpu_started,
        predictors=reports,
    )
