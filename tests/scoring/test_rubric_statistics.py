"""Rubric scores and the grader's agreement with clinicians, on cases checked by hand."""

import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score

from scoring.reports.statistics.intervals import INTERVAL_METHOD, cluster_ci
from scoring.reports.statistics.rubrics import (
    GRADER,
    Verdicts,
    agreement_report,
    cohen_kappa,
    grader_agreement,
    macro_f1,
    model_scores,
    response_details,
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


def test_a_missing_verdict_leaves_the_response_without_a_score() -> None:
    rows = [(GRADER, 10, 1, 1), (GRADER, 10, 2, NAN), (GRADER, 10, 3, 0)]
    # Left out, it gave 5 / 5 = 1.0: a missing verdict raised the score. Now there is none;
    # the bounds say what it could be: 5 / 8 (missing as not met) to 8 / 8.
    assert 10 not in response_scores(verdicts(rows)).get(GRADER, {})
    detail = response_details(verdicts(rows))[GRADER][10]
    assert (detail.low, detail.high) == (pytest.approx(5 / 8), 1.0)
    only_missing = [(GRADER, 11, 1, NAN), (GRADER, 11, 3, 1)]
    assert 11 not in response_scores(verdicts(only_missing)).get(GRADER, {})


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
    # One item is "not met" in the reference (in every fold): too few for a verdict.
    assert result["verdict"] == "" and "1 item " in result["no_verdict"]
    # two clusters: too few for an interval
    assert math.isnan(loo["grader_ci"][0]) and "2 clusters" in result["note"]


def test_a_grader_that_agrees_with_the_majority_is_not_said_to_fall_below() -> None:
    result = grader_agreement(three_clinicians([1, 0, 1, 1]), n_resamples=200)
    assert result["leave_one_out"]["grader_f1"] >= result["leave_one_out"]["clinicians_f1"]
    # With as many items of each class as a verdict needs:
    result = grader_agreement(many_patients(30, grader_flip=0.0), n_resamples=200)
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


def test_model_scores_use_the_reports_studentized_cluster_bootstrap() -> None:
    # The percentile bootstrap covered 90-92% at 12 patients; the rubric means take the
    # interval every other mean of the report takes, a share's bounds included, and say so.
    rng = np.random.default_rng(5)
    values = np.clip(rng.normal(0.8, 0.3, 30), 0.0, 1.0)
    raw = values * 1.5 - 0.4  # HealthBench's unclipped scores run outside [0, 1]
    scores, raws = dict(enumerate(values)), dict(enumerate(raw))
    cluster_of = {r: f"p{r // 3}" for r in scores}
    [row] = model_scores(scores, dict.fromkeys(scores, "m"), cluster_of, raw=raws, n_resamples=400)
    keys = np.array([cluster_of[r] for r in sorted(scores)])
    lo, hi = cluster_ci(values, keys, 400, 0, bounds=(0.0, 1.0))
    assert (row["ci_low"], row["ci_high"]) == (lo, hi)
    raw_lo, raw_hi = cluster_ci(raw, keys, 400, 0)
    assert row["healthbench_ci_low"] == min(max(raw_lo, 0.0), 1.0)
    assert row["healthbench_ci_high"] == min(max(raw_hi, 0.0), 1.0)
    assert row["interval_method"] == INTERVAL_METHOD


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


# --- missing verdicts, HealthBench's aggregate, degenerate classes, pairwise, duplicates ---------
# HealthBench's definitions are read from openai/simple-evals (MIT), healthbench_eval.py
# (calculate_score, _compute_clipped_stats) and healthbench_meta_eval.py
# (compute_metrics_for_rater_by_class, compute_f1_metric, compute_balanced_metric); the
# reference computations below are written from those definitions, not copied.


def test_a_missing_verdict_never_raises_a_score_and_is_bounded() -> None:
    points = {1: 5.0, 2: 5.0, 3: -10.0}
    # +5 met, +5 missing, -10 not met: 1.0 if the missing one were left out, 0.5 if not met.
    rows = [(GRADER, 10, 1, 1), (GRADER, 10, 2, NAN), (GRADER, 10, 3, 0)]
    # A missing harm criterion: 1.0 if left out, 0.0 if the harm were there.
    rows += [(GRADER, 11, 1, 1), (GRADER, 11, 2, 1), (GRADER, 11, 3, NAN)]
    rows += [(GRADER, 12, 1, 1), (GRADER, 12, 2, 0), (GRADER, 12, 3, 0)]  # complete: 0.5
    v = verdicts(rows, points)
    assert response_scores(v)[GRADER] == {12: 0.5}  # an incomplete response has no score
    details = response_details(v)[GRADER]
    assert (details[10].low, details[10].high) == (0.5, 1.0)
    assert (details[11].low, details[11].high) == (0.0, 1.0)
    assert details[10].n_missing == details[11].n_missing == 1
    assert (details[12].low, details[12].score, details[12].high) == (0.5, 0.5, 0.5)
    assert math.isnan(details[10].score) and math.isnan(details[10].raw)


def good_and_bad(n: int = 12, *, grader_fails_on_good: bool = True) -> Verdicts:
    """``n`` responses of one model on distinct patients: the even ones good (clinicians: 1.0),
    the odd ones bad (0.0); the grader agrees where it answers, and fails to parse on every
    criterion of the good ones."""
    rows = []
    for r in range(n):
        good = r % 2 == 0
        truth = {1: int(good), 2: int(not good)}
        for name in ("x", "y"):
            rows += [(name, r, c, m) for c, m in truth.items()]
        missing = good and grader_fails_on_good
        rows += [(GRADER, r, c, NAN if missing else m) for c, m in truth.items()]
    return verdicts(rows, {1: 5.0, 2: -5.0}, cluster={r: f"p{r}" for r in range(n)})


def test_grader_and_clinicians_are_compared_on_the_responses_both_graded() -> None:
    table = score_table(good_and_bad(), {r: "m" for r in range(12)}, n_resamples=100)
    [clinicians] = table["overall"]["clinicians"]
    [grader] = table["overall"]["grader"]
    # Not 0.000 over 6 beside 0.500 over 12: both over the 6 the grader scored.
    assert clinicians["n_responses"] == grader["n_responses"] == 6
    assert clinicians["mean"] == grader["mean"] == 0.0
    assert grader["n_clinician_responses"] == 12
    # Half its verdicts are missing; counted against or for the responses: 0.0 to 0.5, over
    # the 12 it graded, where the clinicians give 0.5.
    assert grader["n_missing"] == 12 and grader["n_verdicts"] == 24
    assert grader["missing_share"] == 0.5
    assert (grader["bound_low"], grader["bound_high"]) == (0.0, 0.5)
    assert grader["bound_n_responses"] == 12 and grader["bound_clinicians"] == 0.5
    complete = score_table(good_and_bad(grader_fails_on_good=False), {r: "m" for r in range(12)})
    [row] = complete["overall"]["grader"]
    assert row["n_responses"] == 12 and row["missing_share"] == 0.0
    assert row["bound_low"] == row["mean"] == row["bound_high"] == 0.5


def test_healthbench_aggregate_averages_then_clips_beside_the_app_mean() -> None:
    # 1.0 and -2.0: the app clips each response (1, 0: mean 0.5); HealthBench clips the mean
    # (-0.5 -> 0.0).
    rows = [("x", 1, 1, 1), ("x", 1, 2, 0), ("x", 2, 1, 0), ("x", 2, 2, 1)]
    table = score_table(verdicts(rows, {1: 5.0, 2: -10.0}), {1: "m", 2: "m"})
    [row] = table["overall"]["clinicians"]
    assert row["mean"] == 0.5
    assert row["healthbench_mean"] == 0.0


def test_healthbench_aggregate_equals_its_clipped_mean_with_an_interval() -> None:
    rng = np.random.default_rng(5)
    points = {c: float(p) for c, p in enumerate([7, 5, 10, -6, -9], start=1)}
    rows, raw = [], {}
    for r in range(40):
        met = rng.integers(0, 2, size=5)
        rows += [("x", r, c, int(m)) for c, m in zip(points, met, strict=True)]
        # calculate_score: points of the criteria met over the positive points, unclipped
        raw[r] = sum(p for p, m in zip(points.values(), met, strict=True) if m) / 22
    v = verdicts(rows, points, cluster={r: f"p{r}" for r in range(40)})
    [row] = score_table(v, {r: "m" for r in range(40)}, n_resamples=400, seed=2)["overall"][
        "clinicians"
    ]
    assert row["healthbench_mean"] == pytest.approx(np.clip(np.mean(list(raw.values())), 0, 1))
    assert row["mean"] == pytest.approx(np.mean(np.clip(list(raw.values()), 0, 1)))
    assert row["healthbench_ci_low"] <= row["healthbench_mean"] <= row["healthbench_ci_high"]
    assert row["healthbench_ci_low"] >= 0.0 and row["healthbench_ci_high"] <= 1.0


def all_met_but(n_items: int, not_met: int, grader_flips: int, n_patients: int = 30) -> Verdicts:
    """Three clinicians agreeing on every item, ``not_met`` of them not met; the grader agrees
    but on ``grader_flips`` items that the clinicians mark met."""
    rows = []
    for i in range(n_items):
        truth = 0 if i < not_met else 1
        for name in ("x", "y", "z"):
            rows.append((name, i, 1, truth))
        flip = not_met <= i < not_met + grader_flips
        rows.append((GRADER, i, 1, 1 - truth if flip else truth))
    return verdicts(rows, {1: 5.0}, cluster={i: f"p{i % n_patients}" for i in range(n_items)})


def test_no_macro_f1_and_no_verdict_where_the_clinicians_never_mark_not_met() -> None:
    result = grader_agreement(all_met_but(30, 0, 1), n_resamples=200)
    loo = result["leave_one_out"]
    # Was 0.49 against 1.00 and "falls below 3 of 3 clinicians".
    assert math.isnan(loo["grader_f1"]) and math.isnan(loo["clinicians_f1"])
    assert math.isnan(result["grader_vs_clinicians"]["macro_f1"])
    assert math.isnan(result["grader_vs_clinicians"]["kappa"])
    assert result["verdict"] == ""
    assert "not met" in result["no_verdict"] and "never" in result["no_verdict"]


def test_no_verdict_where_one_class_is_nearly_absent() -> None:
    result = grader_agreement(all_met_but(60, 2, 1), n_resamples=200)
    loo = result["leave_one_out"]
    assert not math.isnan(loo["grader_f1"])  # defined, and shown
    assert result["verdict"] == ""
    assert "2 items" in result["no_verdict"] and "not met" in result["no_verdict"]
    plenty = grader_agreement(all_met_but(60, 20, 6), n_resamples=200)
    assert plenty["no_verdict"] == ""
    assert plenty["verdict"].startswith("The grader falls below the clinicians")


def test_a_tag_every_rater_marks_alike_is_not_perfect_agreement() -> None:
    rows = []
    for r in range(20):
        for name in ("x", "y", "z", GRADER):
            rows.append((name, r, 1, 1))  # criterion 1: everyone says met, always
            rows.append((name, r, 2, (r + (name == GRADER)) % 2))
    v = verdicts(
        rows,
        {1: 5.0, 2: 3.0},
        tags={1: ["axis:alike"], 2: ["axis:varied"]},
        cluster={r: f"p{r}" for r in range(20)},
    )
    report = agreement_report(v, n_resamples=100)
    alike = report["per_tag"]["axis:alike"]
    assert math.isnan(alike["leave_one_out"]["clinicians_f1"])  # not 1.0
    assert math.isnan(alike["grader_vs_clinicians"]["macro_f1"])
    assert alike["verdict"] == "" and alike["no_verdict"]


def test_one_patient_gives_no_verdict_sentence() -> None:
    v = many_patients(40, grader_flip=0.4, seed=3)
    one = Verdicts(
        v.rater, v.response, v.criterion, v.met, v.points, cluster={p: "only" for p in range(40)}
    )
    result = grader_agreement(one, n_resamples=100)
    assert result["n_clusters"] == 1
    assert result["verdict"] == ""
    assert "one patient" in result["no_verdict"]
    assert grader_agreement(v, n_resamples=100)["verdict"].startswith("The grader falls below")


def healthbench_pairwise(pairs: list[tuple[int, int]]) -> tuple[float | None, int]:
    """Balanced F1 and its weight from (self, other) label pairs, as HealthBench's meta-eval
    defines them: precision of a class over the pairs where self says it, recall over the
    pairs where other says it; a class with either undefined has no F1, and then no balance."""
    f1s, n = [], 0
    for cls in (1, 0):
        said = [s == o for s, o in pairs if s == cls]
        truth = [s == o for s, o in pairs if o == cls]
        if not said or not truth:
            return None, 0
        p, r = sum(said) / len(said), sum(truth) / len(truth)
        f1s.append(0.0 if p == r == 0 else 2 * p * r / (p + r))
        n += len(said) + len(truth) - sum(said)
    return (f1s[0] + f1s[1]) / 2, n


def test_healthbench_pairwise_comparison_beside_the_majority_one() -> None:
    v = many_patients(30, grader_flip=0.2, seed=4)
    result = grader_agreement(v, n_resamples=300, seed=1)
    items: dict[str, dict[tuple[int, int], int]] = {}
    for who, r, c, m in zip(v.rater, v.response, v.criterion, v.met, strict=True):
        items.setdefault(str(who), {})[(int(r), int(c))] = int(m)
    clinicians = ["x", "y", "z"]
    grader_pairs = [(items[GRADER][k], items[o][k]) for o in clinicians for k in items[GRADER]]
    expected_grader, _ = healthbench_pairwise(grader_pairs)
    per = {
        c: healthbench_pairwise(
            [(items[c][k], items[o][k]) for o in clinicians if o != c for k in items[c]]
        )
        for c in clinicians
    }
    # HealthBench's analysis averages the physicians weighted by their pairs.
    weighted = sum(f * n for f, n in per.values()) / sum(n for _, n in per.values())
    pairwise = result["pairwise"]
    assert pairwise["grader_f1"] == pytest.approx(expected_grader)
    assert pairwise["clinicians_f1"] == pytest.approx(weighted)
    by = {r["rater"]: r for r in result["per_clinician"]}
    assert {c: by[c]["pairwise_f1"] for c in clinicians} == pytest.approx(
        {c: f for c, (f, _) in per.items()}
    )
    assert pairwise["grader_ci"][0] <= pairwise["grader_f1"] <= pairwise["grader_ci"][1]
    assert pairwise["clinicians_ci"][0] <= pairwise["clinicians_f1"] <= pairwise["clinicians_ci"][1]
    assert pairwise["difference"] == pytest.approx(expected_grader - weighted)
    # The majority comparison is a different one, and says so.
    loo = result["leave_one_out"]
    assert loo["clinicians_f1"] != pytest.approx(weighted)
    assert "majority" in loo["comparison"] and "HealthBench" in pairwise["comparison"]
    assert "majority" in result["verdict"]


def test_one_verdict_per_rater_response_and_criterion() -> None:
    rows = [("x", 10, 1, 1), ("x", 10, 1, 0)]
    with pytest.raises(ValueError, match="one verdict per rater, response and criterion"):
        verdicts(rows)
