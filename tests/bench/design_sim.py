"""Study designs replayed on the bench's generator (``manage.py bench_study``, "Study design").

The generator is ``study_sim``'s (six models, instructions with a shared difficulty, clinicians
who flip the true verdict at 5-15%, a predictor of set quality), with every clinician's verdict
kept apart so that one design can use one clinician an instruction, another two, another one
on most and two on an agreement subset. Per design and estimator: the clinician reviews needed
to reach the interval width uniform overlap-2 clinicians-only reaches at a fixed budget, that
count against the design's floor (``design.floor_variance``, with the share of the variance the
best predictor from the same scores could explain, computed exactly from the generator's
posterior), and the coverage of every interval at the fixed budget and at first-wave sizes.

Every estimator is the one the report ships, through the function the report calls:

- clinicians only: the share judged correct as the leaderboard gives it (a mean over the
  judgements, clusters = instructions here) with the studentized cluster bootstrap
  (``intervals.studentized_totals``, 1,999 resamples), the gap between two models the same
  mean of paired differences;
- prediction-powered: ``ppi.ppi_means_clustered`` (the batched ``ppi_mean_clustered``:
  lambda cross-fitted over five folds, Student's t at the reviewed clusters' G - 1); the joint
  predictor, a model fitted on other folds, goes in as a cross-fitted predictor (lambda 1), as
  fold models do in the report;
- adaptive: ``adaptive_design.ranking_status`` (lambda fixed at 1 below ``ACTIVE_TUNE_MIN``
  reviewed patients, CR2 with Bell & McCaffrey's degrees of freedom), its gaps between the
  neighbours of the estimated order.

Reviews are compared on each estimator's own variance (``2 z sqrt(mean se^2)``, the width a
normal interval of that variance would have), the floor's likewise; coverage on the intervals
themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps
from scipy.special import expit, logit

from scoring.reports.statistics.active import Array, MeanCI
from scoring.reports.statistics.adaptive_design import gap_contrasts, ranking_status
from scoring.reports.statistics.design import Column, floor_variance
from scoring.reports.statistics.joint_predictor import cross_fitted, joint_features
from tests.bench.adaptive_sim import simulate_adaptive
from tests.bench.shipped import clinicians_only, prediction_powered, se_width
from tests.bench.study_sim import SimStudy

FOLDS = 5
QUADRATURE_NODES = 32
CHUNK = 100  # replicates at a time where an array grows with them times nodes or features


@dataclass(frozen=True)
class Reviews:
    """One simulated study per replicate: (R, N, K) arrays, clinicians on the last axis of
    ``verdicts`` (R, N, K, C)."""

    yhat: Array
    verdicts: Array
    truth: Array


def simulate_reviews(
    study: SimStudy,
    strength: float | tuple[float, ...],
    replicates: int,
    rng: np.random.Generator,
    clinicians: int = 3,
) -> Reviews:
    """``study_sim.simulate_study``'s generator with each clinician's verdict kept: clinician
    ``c`` of instruction ``i`` is drawn from the pool, one rate for the six responses of one
    review, independently of the other clinicians of that instruction."""
    p = np.asarray(study.true_correct)
    shape = (replicates, study.n_instructions, p.shape[0])
    sd = study.difficulty_sd
    latent = rng.normal(0.0, sd, shape[:2])[..., None] + rng.normal(0.0, 1.0, shape)
    truth = (latent < sps.norm.ppf(p) * np.sqrt(1.0 + sd**2)).astype(float)
    errors = np.asarray(study.clinician_error)
    verdicts = np.empty((*shape, clinicians))
    for c in range(clinicians):
        rate = errors[rng.integers(0, errors.shape[0], shape[:2])][..., None]
        verdicts[..., c] = np.where(rng.random(shape) < rate, 1.0 - truth, truth)
    levels = np.atleast_1d(np.asarray(strength, dtype=float))
    if levels.size == 1 and levels[0] < 0:
        yhat = expit(rng.normal(0.0, 1.5, shape))
    else:
        per = levels[rng.integers(0, levels.size, shape[:2])][..., None]
        signal = per * (2.0 * truth - 1.0) + rng.normal(0.0, 1.0, shape)
        yhat = expit(logit(p) + 2.0 * per * signal)
    return Reviews(np.asarray(yhat, dtype=float), verdicts, truth)


def posterior(
    study: SimStudy, strength: float | tuple[float, ...], yhat: Array
) -> tuple[Array, Array]:
    """What the best predictor from an instruction's scores knows: ``E[T | scores]`` (R, N, K)
    and ``E[T_j T_{j+1} | scores]`` (R, N, K-1), by Gauss-Hermite quadrature over the shared
    difficulty and a sum over the signal strengths (an instruction whose every score equals
    its model's share was drawn at strength 0)."""
    p = np.asarray(study.true_correct)
    k = p.shape[0]
    sd = study.difficulty_sd
    nodes, weights = np.polynomial.hermite.hermgauss(QUADRATURE_NODES)  # type: ignore[no-untyped-call]
    d = sd * np.sqrt(2.0) * nodes
    log_w = np.log(weights / np.sqrt(np.pi))
    q = sps.norm.cdf(sps.norm.ppf(p) * np.sqrt(1.0 + sd**2) - d[:, None])  # (Q, K)
    levels = np.atleast_1d(np.asarray(strength, dtype=float))
    useless = levels.size == 1 and levels[0] < 0
    u = np.clip(logit(np.clip(yhat, 1e-12, 1 - 1e-12)) - logit(p), -1e6, 1e6)  # 2 a s
    zero = np.all(np.abs(u) < 1e-9, axis=-1)  # (R, N): strength 0 (or a useless predictor)
    means = np.empty(yhat.shape)
    pairs = np.empty((*yhat.shape[:-1], k - 1))
    for start in range(0, yhat.shape[0], CHUNK):
        part = slice(start, start + CHUNK)
        uu, zz = u[part], zero[part]
        log_joint, ratio = [], []
        for a in levels if not useless else np.array([0.0]):
            if a <= 0:
                l1 = l0 = np.ones(uu.shape)
                allowed = zz if not useless else np.ones(zz.shape, dtype=bool)
                jac = 0.0
            else:
                s = uu / (2.0 * a)
                l1, l0 = sps.norm.pdf(s - a), sps.norm.pdf(s + a)
                allowed = ~zz
                jac = -k * math.log(2.0 * a)
            on = q * l1[..., None, :]  # (r, N, Q, K)
            total = on + (1.0 - q) * l0[..., None, :]
            lj = np.log(np.maximum(total, 1e-300)).sum(-1) + log_w + jac  # (r, N, Q)
            lj = np.where(allowed[..., None], lj - math.log(levels.size), -np.inf)
            log_joint.append(lj)
            ratio.append(on / np.maximum(total, 1e-300))
        lj_all = np.stack(log_joint, axis=-2)  # (r, N, L, Q)
        lj_all -= lj_all.max(axis=(-2, -1), keepdims=True)
        post = np.exp(lj_all)
        post /= post.sum(axis=(-2, -1), keepdims=True)
        r = np.stack(ratio, axis=-3)  # (r, N, L, Q, K)
        means[part] = np.einsum("...lq,...lqk->...k", post, r)
        pairs[part] = np.einsum("...lq,...lqk->...k", post, r[..., :-1] * r[..., 1:])
    return means, pairs


def contrasts(k: int) -> dict[str, Array]:
    """The two targets' columns: every model's share; each gap between neighbours."""
    eye = np.eye(k)
    return {"shares": eye, "gaps": eye[:-1] - eye[1:]}


@dataclass(frozen=True)
class ColumnTruth:
    """Per contrast: the moments ``design`` plans with, measured on the generator."""

    between: Array
    within: Array
    explained: Array  # the predictor's own (linear) R2
    explained_floor: Array  # the best predictor's from the same scores
    adaptive_gain: dict[int, Array]  # per overlap

    def columns(self, se_target: float, *, floor: bool = False) -> list[Column]:
        r2 = self.explained_floor if floor else self.explained
        return [
            Column(f"c{j}", float(self.between[j]), float(self.within[j]), float(r2[j]), se_target)
            for j in range(self.between.shape[0])
        ]


def _flat(a: Array) -> Array:
    return np.asarray(a.reshape(-1, a.shape[-1]), dtype=float)


def column_truth(
    study: SimStudy, reviews: Reviews, post: tuple[Array, Array], c: Array
) -> ColumnTruth:
    """B, W and R2 (the predictor's, and the floor's) of each contrast row of ``c``."""
    e = study.mean_error
    mu = (e + (1 - 2 * e) * reviews.truth) @ c.T  # (R, N, P)
    one = reviews.verdicts[..., 0] @ c.T
    f = reviews.yhat @ c.T
    m, pair = post
    best = (e + (1 - 2 * e) * m) @ c.T
    between = _flat(mu).var(axis=0)
    within = ((_flat(one) - _flat(mu)) ** 2).mean(axis=0)
    fc = _flat(f) - _flat(f).mean(0)
    mc = _flat(mu) - _flat(mu).mean(0)
    explained = (fc * mc).mean(0) ** 2 / (fc.var(0) * between)
    explained_floor = _flat(best).var(axis=0) / between
    # Var(c'T | scores) per instruction: the diagonal of the posterior covariance, and the
    # neighbours' covariance (a gap's two models); other pairs never meet in one contrast here.
    var_t = m * (1 - m)
    cov_next = pair - m[..., :-1] * m[..., 1:]
    cond = np.einsum("...k,pk->...p", var_t, c**2)
    cond += 2 * np.einsum("...k,pk->...p", cov_next, c[:, :-1] * c[:, 1:])
    cond = (1 - 2 * e) ** 2 * _flat(cond)
    gain = {}
    for k in (1, 2, 3):
        v = np.maximum(cond + within / k, 1e-12)
        gain[k] = np.sqrt(v).mean(0) ** 2 / v.mean(0)
    return ColumnTruth(between, within, explained, explained_floor, gain)


@dataclass(frozen=True)
class SimDesign:
    key: str
    label: str
    overlap: int
    mixed: bool
    method: str  # "classical", "ppi", "ppi-joint", "adaptive"


SIM_DESIGNS = (
    SimDesign("overlap2-classical", "uniform overlap 2, clinicians only", 2, False, "classical"),
    SimDesign("overlap2-ppi", "uniform overlap 2, prediction-powered", 2, False, "ppi"),
    SimDesign("overlap2-ppi-joint", "uniform overlap 2, joint predictor", 2, False, "ppi-joint"),
    SimDesign("overlap2-adaptive", "adaptive overlap 2, prediction-powered", 2, False, "adaptive"),
    SimDesign("overlap3-classical", "uniform overlap 3, clinicians only", 3, False, "classical"),
    SimDesign("overlap1-classical", "uniform overlap 1, clinicians only", 1, False, "classical"),
    SimDesign("overlap1-ppi", "uniform overlap 1, prediction-powered", 1, False, "ppi"),
    SimDesign("overlap1-ppi-joint", "uniform overlap 1, joint predictor", 1, False, "ppi-joint"),
    SimDesign("mixed-classical", "mixed, clinicians only", 1, True, "classical"),
    SimDesign("mixed-ppi", "mixed, prediction-powered", 1, True, "ppi"),
    SimDesign("mixed-ppi-joint", "mixed, joint predictor", 1, True, "ppi-joint"),
)
BASELINE_KEY = "overlap2-classical"


def design_labels(reviews: Reviews, design: SimDesign, doubled: int) -> Array:
    """Each instruction's label under ``design``: the mean of its first ``overlap`` clinicians,
    or (mixed) of two on the first ``doubled`` instructions and one elsewhere."""
    v = reviews.verdicts
    if not design.mixed:
        return np.asarray(v[..., : design.overlap].mean(-1), dtype=float)
    out = v[..., 0].copy()
    out[:, :doubled] = v[:, :doubled, :, :2].mean(-1)
    return np.asarray(out, dtype=float)


def _neighbour_gaps(values: Array) -> Array:
    t = np.swapaxes(values, -1, -2)  # (R, K, N)
    return np.asarray(t[..., :-1, :] - t[..., 1:, :], dtype=float)


def joint_prediction(yhat: Array, label: Array, n: int) -> Array:
    """The cross-fitted joint predictor with the first ``n`` instructions reviewed; each
    instruction is its own patient here, folds dealt round-robin."""
    big_n = yhat.shape[1]
    lab = np.zeros(yhat.shape[:2], dtype=bool)
    lab[:, :n] = True
    fold = np.arange(big_n) % FOLDS
    out = np.empty(yhat.shape)
    for start in range(0, yhat.shape[0], CHUNK):
        part = slice(start, start + CHUNK)
        x = joint_features(yhat[part][..., None])
        out[part] = cross_fitted(x, label[part], lab[part], fold, FOLDS)
    return out


@dataclass
class Estimate:
    shares: MeanCI
    gaps: MeanCI
    gaps_truth: Array  # (…, K-1): the true gaps, in the order the gaps were taken
    labelled: float  # mean instructions reviewed


def estimate(
    study: SimStudy,
    reviews: Reviews,
    design: SimDesign,
    n: int,
    doubled: int,
    rng: np.random.Generator,
    *,
    first_wave: bool = False,
    interval: bool = True,
) -> Estimate:
    """``design``'s estimates of the shares and neighbour gaps with (about) ``n`` instructions
    reviewed, the first ``n`` (instructions are exchangeable draws). ``first_wave``: adaptive
    after its first wave only (uniform at ``n`` of the wave's instructions). Without
    ``interval`` the clinicians-only estimates carry their standard errors alone."""
    y = design_labels(reviews, design, doubled)
    k = y.shape[-1]
    truth = study.estimand
    true_gaps = np.broadcast_to(truth[:-1] - truth[1:], (y.shape[0], k - 1))
    if design.method == "adaptive":
        mask = None
        if first_wave:
            width = study.wave_slices()[0].stop
            pi = np.full(y.shape[:2], n / width)
            xi = np.zeros(y.shape[:2], dtype=bool)
            xi[:, :width] = rng.random((y.shape[0], width)) < n / width
            mask = np.zeros(y.shape[:2])
            mask[:, :width] = 1.0
        else:
            big_n = study.n_instructions
            run = simulate_adaptive(
                reviews.yhat,
                y,
                study.wave_slices(),
                budget_fraction=n / big_n,
                pi_min=min(study.pi_min, n / big_n),
                rng=rng,
            )
            xi, pi = run.xi, run.pi
        status = ranking_status(reviews.yhat, y, xi, pi, mask=mask)
        ordered = np.einsum("...pk,k->...p", gap_contrasts(status.order), truth)
        return Estimate(status.shares, status.gaps_raw, ordered, float(xi.sum(-1).mean()))
    ys, dy = np.swapaxes(y, -1, -2), _neighbour_gaps(y)
    if design.method == "classical":
        counts = np.full(n, float(design.overlap))
        if design.mixed:
            counts[: min(doubled, n)] = 2.0
        return Estimate(
            clinicians_only(ys[..., :n] * counts, counts, (0.0, 1.0), interval),
            clinicians_only(dy[..., :n] * counts, counts, (-1.0, 1.0), interval),
            true_gaps,
            float(n),
        )
    joint = design.method == "ppi-joint"
    f = joint_prediction(reviews.yhat, y, n) if joint else reviews.yhat
    fs, df = np.swapaxes(f, -1, -2), _neighbour_gaps(f)
    return Estimate(
        prediction_powered(ys, fs, n, cross_fitted=joint),
        prediction_powered(dy, df, n, cross_fitted=joint),
        true_gaps,
        float(n),
    )


def _reviews_to_reach(curve: list[tuple[float, float]], target: float) -> float:
    """Reviews at which a width curve ``[(reviews, width)]`` first reaches ``target``
    (log-log interpolation); nan when it never does within the curve."""
    pts = sorted(curve)
    if pts and pts[0][1] <= target:
        return pts[0][0]
    for (r0, w0), (r1, w1) in zip(pts[:-1], pts[1:], strict=True):
        if w0 >= target >= w1 and w0 > w1:
            t = (math.log(w0) - math.log(target)) / (math.log(w0) - math.log(w1))
            return float(math.exp(math.log(r0) + t * (math.log(r1) - math.log(r0))))
    return math.nan


def floor_reviews(
    truth: ColumnTruth, design: SimDesign, pool: int, doubled: int, width: float, z: float
) -> float:
    """The fewest reviews at which ``design``'s floor reaches a mean interval ``width`` over
    the contrasts (continuous in the reviews, as the simulated curves are interpolated)."""
    uses_predictor = design.method != "classical"
    reviews = np.linspace(1.0, 3.0 * pool, 6000)
    if design.mixed:
        # Two clinicians on the agreement subset first, then one on each new instruction, then
        # (the pool spent) second clinicians on the rest.
        labelled = np.where(
            reviews <= 2 * doubled, reviews / 2, np.minimum(reviews - doubled, pool)
        )
        dbl = np.where(
            reviews <= 2 * doubled,
            reviews / 2,
            np.where(reviews - doubled <= pool, doubled, reviews - pool),
        )
        overlap = 1
    else:
        labelled = reviews / design.overlap
        dbl = np.zeros_like(labelled)  # every instruction at the design's own overlap
        overlap = design.overlap
    ok = (labelled <= pool) & (dbl <= labelled)
    widths = np.zeros(reviews.shape)
    for j in range(truth.between.shape[0]):
        v = floor_variance(
            between=float(truth.between[j]),
            within=float(truth.within[j]),
            explained=float(truth.explained_floor[j]) if uses_predictor else 0.0,
            pool=pool,
            labelled=np.maximum(labelled, 1e-9),
            doubled=dbl,
            overlap=overlap,
            adaptive_gain=float(truth.adaptive_gain[overlap][j])
            if design.method == "adaptive"
            else 1.0,
        )
        widths += 2 * z * np.sqrt(v)
    widths /= truth.between.shape[0]
    hit = np.flatnonzero(ok & (widths <= width))
    return float(reviews[hit[0]]) if hit.size else math.nan


@dataclass
class DesignCell:
    """One design at one predictor: reviews against the baseline and the floor, per target,
    and coverage per size."""

    design: SimDesign
    ratio: dict[str, float] = field(default_factory=dict)  # target -> reviews / baseline's
    floor_ratio: dict[str, float] = field(default_factory=dict)  # reviews / the floor's
    coverage: dict[str, float] = field(default_factory=dict)  # "size" -> shares and gaps pooled
    width: dict[str, float] = field(default_factory=dict)  # target -> width at the budget


@dataclass
class DesignBench:
    predictor: str
    correlation: float
    cells: list[DesignCell]
    truth: dict[str, ColumnTruth]
    baseline_width: dict[str, float]


def bench_designs(
    study: SimStudy,
    name: str,
    strength: float | tuple[float, ...],
    *,
    replicates: int,
    reviews: int,
    doubled: int,
    rng: np.random.Generator,
    first_waves: tuple[int, ...] = (20, 40),
    grid: tuple[int, ...] = (60, 90, 120, 160, 200, 240, 300, 360, 450, 600),
    designs: tuple[SimDesign, ...] = SIM_DESIGNS,
) -> DesignBench:
    """Every ``SIM_DESIGNS`` design at one predictor: widths over ``grid`` (clinician
    reviews), reviews to reach the baseline's width at ``reviews``, against the floor, and
    coverage at ``reviews`` and at each first-wave size (instructions reviewed)."""
    data = simulate_reviews(study, strength, replicates, rng)
    post = posterior(study, strength, data.yhat)
    k = data.yhat.shape[-1]
    truth = {t: column_truth(study, data, post, c) for t, c in contrasts(k).items()}
    correlation = float(np.corrcoef(data.yhat.ravel(), data.truth.ravel())[0, 1])
    big_n = study.n_instructions
    z = float(sps.norm.ppf(0.975))
    estimand = study.estimand
    cells = []
    curves: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for design in designs:
        cell = DesignCell(design)
        curves[design.key] = {"shares": [], "gaps": []}
        budgets = sorted({*grid, reviews})
        for budget in budgets:
            n = budget - doubled if design.mixed else budget // design.overlap
            if n < max(3, doubled if design.mixed else 3) or n > big_n:
                continue
            at_budget = budget == reviews
            est = estimate(study, data, design, n, doubled, rng, interval=at_budget)
            spent = (est.labelled + doubled) if design.mixed else est.labelled * design.overlap
            for target, ci in (("shares", est.shares), ("gaps", est.gaps)):
                curves[design.key][target].append((spent, se_width(ci, z)))
            if at_budget:
                cell.coverage[f"{reviews} reviews"] = _coverage(est, estimand)
                cell.width = {"shares": se_width(est.shares, z), "gaps": se_width(est.gaps, z)}
        for n in first_waves:
            if design.mixed and n < doubled:
                continue
            est = estimate(study, data, design, n, doubled, rng, first_wave=True)
            cell.coverage[f"first wave of {n} instructions"] = _coverage(est, estimand)
        cells.append(cell)
    base = next(c for c in cells if c.design.key == BASELINE_KEY)
    baseline_width = dict(base.width)
    for cell in cells:
        for target in ("shares", "gaps"):
            need = _reviews_to_reach(curves[cell.design.key][target], baseline_width[target])
            cell.ratio[target] = need / reviews
            fl = floor_reviews(
                truth[target], cell.design, big_n, doubled, baseline_width[target], z
            )
            cell.floor_ratio[target] = need / fl if fl > 0 else math.nan
    return DesignBench(name, correlation, cells, truth, baseline_width)


def _coverage(est: Estimate, shares_true: Array) -> float:
    cs, cg = est.shares.covers(shares_true), est.gaps.covers(est.gaps_truth)
    return float((cs.sum() + cg.sum()) / (cs.size + cg.size))
