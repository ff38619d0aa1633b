"""The design calculator: its arithmetic against direct simulation, its picks on cases whose
answer is known, the joint predictor's cross-fitting, and bench_study's design lines."""

import math
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from scoring.reports.statistics.active import classical_mean_ci, ppi_mean_ci
from scoring.reports.statistics.design import (
    SECTIONS,
    Column,
    Pool,
    agreement_subset_size,
    compare,
    floor_variance,
    human_ceiling_half_width,
    moments_from_labels,
    plan_design,
    standard_designs,
    variance,
)
from scoring.reports.statistics.joint_predictor import cross_fitted, joint_features
from scoring.reports.statistics.resampling import MIN_CLUSTERS
from tests.bench.design_sim import posterior, simulate_reviews
from tests.bench.study_sim import SimStudy


def _study(rng, reps, big_n, between, within, r2, doubled=0, overlap=1):
    """Instructions with mu ~ N(0, B), a predictor f with corr(mu, f)^2 = R2, and clinicians'
    labels mu + N(0, W): one each, two on the first ``doubled`` (or ``overlap`` each)."""
    mu = rng.normal(0.0, math.sqrt(between), (reps, big_n))
    noise = rng.normal(0.0, 1.0, (reps, big_n))
    f = math.sqrt(r2) * mu / math.sqrt(between) + math.sqrt(1 - r2) * noise
    k = np.full(big_n, overlap)
    k[:doubled] = 2
    y = mu + rng.normal(0.0, 1.0, (reps, big_n)) * np.sqrt(within / k)
    return y, f


@pytest.mark.parametrize(
    ("r2", "doubled", "overlap"),
    [(0.0, 0, 1), (0.0, 0, 2), (0.6, 0, 1), (0.6, 25, 1), (0.8, 0, 3)],
)
def test_the_variance_is_what_a_direct_simulation_gives(r2, doubled, overlap):
    # The closed form against the spread of the estimates themselves (ppi_mean_ci tunes its
    # lambda, as the report does): n = 100 of N = 250 instructions, 4000 studies.
    rng = np.random.default_rng(11)
    big_n, n, between, within = 250, 100, 0.2, 0.15
    y, f = _study(rng, 4000, big_n, between, within, r2, doubled, overlap)
    if r2 == 0:
        est = classical_mean_ci(y[:, :n]).estimate
    else:
        est = ppi_mean_ci(y[:, :n], f[:, :n], f[:, n:]).estimate
    expected = variance(
        between=between, within=within, explained=r2, pool=big_n, labelled=n,
        doubled=doubled, overlap=overlap,
    )  # fmt: skip
    # 4000 estimates: the variance's own relative standard error is about 2.2%.
    assert float(np.mean(est**2)) == pytest.approx(float(expected), rel=0.08)


def test_the_predictor_gain_shrinks_with_the_reviewed_share_of_the_pool():
    # The finite-pool factor: with every instruction reviewed the predictor adds nothing; with
    # a pool far larger than the sample the factor is (1 - R2) on the between part.
    full = variance(between=0.2, within=0.1, explained=0.7, pool=50, labelled=50)
    plain = variance(between=0.2, within=0.1, explained=0.0, pool=50, labelled=50)
    assert float(full) == pytest.approx(float(plain))
    huge = variance(between=0.2, within=0.1, explained=0.7, pool=10**9, labelled=50)
    assert float(huge) == pytest.approx((0.2 * 0.3 + 0.1) / 50, rel=1e-6)


def test_the_floor_is_the_variance_when_the_predictor_is_the_best_one():
    # Uniform designs: the efficient bound is what PPI++ reaches with the best predictor;
    # mixed: the bound weighs doubly reviewed instructions more, so it is at most the mean's.
    for k in (1, 2, 3):
        v = variance(between=0.2, within=0.1, explained=0.5, pool=300, labelled=120, overlap=k)
        fl = floor_variance(
            between=0.2, within=0.1, explained=0.5, pool=300, labelled=120, overlap=k
        )
        assert float(fl) == pytest.approx(float(v))
    v = variance(between=0.2, within=0.3, explained=0.5, pool=300, labelled=120, doubled=40)
    fl = floor_variance(between=0.2, within=0.3, explained=0.5, pool=300, labelled=120, doubled=40)
    # By hand: 80 instructions at v1 = B(1 - R2) + W = 0.4, 40 at v2 = 0.1 + 0.15 = 0.25.
    assert float(v) == pytest.approx((80 * 0.4 + 40 * 0.25) / 120**2 + 0.1 / 300)
    assert float(fl) == pytest.approx(1 / (80 / 0.4 + 40 / 0.25) + 0.1 / 300)


def test_moments_are_recovered_from_reviews():
    # 600 instructions, two reviews on the first 200: B, W and the predictor's R2 (with what
    # clinicians mean, not with their noisy labels) come back.
    rng = np.random.default_rng(5)
    big_n, between, within, r2 = 600, 0.2, 0.1, 0.5
    mu = rng.normal(0.0, math.sqrt(between), big_n)
    f = math.sqrt(r2) * mu / math.sqrt(between) + math.sqrt(1 - r2) * rng.normal(size=big_n)
    inst = np.r_[np.arange(big_n), np.arange(200)]
    label = mu[inst] + rng.normal(0.0, math.sqrt(within), inst.shape[0])
    m = moments_from_labels(inst, label, f[inst])
    assert m.within_measured and m.pairs == 200 and m.instructions == big_n
    assert m.within == pytest.approx(within, rel=0.15)
    assert m.between == pytest.approx(between, rel=0.15)
    assert m.explained == pytest.approx(r2, abs=0.08)
    # No instruction with two reviews: W cannot be measured and must be given.
    with pytest.raises(ValueError, match="within_default"):
        moments_from_labels(np.arange(50), rng.normal(size=50))
    assumed = moments_from_labels(np.arange(50), rng.normal(size=50), within_default=0.3)
    assert not assumed.within_measured and assumed.within == 0.3


def test_a_useless_predictor_measured_on_a_first_wave_promises_no_savings():
    # 30 reviewed instructions and a predictor of pure noise: R2 squared from 30 points is
    # about 1/29 on average (more once corrected for the clinicians' disagreement); adjusted
    # for its fitted slope, the plan seldom picks the predictor for an imagined saving.
    rng = np.random.default_rng(8)
    picked, r2 = 0, []
    for _ in range(200):
        inst = np.r_[np.arange(30), np.arange(10)]
        mu = rng.normal(0.0, 0.45, 30)
        label = mu[inst] + rng.normal(0.0, 0.3, inst.shape[0])
        m = moments_from_labels(inst, label, rng.normal(size=30)[inst])
        r2.append(m.explained)
        col = Column("c", m.between, m.within, m.explained, 0.04)
        pick = compare("x", "x", [col], _pool()).recommended
        picked += pick is not None and pick.design.predictor
    assert float(np.mean(r2)) < 0.045  # 0.034 here; unadjusted 0.053
    assert picked <= 30  # 24 of 200 here; unadjusted 39


def _pool(instructions=300, subset=MIN_CLUSTERS):
    return Pool(instructions=instructions, patients=instructions, clinicians=5,
                agreement_subset=subset)  # fmt: skip


def _col(between=0.2, within=0.15, explained=0.0, se=0.04):
    return Column("c", between, within, explained, se)


def test_without_a_predictor_it_recommends_one_clinician_and_pairs_for_agreement():
    # Clinicians disagree (W > 0), the pool has instructions to spare: a second review of an
    # instruction buys W/2, a new instruction B + W. Overlap 1 is cheapest but has no pairs,
    # so the mixed design wins while the agreement sections are asked for; without them,
    # overlap 1.
    cmp = compare("x", "x", [_col()], _pool())
    assert cmp.recommended is not None and cmp.recommended.design.key == "mixed-classical"
    plain = next(p for p in cmp.plans if p.design.key == "overlap1-classical")
    assert "human_ceiling" in plain.gives_up and "clinicians_compared" in plain.gives_up
    assert "human_ceiling" in cmp.recommended.yields
    # Its count by hand: n instructions with (B + W (n - 10 + 5) / n) / n <= se^2.
    n = next(n for n in range(10, 301) if (0.2 + 0.15 * (n - 5) / n) / n <= 0.04**2)
    assert cmp.recommended.reviews == n + 10
    loose = compare("x", "x", [_col()], _pool(), required=["uniform_sample"])
    assert loose.recommended is not None and loose.recommended.design.key == "overlap1-classical"
    assert cmp.baseline.reviews == 2 * math.ceil((0.2 + 0.075) / 0.04**2)


def test_a_useless_predictor_is_not_recommended():
    cmp = compare("x", "x", [_col(explained=0.001)], _pool())
    assert cmp.recommended is not None and not cmp.recommended.design.predictor
    good = compare("x", "x", [_col(explained=0.6)], _pool())
    assert good.recommended is not None and good.recommended.design.key == "mixed-ppi"
    assert good.recommended.reviews < cmp.recommended.reviews


def test_adaptive_is_recommended_only_when_its_lost_sections_are_not_asked_for():
    col = Column("c", 0.2, 0.15, 0.6, 0.04, adaptive_gain=0.5)
    cmp = compare("x", "x", [col], _pool())
    assert cmp.recommended is not None and not cmp.recommended.design.adaptive
    adaptive = next(p for p in cmp.plans if p.design.key == "overlap1-adaptive")
    assert set(adaptive.gives_up) >= {"uniform_sample", "prediction_powered"}
    free = compare("x", "x", [col], _pool(), required=["human_ceiling"])
    assert free.recommended is not None and free.recommended.design.key == "overlap2-adaptive"


def test_when_the_pool_runs_out_more_clinicians_go_on_the_same_instructions():
    # 60 instructions cannot reach the target one clinician each: the mixed design adds second
    # clinicians beyond its subset; a target beyond every design is said so.
    col = _col(between=0.1, within=0.4, se=0.08)
    plan = plan_design(next(d for d in standard_designs() if d.key == "mixed-classical"),
                       [col], _pool(instructions=60))  # fmt: skip
    assert plan.labelled == 60 and plan.doubled > MIN_CLUSTERS
    assert float(variance(between=0.1, within=0.4, explained=0, pool=60, labelled=60,
                          doubled=plan.doubled)) <= 0.08**2  # fmt: skip
    assert float(variance(between=0.1, within=0.4, explained=0, pool=60, labelled=60,
                          doubled=plan.doubled - 1)) > 0.08**2  # fmt: skip
    assert plan.doubled == 35 and plan.reviews == 95  # (0.1 + 0.4 (60 - d/2) / 60) / 60
    hopeless = compare("x", "x", [_col(se=0.001)], _pool(instructions=60))
    assert hopeless.recommended is None and "add instructions" in hopeless.reason


def test_the_slowest_column_decides_and_unknown_sections_are_refused():
    one = plan_design(standard_designs()[0], [_col(se=0.06)], _pool())
    both = plan_design(standard_designs()[0], [_col(se=0.06), _col(se=0.04)], _pool())
    alone = plan_design(standard_designs()[0], [_col(se=0.04)], _pool())
    assert one.reviews < both.reviews == alone.reviews
    with pytest.raises(ValueError, match="unknown report sections"):
        compare("x", "x", [_col()], _pool(), required=["nonsense"])
    assert set(SECTIONS) >= {"human_ceiling", "clinicians_compared", "prediction_powered"}


def test_the_agreement_subset_has_the_patients_for_an_interval_and_the_asked_precision():
    assert agreement_subset_size(instructions=300) == MIN_CLUSTERS
    assert agreement_subset_size(instructions=6) == 6
    n = agreement_subset_size(instructions=300, half_width=0.15, pair_tau_sd=0.4)
    assert n == math.ceil((1.959964 * 0.4 / 0.15) ** 2)
    assert human_ceiling_half_width(n, 0.4) <= 0.15 < human_ceiling_half_width(n - 1, 0.4)
    with pytest.raises(ValueError):
        agreement_subset_size(instructions=300, half_width=0)


def test_the_posterior_is_calibrated_on_the_generator():
    # The floor leans on E[T | every score of the instruction]: on fresh draws, the truth
    # minus it averages 0 and is uncorrelated with it, and it explains more than one score.
    study = SimStudy(n_instructions=200)
    for strength in ((1.0,), (0.0, 3.0)):
        data = simulate_reviews(study, strength, 20, np.random.default_rng(2))
        m, pair = posterior(study, strength, data.yhat)
        resid = data.truth - m
        assert abs(float(resid.mean())) < 0.01
        assert abs(float(np.corrcoef(resid.ravel(), m.ravel())[0, 1])) < 0.02
        both = data.truth[..., :-1] * data.truth[..., 1:]
        assert abs(float((both - pair).mean())) < 0.01
        own = np.corrcoef(data.yhat.ravel(), data.truth.ravel())[0, 1]
        assert np.corrcoef(m.ravel(), data.truth.ravel())[0, 1] >= own - 1e-3


def test_the_joint_predictor_never_sees_the_fold_it_predicts():
    rng = np.random.default_rng(3)
    n, k = 120, 4
    scores = rng.random((n, k, 1))
    label = 0.2 + 0.5 * scores[..., 0] + rng.normal(0, 0.05, (n, k))
    labelled = np.arange(n) < 90
    fold = np.arange(n) % 3
    x = joint_features(scores)
    assert x.shape == (n, k, k + 2)
    out = cross_fitted(x, label, labelled, fold, 3)
    assert np.corrcoef(out[labelled].ravel(), label[labelled].ravel())[0, 1] > 0.9
    changed = label.copy()
    changed[0] += 5.0  # instruction 0 is labelled, in fold 0
    again = cross_fitted(x, changed, labelled, fold, 3)
    assert np.allclose(again[0], out[0])  # its own prediction ignores its own label
    assert not np.allclose(again[1], out[1])  # fold 1's model saw it
    assert not np.allclose(again[100], out[100])  # unlabelled: the mean of every fold model
    # Unlabelled instructions' labels are never read.
    junk = label.copy()
    junk[~labelled] = np.nan
    assert np.allclose(cross_fitted(x, junk, labelled, fold, 3), out)


def test_bench_study_prints_every_design_against_the_baseline_and_its_floor():
    out = StringIO()
    call_command(
        "bench_study", "--replicates", "8", "--only", "designs", "--instructions", "150",
        "--reviews", "120", stdout=out,
    )  # fmt: skip
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("study design: 8 replicates; 150 instructions;")
    per = [
        line for line in lines if "x the clinician reviews of uniform overlap-2 classical" in line
    ]
    assert any("issue level (0.70) / mixed, prediction-powered / top two apart:" in line
               and line.endswith("x the floor") for line in per)  # fmt: skip
    assert any("/ uniform overlap 1, joint predictor: coverage " in line
               and "at first wave of 20 instructions" in line for line in lines)  # fmt: skip
    assert any(line.startswith("  recommended at issue level (0.70) for top two apart: ")
               for line in lines)  # fmt: skip
    summary = next(line for line in lines if line.startswith("coverage over "))
    assert "8 replicates" in summary and "mean coverage " in summary
    assert any(
        line.startswith("useless predictor: the recommended design costs ") for line in lines
    )
