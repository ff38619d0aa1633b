"""The learned metric: grouped cross-validation only, and it learns a real signal."""

import inspect

import numpy as np
import pytest
from scipy import stats as sps

from scoring.reports import learned
from scoring.reports import statistics as S


def _synthetic(seed=0, n_instructions=80, n_features=20):
    """bench_inputs' judgements, with features of which two carry the latent quality."""
    table, scores = S.bench_inputs(n_instructions=n_instructions, n_metrics=1, seed=seed)
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


def test_the_learned_metric_beats_a_random_metric_on_synthetic_signal():
    table, x = _synthetic()
    oof, info = learned.cross_validated_scores(table, x, n_splits=5)
    assert not np.isnan(oof).any() and info["n_splits"] == 5
    random_scores = np.random.default_rng(9).normal(size=len(table))
    learned_tau = S.metric_correlation(table, oof, n_resamples=300)
    random_tau = S.metric_correlation(table, random_scores, n_resamples=300)
    assert learned_tau["ci_low"] > 0.2 > random_tau["ci_high"]
    test = S.paired_bootstrap_test(table, oof, random_scores, n_resamples=300)
    assert test["difference"] > 0 and test["p_value"] < 0.01


def test_no_instruction_is_in_both_a_training_and_a_test_fold():
    table, x = _synthetic(n_instructions=23)
    _, info = learned.cross_validated_scores(table, x, n_splits=5)
    tested = [set(f["test_instructions"]) for f in info["folds"]]
    assert len(tested) == 5
    assert set().union(*tested) == set(np.unique(table.instruction).tolist())
    for i, a in enumerate(tested):  # each instruction is tested exactly once
        for b in tested[i + 1 :]:
            assert not a & b
    for fold, test_instructions in zip(info["folds"], tested, strict=True):
        test_rows = np.isin(table.instruction, list(test_instructions))
        assert fold["n_test_rows"] == int(test_rows.sum())
        assert fold["n_train_rows"] == len(table) - int(test_rows.sum())


def test_a_leaky_split_cannot_be_configured():
    table, x = _synthetic(n_instructions=10)
    params = set(inspect.signature(learned.cross_validated_scores).parameters)
    assert params == {"table", "features", "n_splits", "c"}
    for leaky in ({"cv": 5}, {"groups": np.arange(len(table))}, {"splitter": None}):
        with pytest.raises(TypeError):
            learned.cross_validated_scores(table, x, **leaky)


def test_out_of_fold_scores_come_from_models_that_never_saw_the_instruction():
    # Features that identify the instruction and copy its clinicians' ranks would let a leaky
    # model memorise; out of fold they cannot help, so tau on them stays near zero.
    table, _ = _synthetic(n_instructions=60)
    rng = np.random.default_rng(3)
    inst_noise = {i: rng.normal(size=6) for i in np.unique(table.instruction)}
    x = np.array(
        [
            inst_noise[i] * (k + 1)
            for i, k in zip(table.instruction, table.response % 6, strict=True)
        ]
    )
    oof, _ = learned.cross_validated_scores(table, x, n_splits=5)
    assert abs(S.metric_correlation(table, oof, n_resamples=100)["mean_tau"]) < 0.25


def test_linear_ranker_round_trips_as_plain_numbers():
    table, x = _synthetic(n_instructions=20)
    model, n_pairs = learned.fit_ranker(table, x, np.arange(len(table)))
    assert n_pairs > 0
    again = learned.LinearRanker.from_dict(model.as_dict())
    np.testing.assert_allclose(again.score(x), model.score(x))
    # It orders the training reviews well (the signal is real).
    assert sps.kendalltau(model.score(x), -table.rank).statistic > 0.3
