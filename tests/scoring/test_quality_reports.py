"""Which truth a report uses, and what reviewing quality leaves out of it: the consensus named
on the page and in every export, the metrics against every consensus, gold and calibration
reviews and excluded clinicians left out and said so, the adjudication trail and the gold
results exported with the rest."""

import csv
import io
import json
import time

import pytest
from django.urls import reverse

from review.models import Assignment, Role
from review.services import adjudications as adjudication_services
from review.services import quality as quality_services
from scoring.models import MetricConfig, MetricScore
from scoring.reports import compute, exports, services
from scoring.reports.truth import comparison_basis, conclusion_changes
from tests import factories
from tests.review.quality_data import RELEASE, make_world, submit

pytestmark = pytest.mark.django_db
NAMES = list(RELEASE)
SWAPPED = {**RELEASE, NAMES[0]: (2, True), NAMES[1]: (1, True)}
SPLIT = {**RELEASE, NAMES[2]: (3, True)}


@pytest.fixture
def w():
    """Twelve instructions, three clinicians: two judge as the release did, the third swaps
    the two best and splits a verdict on the first three instructions; two gold items; BLEU
    follows the release's order, LEN reverses it."""
    w = make_world(n_instructions=14, n_clinicians=3, prefix="R")
    w.researcher = factories.make_user("r-researcher@example.edu", roles=[Role.RESEARCHER])
    gold = w.instructions[12:]
    quality_services.gold_items_from_release(
        study=w.study, instructions=gold, use="gold", actor=w.admin
    )
    for k, instruction in enumerate(w.instructions[:12]):
        submit(factories.assign(instruction, w.clinicians[0]), RELEASE)
        submit(factories.assign(instruction, w.clinicians[1]), RELEASE)
        submit(factories.assign(instruction, w.clinicians[2]), SPLIT if k < 3 else SWAPPED)
    for instruction in gold:
        a = Assignment.objects.create(
            study=w.study, instruction=instruction, clinician=w.clinicians[0], purpose="gold"
        )
        submit(a, RELEASE)
    bleu = MetricConfig.objects.create(
        backend="bleu", identity={}, identity_hash="q-bleu", label="BLEU"
    )
    length = MetricConfig.objects.create(
        backend="len", identity={}, identity_hash="q-len", label="LEN"
    )
    for instruction in w.instructions:
        for response in instruction.responses.all():
            rank = RELEASE[response.model_name][0]
            MetricScore.objects.create(response=response, config=bleu, value=10.0 - rank)
            MetricScore.objects.create(response=response, config=length, value=float(rank))
    return w


def _report(w, **kw):
    report = services.report_create(
        dataset=w.dataset, actor=w.researcher, n_resamples=200, seed=3, enqueue=False,
        min_clusters=2, **kw,
    )  # fmt: skip
    report = compute.report_compute(report_id=report.pk)
    assert report.status == "done", report.error
    return report


def test_the_default_scores_each_review_and_sets_every_consensus_beside_it(w):
    report = _report(w)
    section = report.results["consensus"]
    assert section["chosen"] == "reviews"
    methods = section["methods"]
    assert set(methods) == {"reviews", "majority", "adjudicated", "dawid_skene", "mace"}
    assert methods["adjudicated"]["available"] is False
    assert "no adjudication" in methods["adjudicated"]["note"]
    for method in ("majority", "dawid_skene", "mace"):
        rows = {r["metric"]: r for r in methods[method]["metrics"]}
        assert rows["bleu"]["mean_tau"] == pytest.approx(1.0)
        assert rows["len"]["mean_tau"] == pytest.approx(-1.0)
        assert rows["bleu"]["n_reviews"] == 12  # one consensus per instruction
    assert methods["reviews"]["metrics"][0]["n_reviews"] == 36
    # The latent-class models see the third clinician as the least reliable.
    reliability = {r["clinician"]: r for r in methods["dawid_skene"]["reliability"]}
    third = w.clinicians[2].pseudonym
    assert reliability[third]["ranking"] < reliability[w.clinicians[0].pseudonym]["ranking"]
    # The gold reviews are quality checks: left out, and said so.
    quality = report.provenance["quality"]
    assert quality["gold_reviews_excluded"] == 2 and not quality["gold_included"]
    assert report.provenance["counts"]["reviews"] == 36
    assert report.provenance["consensus"] == {
        "method": "reviews", "label": "each review on its own (no consensus)"
    }  # fmt: skip


def test_a_chosen_consensus_is_what_the_correlation_table_uses_and_is_named_everywhere(w, client):
    report = _report(w, consensus="majority")
    bleu = next(r for r in report.results["correlation"] if r["metric"] == "bleu")
    assert bleu["n_reviews"] == 12 and bleu["mean_tau"] == pytest.approx(1.0)
    # The clinicians' own sections stay on their reviews.
    assert report.results["human_ceiling"]["n_pairs"] == 36
    for table in exports.TABLES:
        rows = list(csv.DictReader(io.StringIO(exports.to_csv(report, table))))
        assert all(r["consensus"] == "majority" for r in rows), table
        assert json.loads(exports.to_json(report, table))["parameters"]["consensus"] == "majority"
    factories.sign_in(client, w.researcher)
    page = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert "Metrics scored against: <strong>majority of clinicians</strong>" in page
    assert 'data-testid="truth-table"' in page
    assert '<th scope="col">Majority of clinicians (this report)</th>' in page
    assert '<th scope="col">MACE latent-class estimate</th>' in page
    assert (
        "Adjudicated where adjudicated, else the majority: no adjudication submitted yet." in page
    )


def test_gold_reviews_are_analysed_only_when_asked(w):
    report = _report(w, include_gold=True)
    assert report.provenance["counts"]["reviews"] == 38
    assert report.provenance["quality"]["gold_reviews_excluded"] == 0


def test_calibration_reviews_and_excluded_clinicians_stay_out_and_are_named(w, client):
    newcomer = factories.make_user("r-new@example.edu", roles=[Role.CLINICIAN])
    references = {}
    for response in w.instructions[0].responses.all():
        references[response.pk] = RELEASE[response.model_name]
    calibration = Assignment.objects.create(
        study=w.study, instruction=w.instructions[5], clinician=newcomer, purpose="calibration"
    )
    submit(calibration, RELEASE)
    quality_services.clinician_exclude(
        study=w.study, clinician=w.clinicians[2], reason="Swaps the best two.", actor=w.admin
    )
    report = _report(w)
    assert report.provenance["counts"]["reviews"] == 24
    excluded = report.provenance["quality"]["clinicians_excluded"]
    assert excluded == [
        {
            "clinician": w.clinicians[2].pseudonym,
            "reason": "Swaps the best two.",
            "excluded_at": excluded[0]["excluded_at"],
            "excluded_by": w.admin.pseudonym,
            "reviews_left_out": 12,
        }
    ]
    assert report.provenance["quality"]["calibration_reviews_excluded"] == 1
    reasons = {r["excluded"] for r in exports.rows(report, "reviews") if r["excluded"]}
    assert "clinician left out by an admin: Swaps the best two." in reasons
    assert "calibration review (never analysed)" in reasons
    factories.sign_in(client, w.researcher)
    page = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert "1 clinician left out by an admin" in page and "Swaps the best two." in page


def _adjudicate(w, instruction, resolution):
    plan = adjudication_services.adjudications_create(
        study=w.study, instruction_ids=[instruction.pk], adjudicator=w.adjudicator, actor=w.admin
    )
    adjudication = plan.created[0]
    names = dict(instruction.responses.values_list("id", "model_name"))
    now = int(time.time() * 1000)
    edits = [{"field": "reason", "value": "SECRET-REASON quoting the record", "at": now}]
    for handle, rid in zip(adjudication.handles, adjudication.shown_order, strict=True):
        rank, correct = resolution[names[int(rid)]]
        edits += [
            {"handle": handle, "field": "rank", "value": rank, "at": now},
            {"handle": handle, "field": "is_correct", "value": correct, "at": now},
        ]
    adjudication_services.adjudication_submit(
        adjudication_id=adjudication.pk,
        adjudicator=w.adjudicator,
        payload={"edits": edits, "tab": "t", "seq": 1, "active_seconds": 0},
    )
    return adjudication


def test_the_adjudicated_consensus_and_trail(w):
    resolution = {**RELEASE, NAMES[2]: (3, True)}  # the adjudicator sides with the third
    _adjudicate(w, w.instructions[0], resolution)
    report = _report(w, consensus="adjudicated")
    entry = report.results["consensus"]["methods"]["adjudicated"]
    assert entry["available"] and entry["n_adjudicated_instructions"] == 1
    trail = exports.rows(report, "adjudications")
    assert len(trail) == 4 and {r["instruction_id"] for r in trail} == {"R-00"}
    row = next(r for r in trail if r["model"] == NAMES[2])
    assert (row["rank"], row["correct"]) == (3, True)
    assert row["adjudicator"] == w.adjudicator.pseudonym
    assert sorted(row["reviewers"]) == sorted(c.pseudonym for c in w.clinicians)
    assert row["split_responses"] == 1 and row["reason_length"] > 0
    # The reason stays in the app: no export carries it.
    for table in exports.TABLES:
        assert "SECRET-REASON" not in exports.to_csv(report, table), table


def test_gold_results_export_per_clinician(w):
    report = _report(w)
    rows = exports.rows(report, "gold")
    assert [r["clinician"] for r in rows] == [w.clinicians[0].pseudonym]
    assert rows[0]["gold_items"] == 2 and rows[0]["note"].startswith("too few")


def test_conclusion_changes_name_the_best_metric_and_a_sign():
    def entry(bleu, chrf):
        return {
            "available": True,
            "metrics": [
                {
                    "metric": "bleu",
                    "label": "BLEU",
                    "mean_tau": bleu[0],
                    "ci_low": bleu[1],
                    "ci_high": bleu[2],
                },
                {
                    "metric": "chrf",
                    "label": "chrF",
                    "mean_tau": chrf[0],
                    "ci_low": chrf[1],
                    "ci_high": chrf[2],
                },
            ],
        }

    methods = {
        "reviews": entry((0.3, 0.1, 0.5), (0.2, -0.1, 0.4)),
        "majority": entry((0.3, 0.1, 0.5), (0.2, 0.05, 0.4)),
        "mace": entry((0.1, -0.1, 0.3), (0.4, 0.2, 0.6)),
    }
    lines = conclusion_changes(methods, "reviews")
    assert (
        "chrF: tau undecided against each review on its own, above zero against the "
        "clinicians' majority." in lines
    )
    assert (
        "Best metric: BLEU against each review on its own, chrF against the MACE estimate." in lines
    )
    assert conclusion_changes({"reviews": entry((0.3, 0.1, 0.5), (0.2, 0.1, 0.4))}, "reviews") == []


def test_one_clinician_gets_no_latent_reliability_and_no_comparison_sentence(client):
    """A latent-class model cannot estimate one clinician's reliability (it printed 1.00 for
    Dawid-Skene and 0.74 for MACE on the same person), and "no consensus changes a
    conclusion" is empty when every consensus is that one clinician's judgement."""
    w = make_world(n_instructions=12, n_clinicians=1, prefix="O")
    w.researcher = factories.make_user("o-researcher@example.edu", roles=[Role.RESEARCHER])
    for instruction in w.instructions:
        submit(factories.assign(instruction, w.clinicians[0]), RELEASE)
    bleu = MetricConfig.objects.create(
        backend="bleu", identity={}, identity_hash="o-bleu", label="BLEU"
    )
    for instruction in w.instructions:
        for response in instruction.responses.all():
            value = 10.0 - RELEASE[response.model_name][0]
            MetricScore.objects.create(response=response, config=bleu, value=value)
    report = _report(w)
    methods = report.results["consensus"]["methods"]
    for latent in ("dawid_skene", "mace"):
        assert methods[latent]["available"] is False
        assert "two clinicians" in methods[latent]["note"]
        assert "reliability" not in methods[latent]
    assert report.results["consensus"]["comparison"] == "one clinician"
    client.force_login(w.researcher)
    page = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert "every consensus is that clinician's judgement" in page
    assert "No consensus changes the best metric" not in page
    assert "estimated reliability: " not in page


def test_the_comparison_sentence_needs_an_interval_to_change():
    rows = [{"metric": "bleu", "label": "BLEU", "mean_tau": 0.3, "ci_low": None, "ci_high": None}]
    methods = {
        "reviews": {"available": True, "metrics": rows},
        "majority": {"available": True, "metrics": rows},
    }
    assert comparison_basis(methods, "reviews", n_clinicians=3) == "no intervals"
    methods["reviews"]["metrics"] = [{**rows[0], "ci_low": 0.1, "ci_high": 0.5}]
    assert comparison_basis(methods, "reviews", n_clinicians=3) == "compared"
    del methods["majority"]
    assert comparison_basis(methods, "reviews", n_clinicians=3) == "nothing else"


def test_a_lowered_cluster_minimum_is_said_on_the_page(w, client):
    report = _report(w)  # min_clusters=2, below the default
    client.force_login(w.researcher)
    page = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert "The fewest clusters for an interval was lowered to 2" in page
    report.results["clustering"]["min_clusters"] = 10
    report.save(update_fields=["results"])
    page = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert "was lowered" not in page
