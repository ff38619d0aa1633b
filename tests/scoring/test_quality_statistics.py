"""Each clinician's quality figures: the pieces against references, the floors, and the flags
on simulated clinicians whose faults are known."""

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from scoring.reports.statistics.quality import (
    MIN_GOLD_ITEMS,
    QualityRows,
    calibration_results,
    clinician_quality,
    cohen_kappa,
    kendall_tau_b,
    newcombe_difference,
)

N_RESPONSES = 4


def test_kappa_and_tau_match_the_libraries():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, 60)
    b = np.where(rng.random(60) < 0.8, a, 1 - a)
    table = np.zeros((2, 2))
    np.add.at(table, (a, b), 1)
    assert cohen_kappa(table) == pytest.approx(cohen_kappa_score(a, b))
    x, y = rng.integers(1, 5, 8).astype(float), rng.integers(1, 5, 8).astype(float)
    assert kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y, variant="b").statistic)
    assert math.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))  # no order on one side: no figure


def test_newcombe_interval_matches_the_published_example():
    # Newcombe (1998), Statistics in Medicine 17:873, table II, example (a): 56/70 vs 48/80.
    d, lo, hi = newcombe_difference(56, 70, 48, 80)
    assert d == pytest.approx(0.2)
    assert (round(lo, 4), round(hi, 4)) == (0.0524, 0.3339)


def _rows(reviews):
    """reviews: list of (clinician, instruction, ranks, verdicts, first_position_response)."""
    cols = {k: [] for k in QualityRows.__dataclass_fields__}
    for rid, (clinician, instruction, ranks, verdicts, order) in enumerate(reviews, start=1):
        for response in range(N_RESPONSES):
            cols["review"].append(rid)
            cols["clinician"].append(clinician)
            cols["instruction"].append(instruction)
            cols["response"].append(instruction * 10 + response)
            cols["rank"].append(float(ranks[response]))
            cols["correct"].append(float(verdicts[response]))
            cols["position"].append(order.index(response))
            cols["submitted_at"].append(float(rid))
            cols["time_spent"].append(30.0 if clinician != 3 else 5.0)
    return QualityRows(**{k: np.asarray(v) for k, v in cols.items()})


def _world(seed=0, n_instructions=40):
    """Clinicians 0-2 judge the truth with small noise; clinician 3 favours the response shown
    first and is fast; clinician 2 drifts: right early, wrong in their last reviews. Truth:
    response 0 best, responses 0-1 correct."""
    rng = np.random.default_rng(seed)
    truth_rank = [1, 2, 3, 4]
    truth_ok = [1, 1, 0, 0]
    reviews = []
    for i in range(n_instructions):
        for c in (0, 1, 2, 3):
            order = list(rng.permutation(N_RESPONSES))
            if c == 3:
                ranks = [1 + order.index(r) for r in range(N_RESPONSES)]
                verdicts = [1 if order.index(r) == 0 else truth_ok[r] for r in range(N_RESPONSES)]
            else:
                wrong = c == 2 and i >= n_instructions - 12
                flip = rng.random(N_RESPONSES) < (0.6 if wrong else 0.05)
                verdicts = [1 - v if f else v for v, f in zip(truth_ok, flip, strict=True)]
                ranks = truth_rank if not wrong else list(rng.permutation(N_RESPONSES) + 1)
            reviews.append((c, i, ranks, verdicts, [int(o) for o in order]))
    gold = {
        i * 10 + r: (float(truth_rank[r]), float(truth_ok[r]))
        for i in range(MIN_GOLD_ITEMS + 3)
        for r in range(N_RESPONSES)
    }
    return _rows(reviews), gold


def test_flags_name_the_known_faults_with_their_evidence():
    rows, gold = _world()
    result = clinician_quality(rows, gold=gold, window=10, n_resamples=300)
    kinds = {c: {f.kind for f in q.flags} for c, q in result.items()}
    assert "position" in kinds[3] and "speed" in kinds[3]
    assert "drift" in kinds[2]
    assert kinds[0] == set() and kinds[1] == set()
    position = result[3].position
    assert position.estimate == 1.0 and position.extra["chance"] == pytest.approx(0.25)
    # The flag says what was seen, on how many, against what.
    message = next(f.message for f in result[3].flags if f.kind == "position")
    assert "chance would give 25%" in message and f"{position.n} reviews" in message
    # Agreement with gold: every good clinician agrees mostly, with a Wilson interval.
    assert result[0].gold_correct.estimate > 0.85 and result[0].gold_correct.ci_low < 0.95
    assert result[0].gold_tau.estimate == pytest.approx(1.0)
    assert result[0].kappa.known and result[0].tau.estimate > result[3].tau.estimate


def test_below_the_floors_a_figure_says_too_few():
    rows, gold = _world(n_instructions=3)
    result = clinician_quality(rows, gold={k: v for k, v in gold.items() if k < 20})
    q = result[0]
    assert not q.gold_correct.known and q.gold_correct.note == "too few: 2 gold items, 5 needed"
    assert not q.kappa.known and q.kappa.note.startswith("too few")
    assert not q.drift.known and "reviews" in q.drift.note
    assert all(f.kind not in ("gold", "kappa", "drift") for f in q.flags)


def test_calibration_results_compare_with_the_reference():
    rows = _rows(
        [
            (0, 0, [1, 2, 3, 4], [1, 1, 0, 0], [0, 1, 2, 3]),  # as the reference
            (1, 0, [4, 3, 2, 1], [1, 0, 1, 0], [3, 2, 1, 0]),  # reversed, two verdicts off
        ]
    )
    reference = {r: (float(r + 1), float(r < 2)) for r in range(4)}
    got = {r.clinician: r for r in calibration_results(rows, reference)}
    assert (got[0].matches, got[0].verdicts, got[0].tau) == (4, 4, 1.0)
    assert (got[1].matches, got[1].verdicts, got[1].tau) == (2, 4, -1.0)
