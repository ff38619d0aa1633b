"""Coverage of the report's 95% intervals at 10-60 clusters, by simulation (``bench_coverage``).

Each cell is a statistic, a number of clusters (patients) and a within-patient correlation;
each replicate draws a fresh study with a known truth and asks whether the interval the report
would show covers it. What the report ships is simulated as it runs:

- **taus, shares, paired differences**: patients with 1-3 instructions, each instruction's six
  responses (six models, MedAlign's shares correct) ranked and marked by two clinicians, two
  metrics whose reliability varies from patient to patient. The interval is
  ``intervals.studentized_totals`` on the patients' totals (the function every
  ``cluster_mean`` of the report calls), beside the percentile cluster bootstrap of the same
  resamples (what the report used before);
- **prediction-powered shares**: a third of the patients reviewed, a calibrated predictor
  everywhere; ``ppi.ppi_mean_clustered`` as the report calls it (cross-fitted lambda,
  Student's t) beside same-label tuning with the normal interval;
- **adaptive shares**: two waves, the second drawn where the predictor is least sure;
  ``adaptive_design.ranking_status`` (what the admin's page shows) beside lambda and gamma
  tuned on the labels with the normal interval;
- **rubric scores**: patients with 1-3 instructions, each with a rubric of five positive
  criteria and a harm criterion (HealthBench's shape) graded on three models' responses by two
  clinicians who flip a verdict 10% of the time; per model the app's mean clipped score and
  HealthBench's aggregate (the clip of the unclipped mean), with ``rubrics.score_interval``
  (what the report calls) beside the percentile cluster bootstrap.

The truth: exact for shares (``Phi``/the clinicians' error rate), by one large simulation
(400,000 reviews, Monte Carlo error under 0.001) for taus and differences.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps
from scipy.special import expit, logit

from scoring.reports.statistics.active import active_contrasts, active_moments
from scoring.reports.statistics.adaptive_design import inclusion_probabilities, ranking_status
from scoring.reports.statistics.intervals import studentized_totals
from scoring.reports.statistics.ppi import ppi_mean_clustered
from scoring.reports.statistics.resampling import _cluster_counts
from scoring.reports.statistics.table import Array, _tau_b_padded

SHARES = (0.65, 0.59, 0.53, 0.47, 0.40, 0.32)  # MedAlign's range, GPT-4 to MPT-7B
CLUSTER_COUNTS = (10, 15, 30, 60)
# Patient-level spread of a response's quality and of a metric's reliability: with none, the
# per-review values of one patient correlate only through the instruction two clinicians
# share (about 0.15); "0.3" gives a within-patient correlation of about 0.3 (printed).
# The third value: the patient-level spread of the prediction-powered and adaptive cells'
# latent quality (their clinicians' verdicts are averaged per instruction: a larger spread
# reaches the same correlation).
ICC_LEVELS: dict[str, tuple[float, float, float]] = {
    "low": (0.0, 0.0, 0.0),
    "0.3": (0.75, 0.9, 1.6),
}
MAX_INSTRUCTIONS = 3  # per patient: 1 + Binomial(2, 0.3)
REVIEWS = 2  # clinicians per instruction
CLINICIAN_ERROR = 0.10  # the predictor cells' clinicians flip the true verdict this often
BOOTSTRAP = 1999


@dataclass
class Cell:
    """One statistic at one size and correlation: how often each method covered the truth."""

    statistic: str
    n_clusters: int
    icc: str
    covered: dict[str, list[Array]] = field(default_factory=dict)
    width: dict[str, list[Array]] = field(default_factory=dict)
    note: str = ""

    def add(self, method: str, covered: Array, width: Array) -> None:
        self.covered.setdefault(method, []).append(np.asarray(covered, dtype=bool).ravel())
        self.width.setdefault(method, []).append(np.asarray(width, dtype=float).ravel())

    def coverage(self, method: str) -> float:
        return float(np.concatenate(self.covered[method]).mean())

    def mean_width(self, method: str) -> float:
        return float(np.nanmean(np.concatenate(self.width[method])))

    def replicates(self, method: str) -> int:
        return int(np.concatenate(self.covered[method]).size)


# --- taus, shares and paired differences ----------------------------------------------------
@dataclass(frozen=True)
class ReviewDraw:
    """Per-patient totals of the per-review (per-judgement) values of each statistic."""

    sums: dict[str, Array]  # statistic -> (R, G)
    counts: dict[str, Array]
    items: dict[str, tuple[Array, Array]]  # statistic -> (values, present) per patient cell


def _draw_reviews(
    replicates: int, n_clusters: int, level: tuple[float, ...], rng: np.random.Generator
) -> ReviewDraw:
    patient_sd, reliability_sd = level[0], level[1]
    r, g, i, j, k = replicates, n_clusters, MAX_INSTRUCTIONS, REVIEWS, len(SHARES)
    sizes = 1 + rng.binomial(MAX_INSTRUCTIONS - 1, 0.3, size=(r, g))
    present = (np.arange(i)[None, None, :] < sizes[..., None])[..., None]  # (R, G, I, 1)
    present = np.broadcast_to(present, (r, g, i, j)).astype(float)
    spread = np.sqrt(patient_sd**2 + 0.6**2 + 0.8**2 + 0.7**2)
    mu = sps.norm.ppf(np.asarray(SHARES)) * spread
    quality = (
        mu
        + patient_sd * rng.normal(size=(r, g, 1, 1))
        + 0.6 * rng.normal(size=(r, g, i, 1))
        + 0.8 * rng.normal(size=(r, g, i, k))
    )
    perceived = quality[:, :, :, None, :] + 0.7 * rng.normal(size=(r, g, i, j, k))
    correct = (perceived > 0).astype(float)
    rank = sps.rankdata(-perceived, axis=-1)

    def metric(scale: float) -> Array:
        beta = scale * np.exp(
            reliability_sd * rng.normal(size=(r, g, 1, 1)) - reliability_sd**2 / 2
        )
        return np.asarray(beta * quality + rng.normal(size=(r, g, i, k)), dtype=float)

    x = -rank.reshape(-1, k)
    taus = []
    for score in (metric(1.0), metric(0.7)):
        full = np.broadcast_to(score[:, :, :, None, :], rank.shape).reshape(-1, k)
        taus.append(_tau_b_padded(x, full)[0].reshape(r, g, i, j))
    values = {"tau": taus[0], "difference": taus[0] - taus[1]}
    for m in range(k):
        values[f"share {m + 1}"] = correct[..., m]
    sums = {name: np.where(present > 0, v, 0.0).sum((2, 3)) for name, v in values.items()}
    counts = {name: present.sum((2, 3)) for name in values}
    return ReviewDraw(sums, counts, {name: (v, present) for name, v in values.items()})


def within_patient_correlation(values: Array, present: Array) -> float:
    """The correlation of two values of one patient (pairwise, pooled over patients)."""
    y = np.where(present > 0, values, 0.0).reshape(values.shape[0] * values.shape[1], -1)
    w = present.reshape(y.shape)
    n = w.sum(-1)
    mean = float((y * w).sum() / w.sum())
    var = float((((y - mean) ** 2) * w).sum() / w.sum())
    s = ((y - mean) * w).sum(-1)
    ss = (((y - mean) ** 2) * w).sum(-1)
    cross = float((s**2 - ss).sum() / (n * (n - 1)).sum())
    return cross / var if var > 0 else float("nan")


def _by_patient(values: Array, patient: Array) -> tuple[Array, Array]:
    """Values of one statistic per instruction as (1, patients, slots) with a presence mask."""
    order = np.argsort(patient, kind="stable")
    counts = np.bincount(patient)
    slot = np.arange(values.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)
    out = np.zeros((1, counts.shape[0], int(counts.max())))
    present = np.zeros(out.shape)
    out[0, patient[order], slot] = values[order]
    present[0, patient[order], slot] = 1.0
    return out, present


def review_truth(
    level: tuple[float, ...], rng: np.random.Generator
) -> tuple[dict[str, float], dict[str, float]]:
    """Each statistic's true value (shares exact, taus from 400,000 reviews) and its
    within-patient correlation."""
    big = _draw_reviews(1, 100_000, level, rng)
    truth = {name: float(big.sums[name].sum() / big.counts[name].sum()) for name in big.sums}
    for m, share in enumerate(SHARES):
        truth[f"share {m + 1}"] = share
    icc = {
        name: within_patient_correlation(*big.items[name])
        for name in ("tau", "difference", "share 1")
    }
    return truth, icc


def _bounds(statistic: str) -> tuple[float, float]:
    if statistic == "tau":
        return (-1.0, 1.0)
    if statistic == "difference":
        return (-2.0, 2.0)
    return (0.0, 1.0)


def review_cells(
    replicates: int,
    level_name: str,
    truth: dict[str, float],
    rng: np.random.Generator,
    batch: int = 250,
) -> Iterator[Cell]:
    level = ICC_LEVELS[level_name]
    alpha = 0.05
    for g in CLUSTER_COUNTS:
        draws = _cluster_counts(g, BOOTSTRAP, 1000 + g)
        cells = {name: Cell(name, g, level_name) for name in truth}
        done = 0
        while done < replicates:
            r = min(batch, replicates - done)
            draw = _draw_reviews(r, g, level, rng)
            for name, cell in cells.items():
                s, n = draw.sums[name], draw.counts[name]
                res = studentized_totals(s, n, draws, 1 - alpha, bounds=_bounds(name))
                cell.add(
                    "studentized",
                    (res.low <= truth[name]) & (truth[name] <= res.high),
                    res.high - res.low,
                )
                boot = (s @ draws.T) / (n @ draws.T)
                lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2], axis=-1)
                cell.add("percentile", (lo <= truth[name]) & (truth[name] <= hi), hi - lo)
            done += r
        yield from cells.values()


# --- prediction-powered and adaptive shares ---------------------------------------------------
def _draw_predicted(
    replicates: int,
    sizes: Array,
    patient_sd: float,
    rng: np.random.Generator,
    strength: float = 1.2,
) -> tuple[Array, Array, Array]:
    """``(yhat, y, patient)``: (R, N, K) predictor and two clinicians' mean verdict per
    instruction, and each instruction's patient."""
    patient = np.repeat(np.arange(sizes.shape[0]), sizes)
    n, k = patient.shape[0], len(SHARES)
    spread = np.sqrt(patient_sd**2 + 0.8**2 + 1.0)
    latent = (
        (patient_sd * rng.normal(size=(replicates, sizes.shape[0], 1)))[:, patient]
        + 0.8 * rng.normal(size=(replicates, n, 1))
        + rng.normal(size=(replicates, n, k))
    )
    truth = (latent < sps.norm.ppf(np.asarray(SHARES)) * spread).astype(float)
    y = np.zeros(truth.shape)
    for _ in range(REVIEWS):
        flip = rng.random(truth.shape) < CLINICIAN_ERROR
        y += np.where(flip, 1.0 - truth, truth)
    y /= REVIEWS
    signal = strength * (2.0 * truth - 1.0) + rng.normal(size=truth.shape)
    yhat = expit(logit(np.asarray(SHARES)) + 2.0 * strength * signal)
    return np.asarray(yhat, dtype=float), y, patient


def predicted_truth() -> Array:
    p = np.asarray(SHARES)
    return np.asarray(p * (1 - CLINICIAN_ERROR) + (1 - p) * CLINICIAN_ERROR, dtype=float)


def ppi_cells(
    replicates: int, level_name: str, rng: np.random.Generator, batch: int = 100
) -> Iterator[Cell]:
    """A third of the patients reviewed (all their instructions), the rest predicted only."""
    patient_sd = ICC_LEVELS[level_name][2]
    truth = predicted_truth()
    z = float(sps.norm.ppf(0.975))
    for g in CLUSTER_COUNTS:
        cells = [Cell(f"PPI share {m + 1}", g, level_name) for m in range(len(SHARES))]
        done = 0
        while done < replicates:
            r = min(batch, replicates - done)
            sizes = 1 + rng.binomial(MAX_INSTRUCTIONS - 1, 0.3, size=3 * g)
            yhat, y, patient = _draw_predicted(r, sizes, patient_sd, rng)
            lab = patient < g
            for rep in range(r):
                for m, cell in enumerate(cells):
                    args = (
                        y[rep, lab, m],
                        yhat[rep, lab, m],
                        patient[lab],
                        yhat[rep, ~lab, m],
                        patient[~lab],
                    )
                    new = ppi_mean_clustered(*args)
                    cell.add(
                        "cross-fit, t",
                        np.array(new.ci_low <= truth[m] <= new.ci_high),
                        np.array(new.ci_high - new.ci_low),
                    )
                    old = ppi_mean_clustered(*args, tuning="same labels", interval="z")
                    hit = old.estimate - z * old.se <= truth[m] <= old.estimate + z * old.se
                    cell.add("same labels, z", np.array(hit), np.array(2 * z * old.se))
            done += r
        yield from cells


def _two_waves(
    yhat: Array, patient: Array, target: int, rng: np.random.Generator
) -> tuple[Array, Array]:
    """The first half of the instructions uniform, the second where the predictor is least
    sure (the root of its summed ``f (1 - f)``), each wave at a rate that reviews ``target``
    patients in expectation."""
    n = yhat.shape[-2]
    sizes = np.bincount(patient)
    lo, hi = 1e-4, 1.0
    for _ in range(50):  # the rate whose expected reviewed patients is the target
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if (1 - (1 - mid) ** sizes).sum() < target else (lo, mid)
    rate = (lo + hi) / 2
    pi = np.full(yhat.shape[:-1], rate)
    half = n // 2
    doubt = np.sqrt((yhat[..., half:, :] * (1 - yhat[..., half:, :])).sum(-1))
    pi[..., half:] = inclusion_probabilities(doubt, rate * (n - half), min(0.1, rate))
    return rng.random(pi.shape) < pi, pi


def adaptive_cells(
    replicates: int, level_name: str, rng: np.random.Generator, batch: int = 200
) -> Iterator[Cell]:
    patient_sd = ICC_LEVELS[level_name][2]
    truth = predicted_truth()
    k = len(SHARES)
    z = float(sps.norm.ppf(0.975))
    for g in CLUSTER_COUNTS:
        cells = [Cell(f"adaptive share {m + 1}", g, level_name) for m in range(k)]
        reviewed: list[Array] = []
        done = 0
        while done < replicates:
            r = min(batch, replicates - done)
            sizes = 1 + rng.binomial(MAX_INSTRUCTIONS - 1, 0.3, size=3 * g)
            yhat, y, patient = _draw_predicted(r, sizes, patient_sd, rng)
            xi, pi = _two_waves(yhat, patient, g, rng)
            status = ranking_status(yhat, y, xi, pi, clusters=patient)
            members = np.eye(sizes.shape[0])[patient]
            reviewed.append(((xi.astype(float) @ members) > 0).sum(-1))
            old = active_contrasts(active_moments(yhat, y, xi, pi, clusters=patient), np.eye(k))
            for m, cell in enumerate(cells):
                new = status.shares
                cell.add(
                    "fixed lambda, CR2 t",
                    (new.lower[:, m] <= truth[m]) & (truth[m] <= new.upper[:, m]),
                    new.upper[:, m] - new.lower[:, m],
                )
                hit = np.abs(old.estimate[:, m] - truth[m]) <= z * old.se[:, m]
                cell.add("tuned, z", hit, 2 * z * old.se[:, m])
            done += r
        mean_reviewed = float(np.concatenate(reviewed).mean())
        for cell in cells:
            cell.note = f"{mean_reviewed:.1f} patients reviewed on average"
        yield from cells


# --- rubric scores ---------------------------------------------------------------------------
RUBRIC_POINTS = (5.0, 3.0, 2.0, 2.0, 1.0, -4.0)  # five positive criteria and a harm criterion
RUBRIC_MODELS = (1.2, 0.0, -1.2)  # each model's mean quality: a strong, a middling, a weak one
RUBRIC_EASE = (1.0, 0.3, 0.0, -0.5, -1.0, -2.0)  # how readily each criterion is met


def _draw_rubrics(
    replicates: int, n_clusters: int, patient_sd: float, rng: np.random.Generator
) -> ReviewDraw:
    """Per-patient totals of each model's clinicians' rubric score (clipped: ``score m``) and
    unclipped score (``raw m``), one response per model and instruction."""
    r, g, i, m = replicates, n_clusters, MAX_INSTRUCTIONS, len(RUBRIC_MODELS)
    points, ease = np.asarray(RUBRIC_POINTS), np.asarray(RUBRIC_EASE)
    sizes = 1 + rng.binomial(MAX_INSTRUCTIONS - 1, 0.3, size=(r, g))
    present = (np.arange(i)[None, None, :] < sizes[..., None]).astype(float)  # (R, G, I)
    quality = (
        np.asarray(RUBRIC_MODELS)
        + patient_sd * rng.normal(size=(r, g, 1, 1))
        + 0.6 * rng.normal(size=(r, g, i, 1))
        + 0.8 * rng.normal(size=(r, g, i, m))
    )
    # A positive criterion is met more often by a better response, the harm one less often.
    sign = np.where(points > 0, 1.0, -1.0)
    met = rng.random((r, g, i, m, points.size)) < expit(ease + sign * quality[..., None])
    positive = points[points > 0].sum()
    score = np.zeros((r, g, i, m))
    raw = np.zeros((r, g, i, m))
    for _ in range(REVIEWS):
        flip = rng.random(met.shape) < CLINICIAN_ERROR
        seen = np.where(flip, ~met, met)
        mine = (seen * points).sum(-1) / positive
        raw += mine / REVIEWS
        score += np.clip(mine, 0.0, 1.0) / REVIEWS
    sums, counts, items = {}, {}, {}
    for k in range(m):
        for name, v in ((f"score {k + 1}", score[..., k]), (f"raw {k + 1}", raw[..., k])):
            sums[name] = (v * present).sum(-1)
            counts[name] = present.sum(-1)
            items[name] = (v[..., None], present[..., None])
    return ReviewDraw(sums, counts, items)


def rubric_truth(patient_sd: float, rng: np.random.Generator) -> tuple[dict[str, float], float]:
    """Each model's mean clipped score and unclipped mean (HealthBench clips the latter), from
    one large simulation (100,000 patients), and the within-patient correlation of model 1's
    score."""
    big = _draw_rubrics(1, 100_000, patient_sd, rng)
    truth = {name: float(big.sums[name].sum() / big.counts[name].sum()) for name in big.sums}
    return truth, within_patient_correlation(*big.items["score 1"])


def rubric_cells(
    replicates: int,
    level_name: str,
    truth: dict[str, float],
    rng: np.random.Generator,
    batch: int = 250,
) -> Iterator[Cell]:
    """Per model and size: the app's mean score (bounded to [0, 1]) and HealthBench's
    aggregate (the unclipped mean's interval, clipped) through ``rubrics.score_interval``'s
    method, beside the percentile cluster bootstrap on the same resamples."""
    patient_sd = ICC_LEVELS[level_name][0]
    alpha = 0.05
    models = len(RUBRIC_MODELS)
    for g in CLUSTER_COUNTS:
        draws = _cluster_counts(g, BOOTSTRAP, 2000 + g)
        cells = {}
        for k in range(models):
            cells[f"score {k + 1}"] = Cell(f"rubric score {k + 1}", g, level_name)
            cells[f"raw {k + 1}"] = Cell(f"HealthBench aggregate {k + 1}", g, level_name)
        done = 0
        while done < replicates:
            r = min(batch, replicates - done)
            draw = _draw_rubrics(r, g, patient_sd, rng)
            for name, cell in cells.items():
                s, n = draw.sums[name], draw.counts[name]
                clipped = name.startswith("score")
                bounds = (0.0, 1.0) if clipped else None
                target = truth[name] if clipped else min(max(truth[name], 0.0), 1.0)
                res = studentized_totals(s, n, draws, 1 - alpha, bounds=bounds)
                boot = (s @ draws.T) / (n @ draws.T)
                pairs = (
                    ("studentized", res.low, res.high),
                    ("percentile", *np.quantile(boot, [alpha / 2, 1 - alpha / 2], axis=-1)),
                )
                for method, lo, hi in pairs:
                    lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
                    cell.add(method, (lo <= target) & (target <= hi), hi - lo)
            done += r
        yield from cells.values()


# --- the whole bench --------------------------------------------------------------------------
SHIPPED = {
    "review": "studentized",
    "ppi": "cross-fit, t",
    "adaptive": "fixed lambda, CR2 t",
    "rubric": "studentized",
}
BEFORE = {
    "review": "percentile",
    "ppi": "same labels, z",
    "adaptive": "tuned, z",
    "rubric": "percentile",
}


@dataclass
class CoverageBench:
    replicates: int
    cells: list[tuple[str, Cell]]  # (family, cell)
    icc: dict[str, dict[str, float]]  # level -> statistic -> measured within-patient correlation
    seconds: float
    cpu_seconds: float


def bench(
    replicates: int = 2000,
    *,
    seed: int = 0,
    families: tuple[str, ...] = ("review", "ppi", "adaptive", "rubric"),
    levels: tuple[str, ...] = tuple(ICC_LEVELS),
    progress: Callable[[str], None] | None = None,
) -> CoverageBench:
    rng = np.random.default_rng(seed)
    started, cpu = time.perf_counter(), time.process_time()
    out: list[tuple[str, Cell]] = []
    icc: dict[str, dict[str, float]] = {}
    for level in levels:
        truth, icc[level] = review_truth(ICC_LEVELS[level], rng)
        sizes = 1 + rng.binomial(MAX_INSTRUCTIONS - 1, 0.3, size=30_000)
        _, y, patient = _draw_predicted(1, sizes, ICC_LEVELS[level][2], rng)
        icc[level]["predicted share 1"] = within_patient_correlation(
            *_by_patient(y[0, :, 0], patient)
        )
        if "review" in families:
            out += [("review", c) for c in review_cells(replicates, level, truth, rng)]
            if progress:
                progress(f"taus, shares, differences at ICC {level}")
        if "ppi" in families:
            out += [("ppi", c) for c in ppi_cells(replicates, level, rng)]
            if progress:
                progress(f"prediction-powered shares at ICC {level}")
        if "adaptive" in families:
            out += [("adaptive", c) for c in adaptive_cells(replicates, level, rng)]
            if progress:
                progress(f"adaptive shares at ICC {level}")
        if "rubric" in families:
            rubric, icc[level]["rubric score 1"] = rubric_truth(ICC_LEVELS[level][0], rng)
            out += [("rubric", c) for c in rubric_cells(replicates, level, rubric, rng)]
            if progress:
                progress(f"rubric scores at ICC {level}")
    return CoverageBench(
        replicates, out, icc, time.perf_counter() - started, time.process_time() - cpu
    )
