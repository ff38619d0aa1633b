"""Rubric scores and the grader's agreement with clinicians, on cases checked by hand."""

import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score

from scoring.reports.statistics.rubrics import (
    GRADER,
    Verdicts,
    agreement_report,
    cohen_kappa,
    grader_agreement,
    macro_f1,
    model_scores,
    response_scores,
    score_table,
)

NAN = math.nan
POINTS = {1: 5.0, 2: 3.0, 3: -4.0}


def verdicts(rows, points=POINTS, **kw) -> Verdicts:
    rater, response, criterion, met = zip(*rows, strict=True) if rows else ((), (), (), ())
    return Verdicts(rater, response, criterion, met, points, **kw)


def test_a_response_scores_points_met_over_positive_points_clipped() -> None:
    scores = response_scores(
        verdicts(
            [
                ("a", 10, 1, 1),
                ("a", 10, 2, 0),
                ("a", 10, 3, 1),  # (5 - 4) / 8
                ("a", 11, 1, 1),
                ("a", 11, 2, 1),
                ("a", 11, 3, 0),  # 8 / 8
                ("a", 12, 1, 0),
                ("a", 12, 2, 0),
                ("a", 12, 3, 1),  # -4 / 8 -> 0
            ]
        )
    )
    assert scores["a"] == {10: pytest.approx(0.125), 11: 1.0, 12: 0.0}


def test_a_missing_verdict_is_neither_met_nor_not_met() -> None:
    rows = [(GRADER, 10, 1, 1), (GRADER, 10, 2, NAN), (GRADER, 10, 3, 0)]
    assert response_scores(verdicts(rows))[GRADER][10] == 1.0  # 5 / 5, not 5 / 8
    only_missing = [(GRADER, 11, 1, NAN), (GRADER, 11, 3, 1)]
    assert 11 not in response_scores(verdicts(only_missing)).get(GRADER, {})  # no positive graded


def test_macro_f1_and_kappa_by_hand_and_as_sklearn_computes_them() -> None:
    a, b = [1, 1, 0, 0], [1, 0, 0, 0]
    # met: F1 = 2*1/(2+1) = 2/3; not met: 2*2/(4+1) = 0.8; kappa: (0.75 - 0.5) / 0.5
    assert macro_f1(a, b) == pytest.approx((2 / 3 + 0.8) / 2)
    assert cohen_kappa(a, b) == pytest.approx(0.5)
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    assert macro_f1(x, y) == pytest.approx(f1_score(y, x, average="macro"))
    assert cohen_kappa(x, y) == pytest.approx(cohen_kappa_score(x, y))
    assert math.isnan(cohen_kappa([1, 1], [1, 1]))  # chance agreement 1: undefined
    assert macro_f1([1, 1], [1, 1]) == 1.0  # "not met" absent on both sides: left out


def three_clinicians(grader_answers) -> Verdicts:
    """Two criteria x two responses; clinicians x, y agree, z dissents on one item."""
    items = [(10, 1), (10, 2), (11, 1), (11, 2)]
    x = [1, 0, 1, 1]
    y = [1, 0, 1, 1]
    z = [1, 0, 0, 1]
    rows = []
    for name, answers in (("x", x), ("y", y), ("z", z), (GRADER, grader_answers)):
        rows += [(name, r, c, m) for (r, c), m in zip(items, answers, strict=True)]
    return verdicts(rows, {1: 5.0, 2: -2.0}, cluster={10: "p1", 11: "p2"})


def test_leave_one_clinician_out_scores_each_and_the_grader_against_the_others() -> None:
    result = grader_agreement(three_clinicians([1, 1, 1, 1]), n_resamples=200)
    by = {r["rater"]: r for r in result["per_clinician"]}
    # x left out: y and z vote; they tie on (11, 1), so 3 items: refs 1, 0, 1.
    assert by["x"]["loo_items"] == 3
    assert by["x"]["loo_clinician_f1"] == 1.0
    assert by["x"]["loo_grader_f1"] == pytest.approx(macro_f1([1, 1, 1], [1, 0, 1]))
    # z left out: x and y agree on all 4; z misses (11, 1)
    assert by["z"]["loo_clinician_f1"] == pytest.approx(macro_f1([1, 0, 0, 1], [1, 0, 1, 1]))
    # the grader against each clinician directly
    assert by["z"]["macro_f1"] == pytest.approx(macro_f1([1, 1, 1, 1], [1, 0, 0, 1]))
    loo = result["leave_one_out"]
    assert loo["n_items"] == 3 + 3 + 4
    assert loo["grader_f1"] < loo["clinicians_f1"]
    assert result["verdict"].startswith("The grader falls below the clinicians")
    assert "below 3 of 3 clinicians" in result["verdict"]
    # two clusters: too few for an interval
    assert math.isnan(loo["grader_ci"][0]) and "2 clusters" in result["note"]


def test_a_grader_that_agrees_with_the_majority_is_not_said_to_fall_below() -> None:
    result = grader_agreement(three_clinicians([1, 0, 1, 1]), n_resamples=200)
    assert result["leave_one_out"]["grader_f1"] >= result["leave_one_out"]["clinicians_f1"]
    assert "at or above" in result["verdict"]


def test_missing_grader_verdicts_are_left_out_and_counted() -> None:
    result = grader_agreement(three_clinicians([1, 0, NAN, 1]), n_resamples=200)
    assert result["missing_grader_verdicts"] == 1
    assert result["grader_vs_clinicians"]["n_items"] == 3 * 3  # each clinician, 3 shared items


def many_patients(n: int, grader_flip: float, seed: int = 0) -> Verdicts:
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n):
        for c in (1, 2, 3):
            truth = int(rng.integers(0, 2))
            for name, flip in (("x", 0.05), ("y", 0.05), ("z", 0.05), (GRADER, grader_flip)):
                rows.append((name, p, c, truth ^ int(rng.random() < flip)))
    cluster = {p: f"patient-{p}" for p in range(n)}
    tags = {1: ["axis:accuracy"], 2: ["axis:accuracy", "axis:completeness"], 3: []}
    return verdicts(
        rows,
        {1: 5.0, 2: 3.0, 3: -4.0},
        cluster=cluster,
        tags=tags,
        version={1: "v1", 2: "v1", 3: "v2"},
    )


def test_intervals_with_enough_clusters_and_a_poor_grader_is_flagged_with_certainty() -> None:
    result = grader_agreement(many_patients(60, grader_flip=0.4), n_resamples=500, seed=1)
    loo = result["leave_one_out"]
    assert loo["grader_ci"][0] <= loo["grader_f1"] <= loo["grader_ci"][1]
    assert loo["clinicians_ci"][0] <= loo["clinicians_f1"] <= loo["clinicians_ci"][1]
    assert loo["difference_ci"][1] < 0
    assert "interval of the difference lies below zero" in result["verdict"]
    again = grader_agreement(many_patients(60, grader_flip=0.4), n_resamples=500, seed=1)
    assert again["leave_one_out"]["grader_ci"] == loo["grader_ci"]  # seeded


def test_the_report_splits_by_tag_and_by_rubric_version() -> None:
    report = agreement_report(many_patients(12, grader_flip=0.1), n_resamples=100)
    assert set(report["per_tag"]) == {"axis:accuracy", "axis:completeness"}
    assert set(report["per_version"]) == {"v1", "v2"}
    # completeness is criterion 2 only: each clinician shares 12 items with the grader
    assert report["per_tag"]["axis:completeness"]["grader_vs_clinicians"]["n_items"] == 36


def test_model_scores_are_means_with_a_patient_bootstrap_interval() -> None:
    scores = {r: v for r, v in enumerate([0.0, 1.0] * 10)}
    model_of = {r: "m" for r in scores}
    cluster_of = {r: f"p{r // 2}" for r in scores}  # each patient: one 0 and one 1
    [row] = model_scores(scores, model_of, cluster_of, n_resamples=300)
    assert row["mean"] == 0.5 and row["n_clusters"] == 10
    assert row["ci_low"] == row["ci_high"] == 0.5  # every patient's mean is 0.5


def test_score_table_puts_clinicians_and_grader_side_by_side_per_tag() -> None:
    v = many_patients(12, grader_flip=0.0)
    table = score_table(v, {p: "m" if p % 2 else "n" for p in range(12)}, n_resamples=50)
    overall = table["overall"]
    assert [r["model"] for r in overall["grader"]] == ["m", "n"]
    assert [r["model"] for r in overall["clinicians"]] == ["m", "n"]
    assert set(table["per_tag"]) == {"axis:accuracy", "axis:completeness"}


def test_kappa_has_cluster_bootstrap_intervals_too() -> None:
    from sklearn.metrics import cohen_kappa_score

    v = many_patients(60, grader_flip=0.4)
    result = grader_agreement(v, n_resamples=500, seed=1)
    direct = result["grader_vs_clinicians"]
    assert direct["kappa_ci_low"] <= direct["kappa"] <= direct["kappa_ci_high"]
    loo = result["leave_one_out"]
    assert loo["clinicians_kappa_ci"][0] <= loo["clinicians_kappa"] <= loo["clinicians_kappa_ci"][1]
    assert loo["grader_kappa_ci"][1] < loo["clinicians_kappa_ci"][0]  # a grader flipping 40%
    # The pooled kappa is sklearn's over every (grader, clinician) pair of verdicts.
    g = {
        (int(r), int(c)): m
        for r, c, m, who in zip(v.response, v.criterion, v.met, v.rater, strict=True)
        if who == GRADER
    }
    pairs = [
        (g[(int(r), int(c))], m)
        for r, c, m, who in zip(v.response, v.criterion, v.met, v.rater, strict=True)
        if who != GRADER and (int(r), int(c)) in g
    ]
    a, b = zip(*pairs, strict=True)
    assert direct["kappa"] == pytest.approx(cohen_kappa_score(a, b))
    # Too few clusters: no interval, as for macro-F1.
    few = grader_agreement(many_patients(3, grader_flip=0.4), n_resamples=200)
    assert math.isnan(few["grader_vs_clinicians"]["kappa_ci_low"])
