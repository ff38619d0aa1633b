"""The consensus a report scores metrics against: the latent-class models against crowd-kit on
fixed data, the majority and adjudicated consensus by hand, and the consensus tables."""

import math

import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import MACE, DawidSkene
from scipy import stats

from scoring.reports.statistics import JudgementTable
from scoring.reports.statistics.consensus import (
    FIRST_BETTER,
    SECOND_BETTER,
    TIE,
    consensus,
    dawid_skene,
    mace,
    ranking_pairs,
)
from tests.bench.consensus_sim import simulate

# crowd-kit 1.4.2 passes pandas 3 a keyword it deprecates; the oracle's answers are unaffected.
pytestmark = pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")


def _fixed_labels(n_tasks: int = 60, seed: int = 7) -> pd.DataFrame:
    """Five workers of known accuracy (0.95 … 0.55) label binary tasks, four per task.

    Workers and labels appear first in sorted order (worker 0 labels task 0 first, and label 0
    comes before 1): crowd-kit's MACE indexes its estimates partly by order of appearance and
    partly by sorted order, which agree only then.
    """
    rng = np.random.default_rng(seed)
    accuracy = [0.95, 0.9, 0.8, 0.7, 0.55]
    truth = rng.integers(0, 2, n_tasks)
    truth[0] = 0
    rows = []
    for t in range(n_tasks):
        workers = sorted(rng.choice(5, size=4, replace=False)) if t else [0, 1, 2, 3]
        for w in workers:
            label = truth[t] if rng.random() < accuracy[w] else 1 - truth[t]
            rows.append((t, w, int(label)))
    rows[0] = (0, 0, 0)
    return pd.DataFrame(rows, columns=["task", "worker", "label"])


def _three_label_data() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 3, 40)
    truth[0] = 0
    rows = []
    for t in range(40):
        for w in range(4):
            good = rng.random() < [0.9, 0.75, 0.6, 0.4][w]
            label = truth[t] if good else int(rng.integers(0, 3))
            rows.append((t, w, int(label)))
    rows[0], rows[1] = (0, 0, 0), (0, 1, 1)
    rows[2] = (0, 2, 2)
    return pd.DataFrame(rows, columns=["task", "worker", "label"])


@pytest.mark.parametrize("data", [_fixed_labels(), _three_label_data()], ids=["binary", "three"])
def test_dawid_skene_matches_crowd_kit(data):
    ours = dawid_skene(data.task, data.worker, data.label)
    theirs = DawidSkene(n_iter=100).fit(data)
    probas = theirs.probas_.reindex(columns=sorted(theirs.probas_.columns)).sort_index()
    assert list(ours.classes) == list(probas.columns)
    np.testing.assert_allclose(ours.probas, probas.to_numpy(), atol=1e-8)
    assert ours.n_iter == len(theirs.loss_history_)
    np.testing.assert_allclose(ours.loss_history, theirs.loss_history_, rtol=1e-9)
    np.testing.assert_allclose(
        ours.parameters["priors"], theirs.priors_.reindex(sorted(theirs.priors_.index)), atol=1e-8
    )
    # The error matrices, row by row: errors[w, observed, true].
    errors = theirs.errors_
    for (worker, observed), row in errors.iterrows():
        for true, value in row.items():
            assert ours.parameters["errors"][worker, observed, true] == pytest.approx(
                value, abs=1e-8
            )
    assert list(ours.labels) == list(theirs.labels_.sort_index())


@pytest.mark.parametrize("data", [_fixed_labels(), _three_label_data()], ids=["binary", "three"])
def test_mace_matches_crowd_kit(data):
    ours = mace(data.task, data.worker, data.label)
    theirs = MACE(n_restarts=1).fit(data)
    probas = theirs.probas_.reindex(columns=sorted(theirs.probas_.columns)).sort_index()
    np.testing.assert_allclose(ours.probas, probas.to_numpy(), rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(ours.parameters["spamming"], theirs.spamming_, rtol=1e-7)
    np.testing.assert_allclose(ours.parameters["thetas"], theirs.thetas_, rtol=1e-7)
    assert list(ours.labels) == list(theirs.labels_.sort_index())
    # crowd-kit's restarts share one seed: ten of them give what one does.
    ten = MACE(n_restarts=10).fit(data)
    np.testing.assert_allclose(ten.spamming_, theirs.spamming_)


def test_reliabilities_order_the_workers_as_their_accuracy_does():
    data = _fixed_labels(n_tasks=400, seed=11)
    ds = dawid_skene(data.task, data.worker, data.label)
    mc = mace(data.task, data.worker, data.label)
    # Known accuracies 0.95, 0.9, 0.8, 0.7, 0.55: Dawid–Skene's reliability estimates them.
    np.testing.assert_allclose(ds.reliability, [0.95, 0.9, 0.8, 0.7, 0.55], atol=0.06)
    assert list(np.argsort(-mc.reliability)) == [0, 1, 2, 3, 4]


def test_a_worker_with_no_label_has_no_reliability():
    ds = dawid_skene([0, 0, 1], [0, 1, 0], [1, 1, 0], n_workers=3)
    assert math.isnan(ds.reliability[2]) and not math.isnan(ds.reliability[0])
    with pytest.raises(ValueError, match="every task"):
        dawid_skene([0, 2], [0, 0], [1, 1], n_tasks=3)


def _table(rows):
    """(review, instruction, clinician, response, rank, correct) rows."""
    cols = list(zip(*rows, strict=True))
    n = len(rows)
    return JudgementTable(
        review=np.array(cols[0]),
        instruction=np.array(cols[1]),
        clinician=np.array(cols[2]),
        model=np.array([f"m{r % 3}" for r in cols[3]], dtype=object),
        response=np.array(cols[3]),
        rank=np.array(cols[4], dtype=float),
        correct=np.array(cols[5], dtype=float),
        position=np.zeros(n, dtype=np.int64),
        category=np.array(["c"] * n, dtype=object),
        specialty=np.array(["s"] * n, dtype=object),
    )


# Instruction 1 (responses 10, 11, 12) reviewed by clinicians 1, 2, 3; instruction 2
# (responses 20, 21) by clinicians 1 and 2, who split on response 20's correctness.
ROWS = [
    (101, 1, 1, 10, 1, 1), (101, 1, 1, 11, 2, 1), (101, 1, 1, 12, 3, 0),
    (102, 1, 2, 10, 1, 1), (102, 1, 2, 11, 3, 0), (102, 1, 2, 12, 2, 0),
    (103, 1, 3, 10, 2, 1), (103, 1, 3, 11, 1, 1), (103, 1, 3, 12, 3, 0),
    (201, 2, 1, 20, 1, 1), (201, 2, 1, 21, 2, 0),
    (202, 2, 2, 20, 2, 0), (202, 2, 2, 21, 1, 0),
]  # fmt: skip


def test_majority_consensus_by_hand():
    result = consensus(_table(ROWS), "majority")
    table = result.table
    got = {
        int(r): (k, c) for r, k, c in zip(table.response, table.rank, table.correct, strict=True)
    }
    # Mean ranks 10: 4/3, 11: 2, 12: 8/3 -> 1, 2, 3; correct votes 3/3, 2/3, 0/3.
    assert got[10] == (1.0, 1.0) and got[11] == (2.0, 1.0) and got[12] == (3.0, 0.0)
    # Instruction 2: mean ranks 1.5 and 1.5 tie; response 20 split 1-1 is undecided.
    assert got[21] == (1.0, 0.0) and got[20][0] == 1.0 and math.isnan(got[20][1])
    assert result.n_undecided == 1
    assert set(table.review) == {1, 2} and set(table.clinician) == {0}
    # Scores align with the consensus rows through a row judging the same response.
    scores = {"m": np.arange(len(ROWS), dtype=float)}
    aligned = result.aligned(scores)["m"]
    source = _table(ROWS).response
    assert all(source[int(s)] == r for s, r in zip(aligned, table.response, strict=True))


def test_adjudicated_consensus_takes_the_resolution_where_there_is_one():
    result = consensus(_table(ROWS), "adjudicated", adjudicated={20: (2.0, 0.0), 21: (1.0, 1.0)})
    got = {
        int(r): (k, c)
        for r, k, c in zip(
            *[getattr(result.table, f) for f in ("response", "rank", "correct")], strict=True
        )
    }
    assert got[20] == (2.0, 0.0) and got[21] == (1.0, 1.0)
    assert got[10] == (1.0, 1.0)  # the majority elsewhere
    assert result.n_adjudicated_instructions == 1 and result.n_undecided == 0


def test_ranking_pairs_label_each_review_s_order():
    table = _table(ROWS)
    pairs, task, rows, labels = ranking_pairs(table)
    assert {frozenset(p) for p in pairs} == {
        frozenset(p) for p in [(10, 11), (10, 12), (11, 12), (20, 21)]
    }
    assert task.shape == rows.shape == labels.shape == (11,)
    rank = dict(zip(zip(table.review, table.response, strict=True), table.rank, strict=True))
    for t, row, label in zip(task, rows, labels, strict=True):
        first, second = pairs[t]
        review = table.review[row]
        assert table.response[row] == first
        a, b = rank[(review, first)], rank[(review, second)]
        assert label == (FIRST_BETTER if a < b else SECOND_BETTER if a > b else TIE)
    tie = _table([(1, 1, 1, 10, 1, 1), (1, 1, 1, 11, 1, 1)])
    assert list(ranking_pairs(tie)[3]) == [TIE]
    # Which response comes first follows neither the ids' order nor quality: over many pairs
    # of consecutive ids, about half put the lower id first.
    many = _table([(1, 1, 1, r, r % 7 + 1, 1) for r in range(200)])
    firsts = ranking_pairs(many)[0]
    assert 0.4 < np.mean(firsts[:, 0] < firsts[:, 1]) < 0.6


@pytest.mark.parametrize("method", ["dawid_skene", "mace"])
def test_latent_consensus_gives_a_ranking_and_reliabilities(method):
    result = consensus(_table(ROWS), method)
    table = result.table
    ranks = {int(r): k for r, k in zip(table.response, table.rank, strict=True)}
    assert sorted(ranks[r] for r in (10, 11, 12)) == [1.0, 2.0, 3.0]
    assert set(result.reliability) == {1, 2, 3}
    assert all(0.0 <= v["correct"] <= 1.0 for v in result.reliability.values())
    assert not np.isnan(table.correct).any()


@pytest.mark.parametrize("method", ["dawid_skene", "mace"])
def test_latent_consensus_recovers_simulated_truth_better_than_the_majority(method):
    """Six clinicians of reliability 0.95 … 0.5, three per instruction: weighing them by
    their estimated reliability gets more verdicts and orders right than counting them."""
    sim = simulate(n_instructions=150, seed=5)

    def right(result):
        t = result.table
        verdicts = np.mean(
            [c == sim.true_correct[int(r)] for r, c in zip(t.response, t.correct, strict=True)]
        )
        firsts = [
            sim.true_rank[int(r)] == 1.0
            for r, k in zip(t.response, t.rank, strict=True)
            if k == 1.0
        ]
        return verdicts, np.mean(firsts)

    latent, majority = consensus(sim.table, method), consensus(sim.table, "majority")
    latent_verdicts, latent_firsts = right(latent)
    majority_verdicts, majority_firsts = right(majority)
    assert latent_verdicts > majority_verdicts
    assert latent_firsts >= majority_firsts - 0.02
    estimated = [latent.reliability[c]["correct"] for c in range(6)]
    # The most and the least reliable are found; the order is nearly the true one.
    assert int(np.argmax(estimated)) in (0, 1) and int(np.argmin(estimated)) in (4, 5)
    assert stats.kendalltau(estimated, sim.reliability).statistic > 0.7
