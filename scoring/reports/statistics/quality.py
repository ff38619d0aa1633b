"""Each clinician's reviewing, figure by figure, for the admin's quality page.

Nothing here judges anyone by one number: every figure comes with how many items it rests on
and an interval, says "too few" below a floor instead of a figure that would mean nothing, and a
flag is evidence for a person to read (``Flag.evidence``), never an exclusion.

Per clinician, over the submitted reviews given (one row per judgement):

- **agreement with the others**: on correctness, Cohen's kappa of the clinician's verdicts
  against every other clinician's verdict on the same responses (pooled over those pairs), and
  the plain share agreeing; on rankings, Kendall's tau-b between the clinician's review and each
  other review of the same instruction (over the responses both ranked), averaged. Intervals:
  percentile bootstrap over instructions (``n_resamples`` draws, ``seed``);
- **agreement with gold**: the share of the clinician's verdicts on gold items that equal the
  reference, with a Wilson interval, and the mean tau-b of their rankings against the
  reference's;
- **position bias**: how often the response shown first is among those they ranked best,
  against what chance gives (the shown order is random, so with ``b`` of ``n`` responses at the
  best rank, ``b / n``), with a Wilson interval;
- **time per review**: the median of the seconds the saving trail counted, and the quartiles;
- **drift**: the share of their verdicts agreeing with the other clinicians' majority in their
  latest ``window`` reviews against all their earlier ones (Newcombe's interval for the
  difference of two proportions, from Wilson's), and that share over a rolling window.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.stats as sps

from .leaderboard import wilson_interval
from .table import Array

# Below these, a figure is "too few" rather than a number: verdicts for a share, instructions
# for a bootstrap over instructions, gold items for agreement with gold.
MIN_VERDICTS = 10
MIN_INSTRUCTIONS = 5
MIN_GOLD_ITEMS = 5
MIN_REVIEWS = 5
QUALITY_RESAMPLES = 1000
# A clinician whose median time per review is below this share of the others' median is
# flagged (evidence only: some clinicians are fast).
FAST_SHARE = 1 / 3


@dataclass(frozen=True, eq=False)
class QualityRows:
    """One row per judgement of a submitted review (1-D arrays of one length).

    ``submitted_at`` is in seconds (any epoch) and ``time_spent`` in seconds, both per review
    (repeated on its rows)."""

    review: Array
    clinician: Array
    instruction: Array
    response: Array
    rank: Array
    correct: Array
    position: Array
    submitted_at: Array
    time_spent: Array

    def __post_init__(self) -> None:
        lengths = {np.asarray(getattr(self, f)).shape[0] for f in self.__dataclass_fields__}
        if len(lengths) > 1:
            raise ValueError(f"QualityRows fields have different lengths: {sorted(lengths)}")

    def __len__(self) -> int:
        return int(np.asarray(self.review).shape[0])


@dataclass(frozen=True)
class Figure:
    """One figure: the estimate and interval (nan when not computed), how many items it rests
    on, and why there is no figure when there is none ("too few: 3 verdicts, 10 needed")."""

    estimate: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    n: int = 0
    units: int = 0
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def known(self) -> bool:
        return not math.isnan(self.estimate)

    def as_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "n": self.n,
            "units": self.units,
            "note": self.note,
            **self.extra,
        }


@dataclass(frozen=True)
class Flag:
    kind: str  # "gold", "kappa", "position", "speed", "drift"
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class ClinicianQuality:
    clinician: int
    n_reviews: int
    kappa: Figure = field(default_factory=Figure)
    correct_agreement: Figure = field(default_factory=Figure)
    tau: Figure = field(default_factory=Figure)
    gold_correct: Figure = field(default_factory=Figure)
    gold_tau: Figure = field(default_factory=Figure)
    position: Figure = field(default_factory=Figure)
    time: Figure = field(default_factory=Figure)
    drift: Figure = field(default_factory=Figure)
    # (index of the window's last review, share agreeing with the others' majority) per window.
    drift_series: list[tuple[int, float]] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "clinician": self.clinician,
            "n_reviews": self.n_reviews,
            **{
                name: getattr(self, name).as_dict()
                for name in (
                    "kappa",
                    "correct_agreement",
                    "tau",
                    "gold_correct",
                    "gold_tau",
                    "position",
                    "time",
                    "drift",
                )
            },
            "drift_series": [[i, s] for i, s in self.drift_series],
            "flags": [{"kind": f.kind, "message": f.message, **f.evidence} for f in self.flags],
        }


def too_few(n: int, needed: int, what: str) -> str:
    if n == 0:
        return f"none yet: {needed} {what} needed"
    return f"too few: {n} {what}, {needed} needed"


# --- small helpers --------------------------------------------------------------------------------
def kendall_tau_b(x: Array, y: Array) -> float:
    """tau-b over the positions both ranked; nan with fewer than two distinct ranks either
    side (no information, never 0)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = ~np.isnan(x) & ~np.isnan(y)
    if ok.sum() < 2 or np.unique(x[ok]).size < 2 or np.unique(y[ok]).size < 2:
        return math.nan
    return float(sps.kendalltau(x[ok], y[ok], variant="b").statistic)


def cohen_kappa(counts: Array) -> float:
    """Cohen's kappa of a 2×2 table ``[[both no, a yes b no], [a no b yes, both yes]]``
    (any layout with agreements on the diagonal); nan when chance agreement is certain."""
    counts = np.asarray(counts, dtype=float)
    n = counts.sum()
    if n == 0:
        return math.nan
    observed = np.trace(counts) / n
    expected = float((counts.sum(axis=0) * counts.sum(axis=1)).sum()) / (n * n)
    if expected >= 1.0:
        return math.nan
    return float((observed - expected) / (1.0 - expected))


def _draws(n_units: int, n_resamples: int, seed: int) -> Array:
    """``(n_resamples, n_units)`` counts: how often each unit is drawn in each resample."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_units, size=(n_resamples, n_units))
    counts = np.zeros((n_resamples, n_units))
    np.add.at(counts, (np.repeat(np.arange(n_resamples), n_units), picks.ravel()), 1.0)
    return counts


def _percentile(values: Array, confidence: float) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    alpha = 1.0 - confidence
    lo, hi = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def newcombe_difference(
    k1: int, n1: int, k2: int, n2: int, confidence: float = 0.95
) -> tuple[float, float, float]:
    """``p1 - p2`` and Newcombe's hybrid score interval (method 10), from Wilson's."""
    if n1 == 0 or n2 == 0:
        return math.nan, math.nan, math.nan
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1, confidence)
    l2, u2 = wilson_interval(k2, n2, confidence)
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return d, max(-1.0, lo), min(1.0, hi)


# --- the figures ----------------------------------------------------------------------------------
@dataclass
class _Review:
    id: int
    clinician: int
    instruction: int
    submitted_at: float
    time_spent: float
    rank: dict[int, float]
    correct: dict[int, float]
    first: int | None  # the response shown first


def _reviews(rows: QualityRows) -> list[_Review]:
    out: dict[int, _Review] = {}
    for i in range(len(rows)):
        rid = int(rows.review[i])
        review = out.get(rid)
        if review is None:
            review = out[rid] = _Review(
                id=rid,
                clinician=int(rows.clinician[i]),
                instruction=int(rows.instruction[i]),
                submitted_at=float(rows.submitted_at[i]),
                time_spent=float(rows.time_spent[i]),
                rank={},
                correct={},
                first=None,
            )
        response = int(rows.response[i])
        review.rank[response] = float(rows.rank[i])
        review.correct[response] = float(rows.correct[i])
        if int(rows.position[i]) == 0:
            review.first = response
    return sorted(out.values(), key=lambda r: (r.submitted_at, r.id))


def _kappa_figure(
    cells: Mapping[int, Array], n_resamples: int, seed: int, confidence: float
) -> tuple[Figure, Figure]:
    """Kappa and the share agreeing, from per-instruction 2×2 tables, with bootstrap intervals
    over instructions."""
    units = sorted(cells)
    tables = np.array([cells[u] for u in units]).reshape(-1, 2, 2)
    total = tables.sum(axis=0)
    n = int(total.sum())
    if n < MIN_VERDICTS or len(units) < MIN_INSTRUCTIONS:
        note = (
            too_few(n, MIN_VERDICTS, "paired verdicts")
            if n < MIN_VERDICTS
            else too_few(len(units), MIN_INSTRUCTIONS, "instructions")
        )
        share = float(np.trace(total) / n) if n else math.nan
        return (
            Figure(n=n, units=len(units), note=note),
            Figure(n=n, units=len(units), note=note, extra={"observed": share}),
        )
    kappa = cohen_kappa(total)
    share = float(np.trace(total) / n)
    draws = _draws(len(units), n_resamples, seed)
    boot = np.einsum("bu,uij->bij", draws, tables)
    boot_n = boot.sum(axis=(1, 2))
    observed = np.trace(boot, axis1=1, axis2=2) / boot_n
    expected = (boot.sum(axis=1) * boot.sum(axis=2)).sum(axis=1) / boot_n**2
    with np.errstate(invalid="ignore", divide="ignore"):
        boot_kappa = (observed - expected) / (1.0 - expected)
    k_lo, k_hi = _percentile(boot_kappa, confidence)
    s_lo, s_hi = _percentile(observed, confidence)
    return (
        Figure(kappa, k_lo, k_hi, n=n, units=len(units)),
        Figure(share, s_lo, s_hi, n=n, units=len(units)),
    )


def _mean_figure(
    values_by_unit: Mapping[int, list[float]],
    n_resamples: int,
    seed: int,
    confidence: float,
    *,
    min_units: int,
    what: str,
) -> Figure:
    units = sorted(u for u, v in values_by_unit.items() if v)
    values = [x for u in units for x in values_by_unit[u]]
    n = len(values)
    if len(units) < min_units:
        return Figure(n=n, units=len(units), note=too_few(len(units), min_units, what))
    sums = np.array([sum(values_by_unit[u]) for u in units])
    counts = np.array([len(values_by_unit[u]) for u in units], dtype=float)
    draws = _draws(len(units), n_resamples, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (draws @ sums) / (draws @ counts)
    lo, hi = _percentile(boot, confidence)
    return Figure(float(np.mean(values)), lo, hi, n=n, units=len(units))


def _wilson_figure(
    k: int, n: int, *, needed: int, what: str, units: int = 0, **extra: Any
) -> Figure:
    if n < needed:
        estimate = k / n if n else math.nan
        return Figure(
            n=n, units=units, note=too_few(n, needed, what), extra={"observed": estimate, **extra}
        )
    lo, hi = wilson_interval(k, n)
    return Figure(k / n, lo, hi, n=n, units=units, extra={"k": k, **extra})


def clinician_quality(
    rows: QualityRows,
    *,
    gold: Mapping[int, tuple[float, float]] | None = None,
    window: int = 10,
    n_resamples: int = QUALITY_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[int, ClinicianQuality]:
    """Every clinician's figures and flags (see the module's docstring). ``gold`` maps a
    response id of a gold item to its reference (rank, correct), nan where unset."""
    gold = dict(gold or {})
    reviews = _reviews(rows)
    by_instruction: dict[int, list[_Review]] = defaultdict(list)
    for r in reviews:
        by_instruction[r.instruction].append(r)
    clinicians = sorted({r.clinician for r in reviews})
    out = {c: ClinicianQuality(clinician=c, n_reviews=0) for c in clinicians}
    cells: dict[int, dict[int, Array]] = {c: {} for c in clinicians}
    taus: dict[int, dict[int, list[float]]] = {c: defaultdict(list) for c in clinicians}
    gold_hits: dict[int, list[int]] = {c: [0, 0, 0] for c in clinicians}  # k, n, items
    gold_taus: dict[int, dict[int, list[float]]] = {c: defaultdict(list) for c in clinicians}
    majority_agree: dict[int, list[tuple[float, int, int]]] = {c: [] for c in clinicians}
    first_best: dict[int, list[float]] = {c: [0, 0, 0.0] for c in clinicians}  # k, n, expected
    times: dict[int, list[float]] = {c: [] for c in clinicians}
    for r in reviews:
        q = out[r.clinician]
        q.n_reviews += 1
        times[r.clinician].append(r.time_spent)
        others = [o for o in by_instruction[r.instruction] if o.clinician != r.clinician]
        table = cells[r.clinician].setdefault(r.instruction, np.zeros((2, 2)))
        for o in others:
            for response, mine in r.correct.items():
                theirs = o.correct.get(response, math.nan)
                if not (math.isnan(mine) or math.isnan(theirs)):
                    table[int(mine), int(theirs)] += 1
            common = sorted(set(r.rank) & set(o.rank))
            tau = kendall_tau_b(
                np.array([r.rank[x] for x in common]), np.array([o.rank[x] for x in common])
            )
            if not math.isnan(tau):
                taus[r.clinician][r.instruction].append(tau)
        # Agreement with the others' majority, for the drift signal.
        agree = total = 0
        for response, mine in r.correct.items():
            votes = [o.correct.get(response, math.nan) for o in others]
            votes = [v for v in votes if not math.isnan(v)]
            if math.isnan(mine) or not votes or 2 * sum(votes) == len(votes):
                continue
            total += 1
            agree += int(mine == float(2 * sum(votes) > len(votes)))
        majority_agree[r.clinician].append((r.submitted_at, agree, total))
        # Gold.
        refs = {x: gold[x] for x in r.correct if x in gold}
        if refs:
            hits = gold_hits[r.clinician]
            hits[2] += 1
            for response, (_rank, ref_correct) in refs.items():
                mine = r.correct.get(response, math.nan)
                if not (math.isnan(mine) or math.isnan(ref_correct)):
                    hits[0] += int(mine == ref_correct)
                    hits[1] += 1
            common = sorted(x for x in refs if not math.isnan(refs[x][0]))
            tau = kendall_tau_b(
                np.array([r.rank.get(x, math.nan) for x in common]),
                np.array([refs[x][0] for x in common]),
            )
            if not math.isnan(tau):
                gold_taus[r.clinician][r.id].append(tau)
        # Position: the response shown first among the best-ranked?
        ranked = {x: v for x, v in r.rank.items() if not math.isnan(v)}
        if r.first is not None and r.first in ranked and len(ranked) >= 2:
            best = min(ranked.values())
            n_best = sum(1 for v in ranked.values() if v == best)
            if n_best < len(ranked):  # a review tying everything says nothing about order
                pos = first_best[r.clinician]
                pos[0] += int(ranked[r.first] == best)
                pos[1] += 1
                pos[2] += n_best / len(ranked)
    medians = {c: float(np.median(t)) for c, t in times.items() if t}
    for c in clinicians:
        q = out[c]
        seed_c = seed + c
        q.kappa, q.correct_agreement = _kappa_figure(cells[c], n_resamples, seed_c, confidence)
        q.tau = _mean_figure(
            taus[c], n_resamples, seed_c, confidence, min_units=MIN_INSTRUCTIONS,
            what="instructions shared with others",
        )  # fmt: skip
        k, n, items = gold_hits[c]
        if items < MIN_GOLD_ITEMS:
            note = too_few(items, MIN_GOLD_ITEMS, "gold items")
            q.gold_correct = Figure(
                n=n, units=items, note=note, extra={"observed": k / n if n else math.nan}
            )
        else:
            q.gold_correct = _wilson_figure(k, n, needed=MIN_VERDICTS, what="verdicts", units=items)
        q.gold_tau = _mean_figure(
            gold_taus[c], n_resamples, seed_c, confidence, min_units=MIN_GOLD_ITEMS,
            what="ranked gold items",
        )  # fmt: skip
        pk, pn, expected = first_best[c]
        chance = expected / pn if pn else math.nan
        q.position = _wilson_figure(
            int(pk), int(pn), needed=MIN_REVIEWS, what="ranked reviews", chance=chance
        )
        t = np.asarray(times[c], dtype=float)
        if t.size:
            q1, q3 = np.quantile(t, [0.25, 0.75])
            q.time = Figure(float(np.median(t)), float(q1), float(q3), n=int(t.size))
        q.drift, q.drift_series = _drift(majority_agree[c], window, confidence)
        q.flags = _flags(q, out, medians, c)
    return out


def _drift(
    per_review: list[tuple[float, int, int]], window: int, confidence: float
) -> tuple[Figure, list[tuple[int, float]]]:
    """The latest ``window`` reviews' share agreeing with the others' majority, minus the
    earlier reviews' share; and the share over each rolling window."""
    window = max(2, int(window))
    agree = np.array([a for _, a, _ in per_review], dtype=float)
    total = np.array([n for _, _, n in per_review], dtype=float)
    series: list[tuple[int, float]] = []
    for end in range(window, agree.shape[0] + 1):
        n = total[end - window : end].sum()
        if n:
            series.append((end, float(agree[end - window : end].sum() / n)))
    if agree.shape[0] < 2 * window:
        return (
            Figure(n=int(agree.shape[0]), note=too_few(int(agree.shape[0]), 2 * window, "reviews")),
            series,
        )
    k1, n1 = int(agree[-window:].sum()), int(total[-window:].sum())
    k2, n2 = int(agree[:-window].sum()), int(total[:-window].sum())
    if n1 < MIN_VERDICTS or n2 < MIN_VERDICTS:
        return Figure(n=n1 + n2, note=too_few(min(n1, n2), MIN_VERDICTS, "verdicts shared")), series
    d, lo, hi = newcombe_difference(k1, n1, k2, n2, confidence)
    return (
        Figure(
            d, lo, hi, n=n1 + n2, units=int(agree.shape[0]),
            extra={"recent": k1 / n1, "earlier": k2 / n2, "window": window},
        ),
        series,
    )  # fmt: skip


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _flags(
    q: ClinicianQuality,
    everyone: Mapping[int, ClinicianQuality],
    medians: Mapping[int, float],
    c: int,
) -> list[Flag]:
    flags: list[Flag] = []
    others = [o for k, o in everyone.items() if k != c]
    g = q.gold_correct
    peer_k = sum(o.gold_correct.extra.get("k", 0) for o in others if o.gold_correct.known)
    peer_n = sum(o.gold_correct.n for o in others if o.gold_correct.known)
    if g.known and peer_n and g.ci_high < peer_k / peer_n:
        flags.append(
            Flag(
                "gold",
                f"Agrees with gold on {_pct(g.estimate)} of verdicts ({_pct(g.ci_low)}–"
                f"{_pct(g.ci_high)}, {g.n} verdicts on {g.units} items); the others together, "
                f"{_pct(peer_k / peer_n)}.",
                {"estimate": g.estimate, "ci_high": g.ci_high, "peers": peer_k / peer_n},
            )
        )
    peer_kappas = [o.kappa.estimate for o in others if o.kappa.known]
    if q.kappa.known and peer_kappas and q.kappa.ci_high < float(np.median(peer_kappas)):
        flags.append(
            Flag(
                "kappa",
                f"Agrees with colleagues on correctness less than the others do: kappa "
                f"{q.kappa.estimate:.2f} ({q.kappa.ci_low:.2f} to {q.kappa.ci_high:.2f}, "
                f"{q.kappa.n} paired verdicts); the others' median, "
                f"{float(np.median(peer_kappas)):.2f}.",
                {"kappa": q.kappa.estimate, "ci_high": q.kappa.ci_high},
            )
        )
    p = q.position
    chance = p.extra.get("chance", math.nan)
    if p.known and p.ci_low > chance:
        flags.append(
            Flag(
                "position",
                f"Ranks the response shown first among the best in {_pct(p.estimate)} of "
                f"reviews ({_pct(p.ci_low)}–{_pct(p.ci_high)}, {p.n} reviews); chance would "
                f"give {_pct(chance)}.",
                {"estimate": p.estimate, "ci_low": p.ci_low, "chance": chance},
            )
        )
    peer_medians = [m for k, m in medians.items() if k != c]
    if q.time.known and q.time.n >= MIN_REVIEWS and peer_medians:
        typical = float(np.median(peer_medians))
        if typical > 0 and q.time.estimate < FAST_SHARE * typical:
            flags.append(
                Flag(
                    "speed",
                    f"Takes {q.time.estimate:.0f} s per review (median of {q.time.n}); the "
                    f"others, {typical:.0f} s. Fast is not wrong: read it with the figures above.",
                    {"median_seconds": q.time.estimate, "others_seconds": typical},
                )
            )
    d = q.drift
    if d.known and d.ci_high < 0:
        flags.append(
            Flag(
                "drift",
                f"Agreed with the others' majority on {_pct(d.extra['recent'])} of verdicts in the "
                f"latest {d.extra['window']} reviews, against {_pct(d.extra['earlier'])} before "
                f"(difference {100 * d.estimate:.0f} points, {100 * d.ci_low:.0f} to "
                f"{100 * d.ci_high:.0f}).",
                {"difference": d.estimate, "ci_high": d.ci_high},
            )
        )
    return flags


@dataclass(frozen=True)
class CalibrationResult:
    """One calibration review against its reference: verdicts matching, and the tau-b of the
    rankings."""

    review: int
    clinician: int
    instruction: int
    matches: int
    verdicts: int
    tau: float


def calibration_results(
    rows: QualityRows, references: Mapping[int, tuple[float, float]]
) -> list[CalibrationResult]:
    out = []
    for r in _reviews(rows):
        refs = {x: references[x] for x in r.correct if x in references}
        matches = verdicts = 0
        for response, (_rank, ref) in refs.items():
            mine = r.correct.get(response, math.nan)
            if not (math.isnan(mine) or math.isnan(ref)):
                verdicts += 1
                matches += int(mine == ref)
        common = sorted(x for x in refs if not math.isnan(refs[x][0]))
        tau = kendall_tau_b(
            np.array([r.rank.get(x, math.nan) for x in common]),
            np.array([refs[x][0] for x in common]),
        )
        out.append(
            CalibrationResult(
                review=r.id,
                clinician=r.clinician,
                instruction=r.instruction,
                matches=matches,
                verdicts=verdicts,
                tau=tau,
            )
        )
    return out
