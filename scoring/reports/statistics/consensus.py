"""Which truth a report scores metrics against: the clinicians' consensus.

Several clinicians judge one instruction; a metric can be scored against each review on its own
(``reviews``: the paper's per-review tau, averaged) or against one consensus per instruction:

- ``majority``: per response, the share of clinicians who marked it correct (above one half:
  correct; below: incorrect; exactly one half: undecided, left out of correctness figures),
  and the responses ranked by their mean rank (equal means tie);
- ``adjudicated``: an adjudicator's resolved judgement where the instruction has one, the
  majority elsewhere;
- ``dawid_skene`` and ``mace``: latent-class estimates, which weigh each clinician by the
  reliability the model estimates for them. Correctness: one task per response, the labels
  correct/incorrect. Ranking: one task per pair of responses a review ranked, the label "first
  better", "tie" or "second better"; a response's consensus score is its expected share of
  wins over the other responses of its instruction (a tie counts one half), and the responses
  are ranked by it.

The two latent-class models are implemented here in numpy and follow crowd-kit's
``DawidSkene`` and ``MACE`` (Dawid & Skene 1979; Hovy et al. 2013) step for step, so that the
library, a test-side dependency, checks them on fixed data (``tests/scoring/test_consensus.py``):

- Dawid–Skene starts from the majority vote's label distribution; EM until the evidence lower
  bound per label improves by less than ``tol``. A clinician's reliability is the probability
  that their label equals the true one, ``sum_c prior_c * error[w, c, c]``.
- MACE (variational Bayes, Beta(0.5, 0.5) and Dirichlet(10) priors) starts from crowd-kit's
  seeded uniform draws. crowd-kit's restarts reuse one seed, so they all coincide; one run is
  made here. A clinician's reliability is their probability of "knowing" rather than
  "spamming", normalised from the two variational weights.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import digamma
from scipy.stats import rankdata

from .table import Array, JudgementTable

CONSENSUS_METHODS = ("reviews", "majority", "adjudicated", "dawid_skene", "mace")
CONSENSUS_LABELS = {
    "reviews": "each review on its own (no consensus)",
    "majority": "majority of clinicians",
    "adjudicated": "adjudicated where adjudicated, else the majority",
    "dawid_skene": "Dawid–Skene latent-class estimate",
    "mace": "MACE latent-class estimate",
}
LATENT_METHODS = ("dawid_skene", "mace")
_EPS = 1e-10
# Pairwise labels of the ranking tasks.
FIRST_BETTER, TIE, SECOND_BETTER = 0, 1, 2


# --- the latent-class models on (task, worker, label) triples ------------------------------------
@dataclass(frozen=True, eq=False)
class LatentClassFit:
    """A fit on ``n_tasks`` tasks, ``n_workers`` workers and the labels ``classes``.

    ``probas[t, k]`` is the probability that task ``t``'s true label is ``classes[k]``;
    ``reliability[w]`` the worker's estimated reliability (see the module's docstring; nan for
    a worker with no label). ``parameters`` holds the model's own estimates (Dawid–Skene:
    ``priors`` and ``errors[w, observed, true]``; MACE: ``spamming`` and ``thetas``).
    """

    method: str
    classes: Array
    probas: Array
    reliability: Array
    n_iter: int
    parameters: dict[str, Array] = field(default_factory=dict)
    loss_history: list[float] = field(default_factory=list)

    @property
    def labels(self) -> Array:
        """Each task's most probable label (the first class among equals)."""
        labels: Array = np.asarray(self.classes)[np.argmax(self.probas, axis=1)]
        return labels


def _encode(
    task: Any, worker: Any, label: Any, n_tasks: int | None, n_workers: int | None
) -> tuple[Array, Array, Array, Array, int, int]:
    t = np.asarray(task, dtype=np.int64)
    w = np.asarray(worker, dtype=np.int64)
    raw = np.asarray(label)
    if not t.shape == w.shape == raw.shape or t.ndim != 1:
        raise ValueError("task, worker and label must be 1-D arrays of one length")
    if t.size == 0:
        raise ValueError("no labels to aggregate")
    classes, lab = np.unique(raw, return_inverse=True)
    n_t = int(n_tasks) if n_tasks is not None else int(t.max()) + 1
    n_w = int(n_workers) if n_workers is not None else int(w.max()) + 1
    if t.min() < 0 or t.max() >= n_t or w.min() < 0 or w.max() >= n_w:
        raise ValueError("task and worker must be indices below n_tasks and n_workers")
    if np.bincount(t, minlength=n_t).min() == 0:
        raise ValueError("every task needs at least one label")
    return t, w, lab.reshape(-1).astype(np.int64), classes, n_t, n_w


def majority_probas(task: Any, label: Any, n_tasks: int, n_labels: int) -> Array:
    """Each task's share of votes per label (crowd-kit's ``MajorityVote`` probabilities)."""
    counts = np.zeros((n_tasks, n_labels))
    np.add.at(counts, (np.asarray(task), np.asarray(label)), 1.0)
    total = counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, counts / total, 0.0)


def dawid_skene(
    task: Any,
    worker: Any,
    label: Any,
    *,
    n_tasks: int | None = None,
    n_workers: int | None = None,
    n_iter: int = 100,
    tol: float = 1e-5,
) -> LatentClassFit:
    """Dawid and Skene's confusion-matrix model, fitted by EM (crowd-kit's ``DawidSkene``).

    E-step: ``log p(z_t = c) ∝ log prior_c + sum_{(w, l) on t} log error[w, l, c]``.
    M-step: ``error[w, l, c] ∝ sum_{t labelled l by w} p(z_t = c)`` (normalised over ``l``,
    floored at 1e-10 where ``w`` gave ``l``), ``prior = mean_t p(z_t)``. Stops when the
    evidence lower bound per label improves by less than ``tol``.
    """
    t, w, lab, classes, n_t, n_w = _encode(task, worker, label, n_tasks, n_workers)
    k = classes.shape[0]
    n_rows = t.shape[0]
    given = np.zeros((n_w, k), dtype=bool)
    given[w, lab] = True

    def m_step(probas: Array) -> Array:
        errors = np.zeros((n_w, k, k))
        np.add.at(errors, (w, lab), probas[t])
        errors = np.where(given[:, :, None], np.maximum(errors, _EPS), 0.0)
        totals = errors.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(totals > 0, errors / totals, 0.0)

    def e_step(priors: Array, errors: Array) -> Array:
        loglik = np.tile(np.log2(np.maximum(priors, _EPS)), (n_t, 1))
        np.add.at(loglik, t, np.log2(errors[w, lab]))
        scaled: Array = np.exp2(loglik - loglik.max(axis=1, keepdims=True))
        normalised: Array = scaled / scaled.sum(axis=1, keepdims=True)
        return normalised

    def lower_bound(probas: Array, priors: Array, errors: Array) -> tuple[float, Array]:
        with np.errstate(divide="ignore"):
            log_rows = np.log(errors[w, lab]) + np.log(np.maximum(priors, _EPS))[None, :]
        joint = float(np.nansum(probas[t] * log_rows))
        clipped = np.maximum(probas, _EPS)
        return joint - float((np.log(clipped) * clipped).sum()), clipped

    probas = majority_probas(t, lab, n_t, k)
    priors = probas.mean(axis=0)
    errors = m_step(probas)
    loss = -math.inf
    history: list[float] = []
    iterations = 0
    for _ in range(int(n_iter)):
        iterations += 1
        probas = e_step(priors, errors)
        priors = probas.mean(axis=0)
        errors = m_step(probas)
        bound, probas = lower_bound(probas, priors, errors)
        new_loss = bound / n_rows
        history.append(new_loss)
        if new_loss - loss < tol:
            break
        loss = new_loss
    priors = np.maximum(priors, _EPS)
    diagonal = errors[:, np.arange(k), np.arange(k)]
    reliability = (diagonal * priors[None, :]).sum(axis=1)
    reliability = np.where(given.any(axis=1), reliability, np.nan)
    return LatentClassFit(
        method="dawid_skene",
        classes=classes,
        probas=probas,
        reliability=reliability,
        n_iter=iterations,
        parameters={"priors": priors, "errors": errors},
        loss_history=history,
    )


def _variational_normalize(x: Array, hparams: Array) -> Array:
    norm = np.exp(digamma((x + hparams).sum(axis=1)))[:, None]
    out = np.zeros_like(x)
    ok = ~np.isclose(norm, 0.0)
    np.divide(np.exp(digamma(x + hparams)), norm, out=out, where=np.broadcast_to(ok, x.shape))
    return out


def mace(
    task: Any,
    worker: Any,
    label: Any,
    *,
    n_tasks: int | None = None,
    n_workers: int | None = None,
    n_iter: int = 50,
    alpha: float = 0.5,
    beta: float = 0.5,
    default_noise: float = 0.5,
    seed: int = 0,
) -> LatentClassFit:
    """Multi-Annotator Competence Estimation (crowd-kit's ``MACE``, variational Bayes).

    Each worker either knows the true label (and gives it) or spams, answering from their own
    label distribution ``theta_w``; the true label is uniform. ``spamming[w] = (spam, know)``
    are variational weights of the two states under a Beta(``alpha``, ``beta``) prior; the
    strategies ``theta`` have a symmetric Dirichlet(10) prior. ``n_iter`` rounds of
    (variational M-step, E-step) from crowd-kit's seeded start.
    """
    t, w, lab, classes, n_t, n_w = _encode(task, worker, label, n_tasks, n_workers)
    k = classes.shape[0]
    spamming = 1.0 + (1.0 + default_noise) * np.random.RandomState(seed).uniform(size=(n_w, 2))
    thetas = 1.0 + (1.0 + default_noise) * np.random.RandomState(seed).uniform(size=(n_w, k))
    spamming /= spamming.sum(axis=1, keepdims=True)
    thetas /= thetas.sum(axis=1, keepdims=True)
    theta_priors = np.tile([alpha, beta], (n_w, 1)).astype(float)
    strategy_priors = np.full((n_w, k), 10.0)
    answered = np.arange(k)[None, :] == lab[:, None]  # (rows, labels)

    def e_step(spam: Array, theta: Array) -> tuple[float, Array, Array, Array]:
        strategy = spam[w, 0] * theta[w, lab]
        knowing = spam[w, 1]
        per_label = strategy[:, None] + knowing[:, None] * answered  # (rows, labels)
        marginals = np.ones((n_t, k))
        np.multiply.at(marginals, t, per_label)
        marginals /= k
        instance = marginals.sum(axis=1)
        log_likelihood = float(np.log(instance + 1e-8).sum())
        strategy_marginal = (marginals[t] / per_label).sum(axis=1) * strategy / instance[t]
        strategy_counts = np.zeros((n_w, k))
        np.add.at(strategy_counts, (w, lab), strategy_marginal)
        knowing_rows = marginals[t, lab] * knowing / (strategy + knowing) / instance[t]
        knowing_counts = np.column_stack(
            [
                np.bincount(w, weights=strategy_marginal, minlength=n_w),
                np.bincount(w, weights=knowing_rows, minlength=n_w),
            ]
        )
        return log_likelihood, marginals, strategy_counts, knowing_counts

    _, marginals, strategy_counts, knowing_counts = e_step(spamming, thetas)
    for _ in range(int(n_iter)):
        spamming = _variational_normalize(knowing_counts, theta_priors)
        thetas = _variational_normalize(strategy_counts, strategy_priors)
        _, marginals, strategy_counts, knowing_counts = e_step(spamming, thetas)
    probas = marginals / marginals.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        reliability = spamming[:, 1] / spamming.sum(axis=1)
    labelled = np.bincount(w, minlength=n_w) > 0
    return LatentClassFit(
        method="mace",
        classes=classes,
        probas=probas,
        reliability=np.where(labelled, reliability, np.nan),
        n_iter=int(n_iter),
        parameters={"spamming": spamming, "thetas": thetas},
    )


def latent_fit(method: str, task: Any, worker: Any, label: Any, **kw: Any) -> LatentClassFit:
    if method == "dawid_skene":
        return dawid_skene(task, worker, label, **kw)
    if method == "mace":
        return mace(task, worker, label, **kw)
    raise ValueError(f"unknown latent-class method {method!r}")


# --- a consensus table from the reviews ---------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Consensus:
    """One judgement per response of the reviews' table, as a table of one pseudo-review per
    instruction (review id = instruction id, clinician 0, no shown position): what every
    statistic of a report can run on, as it does on the release's judgements.

    ``source_rows[i]`` is a row of the reviews' table judging the same response as row ``i``
    (to align metric scores); ``reliability`` maps a clinician id to their estimated
    reliability on correctness and on the ranking pairs (latent-class methods only).
    """

    method: str
    table: JudgementTable
    source_rows: Array
    n_undecided: int
    n_adjudicated_instructions: int = 0
    reliability: dict[int, dict[str, float]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def aligned(self, scores: Mapping[str, Any]) -> dict[str, Array]:
        """Metric scores (aligned with the reviews' table) aligned with the consensus rows."""
        return {k: np.asarray(v, dtype=float)[self.source_rows] for k, v in scores.items()}


def _responses(table: JudgementTable) -> tuple[Array, Array, Array]:
    """The table's distinct responses, the first row judging each, and each row's response
    index."""
    responses, first, inverse = np.unique(
        np.asarray(table.response), return_index=True, return_inverse=True
    )
    return responses, first, inverse.reshape(-1)


def _consensus_table(table: JudgementTable, first: Array, rank: Array, correct: Array) -> Any:
    instruction = np.asarray(table.instruction)[first]
    return JudgementTable(
        review=instruction.astype(np.int64),
        instruction=instruction.astype(np.int64),
        clinician=np.zeros(first.shape[0], dtype=np.int64),
        model=np.asarray(table.model)[first],
        response=np.asarray(table.response)[first],
        rank=rank,
        correct=correct,
        position=np.full(first.shape[0], -1, dtype=np.int64),
        category=np.asarray(table.category)[first],
        specialty=np.asarray(table.specialty)[first],
        cluster=np.asarray(table.cluster_keys)[first],
    )


def _rank_within(instruction: Array, score: Array) -> Array:
    """Ranks (1 = best, equal scores tie at the lower rank) of ``score`` (higher is better)
    within each instruction; nan where the score is nan."""
    rank = np.full(score.shape[0], np.nan)
    for key in np.unique(instruction):
        rows = np.flatnonzero((instruction == key) & ~np.isnan(score))
        if rows.size:
            rank[rows] = rankdata(-score[rows], method="min")
    return rank


def _majority(table: JudgementTable) -> tuple[Array, Array, Array, int]:
    responses, first, row_response = _responses(table)
    n = responses.shape[0]
    correct = np.asarray(table.correct, dtype=float)
    rank = np.asarray(table.rank, dtype=float)
    votes = np.bincount(row_response, weights=np.nan_to_num(correct), minlength=n)
    voters = np.bincount(row_response, weights=(~np.isnan(correct)).astype(float), minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = votes / voters
    verdict = np.where(share > 0.5, 1.0, np.where(share < 0.5, 0.0, np.nan))
    verdict[voters == 0] = np.nan
    rank_sum = np.bincount(row_response, weights=np.nan_to_num(rank), minlength=n)
    rankers = np.bincount(row_response, weights=(~np.isnan(rank)).astype(float), minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_rank = np.where(rankers > 0, rank_sum / rankers, np.nan)
    instruction = np.asarray(table.instruction)[first]
    consensus_rank = _rank_within(instruction, -mean_rank)
    undecided = int(np.count_nonzero((voters > 0) & np.isnan(verdict)))
    return first, consensus_rank, verdict, undecided


def _first_of_pair(a: Any, b: Any) -> bool:
    """Whether response ``a`` (``a < b``) comes first in its pair: a fixed mix of the two ids,
    so that which one comes first follows neither the import order nor the models' quality
    (response ids follow the import, model by model, and MACE takes the true label to be
    uniform: "first better" nearly always true would read as everyone's habit)."""
    mixed = (int(a) * 0x9E3779B1 + int(b) * 0x85EBCA77) & 0xFFFFFFFF
    return bool((mixed >> 16) & 1)


def ranking_pairs(table: JudgementTable) -> tuple[Array, Array, Array, Array]:
    """The ranking as pairwise labels: one task per pair of responses some review ranked both
    of (which comes first: ``_first_of_pair``); per review and pair, the label
    ``FIRST_BETTER``, ``TIE`` or ``SECOND_BETTER``. Returns ``(pairs (tasks, 2) of response
    ids, task, row of the review's first response, label)``."""
    review = np.asarray(table.review)
    response = np.asarray(table.response)
    rank = np.asarray(table.rank, dtype=float)
    keys: dict[tuple[int, int], int] = {}
    tasks, rows, labels = [], [], []
    order = np.lexsort((response, review))
    starts = np.flatnonzero(np.r_[True, review[order][1:] != review[order][:-1]])
    ends = np.r_[starts[1:], order.shape[0]]
    for start, end in zip(starts, ends, strict=True):
        mine = [i for i in order[start:end] if not math.isnan(rank[i])]
        for at, one in enumerate(mine):
            for other in mine[at + 1 :]:
                a, b = (
                    (one, other) if _first_of_pair(response[one], response[other]) else (other, one)
                )
                task = keys.setdefault((int(response[a]), int(response[b])), len(keys))
                if rank[a] < rank[b]:
                    labels.append(FIRST_BETTER)
                elif rank[a] > rank[b]:
                    labels.append(SECOND_BETTER)
                else:
                    labels.append(TIE)
                tasks.append(task)
                rows.append(a)
    pairs = np.array(sorted(keys, key=lambda p: keys[p]), dtype=np.int64).reshape(-1, 2)
    return (
        pairs,
        np.asarray(tasks, dtype=np.int64),
        np.asarray(rows, dtype=np.int64),
        np.asarray(labels, dtype=np.int64),
    )


def _worker_codes(table: JudgementTable) -> tuple[Array, Array]:
    clinicians, code = np.unique(np.asarray(table.clinician), return_inverse=True)
    return clinicians, code.reshape(-1)


def _latent(
    table: JudgementTable, method: str, **kw: Any
) -> tuple[Array, Array, Array, int, dict[int, dict[str, float]], dict[str, Any]]:
    """Correctness and ranks from a latent-class model, and each clinician's reliability."""
    responses, first, row_response = _responses(table)
    clinicians, worker = _worker_codes(table)
    n_w = clinicians.shape[0]
    reliability: dict[int, dict[str, float]] = {int(c): {} for c in clinicians}
    info: dict[str, Any] = {}
    correct = np.asarray(table.correct, dtype=float)
    marked = ~np.isnan(correct)
    verdict = np.full(responses.shape[0], np.nan)
    if marked.any():
        used, task = np.unique(row_response[marked], return_inverse=True)
        fit = latent_fit(method, task.reshape(-1), worker[marked], correct[marked], **kw)
        p_correct = (
            fit.probas[:, list(fit.classes).index(1.0)]
            if 1.0 in fit.classes
            else np.zeros(used.shape[0])
        )
        verdict[used] = (p_correct >= 0.5).astype(float)
        info["correct_iterations"] = fit.n_iter
        for k, c in enumerate(clinicians):
            reliability[int(c)]["correct"] = float(fit.reliability[k])
    pairs, task, rows, labels = ranking_pairs(table)
    score = np.full(responses.shape[0], np.nan)
    ranked = ~np.isnan(np.asarray(table.rank, dtype=float))
    score[np.unique(row_response[ranked])] = 0.0
    if task.size:
        fit = latent_fit(method, task, worker[rows], labels, n_workers=n_w, **kw)
        classes = list(fit.classes)

        def column(label: int) -> Array:
            return (
                fit.probas[:, classes.index(label)] if label in classes else 0.0 * fit.probas[:, 0]
            )

        first_wins = column(FIRST_BETTER) + 0.5 * column(TIE)
        second_wins = column(SECOND_BETTER) + 0.5 * column(TIE)
        index = {int(r): i for i, r in enumerate(responses)}
        for (a, b), win_a, win_b in zip(pairs, first_wins, second_wins, strict=True):
            score[index[int(a)]] += win_a
            score[index[int(b)]] += win_b
        info["ranking_iterations"] = fit.n_iter
        info["ranking_pairs"] = int(pairs.shape[0])
        for k, c in enumerate(clinicians):
            if not math.isnan(fit.reliability[k]):
                reliability[int(c)]["ranking"] = float(fit.reliability[k])
    instruction = np.asarray(table.instruction)[first]
    rank = _rank_within(instruction, score)
    return first, rank, verdict, 0, reliability, info


def consensus(
    table: JudgementTable,
    method: str,
    *,
    adjudicated: Mapping[int, tuple[float, float]] | None = None,
    **kw: Any,
) -> Consensus:
    """The ``method``'s consensus of the reviews' table (``CONSENSUS_METHODS`` but
    ``reviews``). ``adjudicated`` maps a response id to its resolved (rank, correct) (nan for
    missing), for the responses of adjudicated instructions; ``kw`` goes to the latent-class
    model."""
    if method not in CONSENSUS_METHODS or method == "reviews":
        raise ValueError(f"no consensus method {method!r}")
    if len(table) == 0:
        raise ValueError("no judgements to aggregate")
    reliability: dict[int, dict[str, float]] = {}
    info: dict[str, Any] = {}
    if method in LATENT_METHODS:
        first, rank, correct, undecided, reliability, info = _latent(table, method, **kw)
    else:
        first, rank, correct, undecided = _majority(table)
    n_adjudicated = 0
    if method == "adjudicated" and adjudicated:
        response = np.asarray(table.response)[first]
        instruction = np.asarray(table.instruction)[first]
        resolved = np.array([int(r) in adjudicated for r in response], dtype=bool)
        done = np.unique(instruction[resolved])
        n_adjudicated = int(done.shape[0])
        for i in np.flatnonzero(np.isin(instruction, done)):
            r_rank, r_correct = adjudicated.get(int(response[i]), (math.nan, math.nan))
            rank[i], correct[i] = float(r_rank), float(r_correct)
        undecided = int(
            np.count_nonzero(np.isnan(correct) & ~np.isin(instruction, done))
        )  # the adjudicator decided every response of theirs
    cons_table = _consensus_table(table, first, rank, correct)
    return Consensus(
        method=method,
        table=cons_table,
        source_rows=first,
        n_undecided=undecided,
        n_adjudicated_instructions=n_adjudicated,
        reliability=reliability,
        info=info,
    )
