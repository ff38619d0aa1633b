"""The learned metric: grouped cross-validation only, and it learns a real signal."""

import inspect
import math
from dataclasses import fields, replace

import numpy as np
import pytest
from scipy import stats as sps

from scoring.reports import learned
from scoring.reports import statistics as S
from tests.bench.synthetic import bench_inputs


def _synthetic(seed=0, n_instructions=80, n_features=20):
    """bench_inputs' judgements, with features of which two carry the latent quality."""
    table, scores = bench_inputs(n_instructions=n_instructions, n_metrics=1, seed=seed)
    rng = np.random.default_rng(seed + 1)
    # Recover each row's latent quality from the metric_0 construction: use the clinicians'
    # perceived order instead, which is what the signal must predict: -rank + noise.
    quality = np.zeros(len(table))
    for r in np.unique(table.response):
        m = table.response == r
        quality[m] = -table.rank[m].mean()
    x = rng.normal(size=(len(table), n_features))
    per_response = {r: rng.normal(size=n_features) for r in np.unique(table.response)}
    x = np.array([per_response[r] for r in table.response])  # features belong to the response
    x[:, 0] += 1.5 * quality
    x[:, 3] -= 0.8 * quality
    return table, x


def _patients(table, per_patient=2):
    """Each instruction's patient: ``per_patient`` instructions share a record."""
    return np.array([f"P{int(i) // per_patient:04d}" for i in table.instruction])


def test_the_learned_metric_beats_a_random_metric_on_synthetic_signal():
    table, x = _synthetic()
    oof, info = learned.cross_validated_scores(table, x, patient=_patients(table), n_splits=5)
    assert not np.isnan(oof).any() and info["n_splits"] == 5
    random_scores = np.random.default_rng(9).normal(size=len(table))
    learned_tau = S.metric_correlation(table, oof, n_resamples=300)
    random_tau = S.metric_correlation(table, random_scores, n_resamples=300)
    assert learned_tau["ci_low"] > 0.2 > random_tau["ci_high"]
    test = S.paired_bootstrap_test(table, oof, random_scores, n_resamples=300)
    assert test["difference"] > 0 and test["p_value"] < 0.01


def test_no_patient_is_in_both_a_training_and_a_test_fold():
    table, x = _synthetic(n_instructions=23)
    patient = _patients(table)
    _, info = learned.cross_validated_scores(table, x, patient=patient, n_splits=5)
    fold_of = info["fold_of_patient"]
    assert set(fold_of) == set(patient.tolist()) and set(fold_of.values()) == set(range(5))
    fold = np.array([fold_of[p] for p in patient])
    for k, stats in enumerate(info["folds"]):
        assert stats["n_test_rows"] == int((fold == k).sum())
        assert stats["n_train_rows"] == len(table) - int((fold == k).sum())
    # Every instruction of a patient is on that patient's side.
    for inst in np.unique(table.instruction):
        assert len(set(fold[table.instruction == inst])) == 1


def test_folds_follow_the_patients_pseudonyms_not_row_order():
    table, x = _synthetic(n_instructions=30)
    patient = _patients(table)
    _, first = learned.cross_validated_scores(table, x, patient=patient, seed=7)
    order = np.random.default_rng(0).permutation(len(table))
    shuffled = table.subset(np.ones(len(table), bool))
    shuffled = S.JudgementTable(
        **{f.name: getattr(shuffled, f.name)[order] for f in fields(shuffled)}
    )
    _, second = learned.cross_validated_scores(shuffled, x[order], patient=patient[order], seed=7)
    assert first["fold_of_patient"] == second["fold_of_patient"]


def test_a_leaky_split_cannot_be_configured():
    table, x = _synthetic(n_instructions=10)
    params = set(inspect.signature(learned.cross_validated_scores).parameters)
    assert params == {"table", "features", "patient", "n_splits", "c", "repeats", "seed"}
    for leaky in ({"cv": 5}, {"groups": np.arange(len(table))}, {"splitter": None}):
        with pytest.raises(TypeError):
            learned.cross_validated_scores(table, x, patient=_patients(table), **leaky)


def test_instruction_folds_leak_a_patients_preference_and_patient_folds_do_not():
    """Each patient has a preference of their own (which response features their clinicians
    favour), shared by all their instructions. Instruction folds put one instruction of a
    patient in training and another in test: the model learns the patient and scores higher
    than it should. Patient folds cannot."""
    table, scores = bench_inputs(n_instructions=120, n_metrics=1, seed=4)
    patient = _patients(table, per_patient=4)
    rng = np.random.default_rng(11)
    prefs = {p: rng.normal(size=8) for p in np.unique(patient)}
    per_response = {r: rng.normal(size=8) for r in np.unique(table.response)}
    x = np.array([per_response[r] for r in table.response])
    # Clinicians rank by the patient's own preference over the features.
    utility = np.array([x[i] @ prefs[patient[i]] for i in range(len(table))])
    rank = np.empty(len(table))
    for r in np.unique(table.review):
        m = table.review == r
        rank[m] = sps.rankdata(-utility[m], method="min")
    table = replace(table, rank=rank)
    # The record is visible in the features (as the instruction's embedding carries it): the
    # response's features crossed with the patient, so a model can learn each patient it saw.
    patients = sorted(prefs)
    onehot = np.array([[p == q for q in patients] for p in patient], dtype=float)
    x = np.einsum("nk,np->nkp", x, onehot).reshape(len(table), -1)
    by_patient, _ = learned.cross_validated_scores(table, x, patient=patient, seed=1)
    leaky, _ = learned.cross_validated_scores(
        table, x, patient=np.array([str(i) for i in table.instruction]), seed=1
    )
    honest = S.metric_correlation(table, by_patient, n_resamples=50)["mean_tau"]
    optimistic = S.metric_correlation(table, leaky, n_resamples=50)["mean_tau"]
    # Out of the patient's fold the model has learned nothing about them: its scores carry no
    # order (tau undefined, or near zero); in instruction folds it "predicts" seen patients.
    assert optimistic > 0.5
    assert math.isnan(honest) or abs(honest) < 0.1


def test_repeated_splits_report_a_mean_and_a_spread():
    table, x = _synthetic(n_instructions=40)
    oof, info = learned.cross_validated_scores(
        table, x, patient=_patients(table), repeats=5, seed=3
    )
    assert len(info["repeats"]) == 5
    assert info["repeat_mean_tau"] == pytest.approx(np.mean(info["repeats"]))
    assert info["repeat_sd_tau"] == pytest.approx(np.std(info["repeats"], ddof=1))
    assert info["repeat_sd_tau"] > 0  # the split is one draw among many
    # The first split's scores are the ones reported.
    assert S.metric_correlation(table, oof, n_resamples=50)["mean_tau"] == pytest.approx(
        info["repeats"][0]
    )


def test_linear_ranker_round_trips_as_plain_numbers():
    table, x = _synthetic(n_instructions=20)
    model, n_pairs = learned.fit_ranker(table, x, np.arange(len(table)))
    assert n_pairs > 0
    again = learned.LinearRanker.from_dict(model.as_dict())
    np.testing.assert_allclose(again.score(x), model.score(x))
    # It orders the training reviews well (the signal is real).
    assert sps.kendalltau(model.score(x), -table.rank).statistic > 0.3
