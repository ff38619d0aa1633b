"""METEOR in scoring runs and reports: unavailable without WordNet (the other metrics still run),
scores stored with their provenance, and the report's tables, exports and page naming it."""

import csv
import io

import pytest
from django.urls import reverse

from review.models import Dataset, ModelResponse, ResponseJudgement, Review, Role
from scoring.models import MetricConfig, MetricScore, ScoringRun
from scoring.reports import compute, exports, services
from scoring.runs import metric_configs
from scoring.runs import scoring as scoring_runs
from tests import factories
from tests.scoring.scoring_data import make_scoring_dataset
from tests.scoring.test_meteor import WORDNET, needs_wordnet
from tests.scoring.test_worker import Worker, exactly_one_score_each, wait_for, worker  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)  # batches are enqueued on commit


def nltk_meteor(references: list[str], hypothesis: str) -> float:
    from nltk.translate.meteor_score import meteor_score

    wordnet = metric_configs.backend_for("meteor")._wordnet()  # the same WordNet, loaded once
    return meteor_score([r.split() for r in references], hypothesis.split(), wordnet=wordnet)


def test_without_wordnet_meteor_is_unavailable_and_the_others_still_run(
    settings, tmp_path, client
) -> None:
    settings.METEOR_WORDNET_DIR = str(tmp_path / "no-wordnet")
    dataset = make_scoring_dataset()
    run = scoring_runs.scoring_run_create(dataset=dataset, metrics=["meteor", "bleu"])
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.DONE
    assert str(tmp_path / "no-wordnet") in run.unavailable["meteor"]
    assert "wordnet-base" in run.unavailable["meteor"]
    assert MetricScore.objects.filter(config__backend="bleu").count() == 12
    assert not MetricConfig.objects.filter(backend="meteor").exists()

    statuses = {s.name: s for s in metric_configs.metric_statuses()}
    assert "meteor" in metric_configs.DEFAULT_METRICS
    assert not statuses["meteor"].available and "wordnet-base" in statuses["meteor"].reason
    assert statuses["meteor"].label == "METEOR" and statuses["bleu"].available
    client.force_login(factories.make_user("r@example.edu", roles=[Role.RESEARCHER]))
    page = client.get("/research/runs/").content.decode()
    assert 'id="metric-meteor"' in page and "Unavailable: METEOR: no WordNet folder" in page


@pytest.mark.slow
@needs_wordnet
def test_a_run_with_meteor_stores_nltks_values_with_their_provenance(settings) -> None:
    settings.METEOR_WORDNET_DIR = str(WORDNET)
    dataset = make_scoring_dataset()
    run = scoring_runs.scoring_run_create(dataset=dataset, metrics=["meteor"], batch_size=5)
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.DONE and not run.unavailable
    config = MetricConfig.objects.get(backend="meteor")
    assert config.label == "METEOR (first reference)"
    assert config.identity["backend_options"] == {"wordnet": str(WORDNET)}
    assert config.provenance["model"] == "WordNet 3.0"
    assert config.provenance["library_versions"] == {"nltk": "3.10.4"}
    assert config.provenance["reference_aggregation"] == "first"
    assert len(config.provenance["wordnet_sha256"]) == 64
    scores = MetricScore.objects.filter(config=config).select_related("response")
    assert scores.count() == 12
    for score in scores:
        references = sorted(
            score.response.instruction.references.all(), key=lambda r: r.annotator_order
        )
        want = nltk_meteor([references[0].text], score.response.text)
        assert score.value == pytest.approx(want, abs=1e-12)
        assert score.values == {"score": pytest.approx(want, abs=1e-12)}
    assert 0 < min(s.value for s in scores) < max(s.value for s in scores) <= 1

    # several references, best one: NLTK's own multi-reference meteor_score
    scoring_runs.scoring_run_create(dataset=dataset, metrics=["meteor"], aggregate="max")
    best = MetricConfig.objects.get(backend="meteor", identity__reference_aggregate="max")
    response = ModelResponse.objects.get(instruction__instruction_id="S0", model_name="m-beta")
    refs = [r.text for r in response.instruction.references.all()]
    assert len(refs) == 2
    assert MetricScore.objects.get(config=best, response=response).value == pytest.approx(
        nltk_meteor(refs, response.text), abs=1e-12
    )


@pytest.mark.worker
@pytest.mark.slow
@needs_wordnet
def test_a_real_worker_loads_wordnet_after_the_fork_and_scores_meteor(
    worker: Worker,  # noqa: F811 - the fixture of test_worker
    settings,
) -> None:
    settings.METEOR_WORDNET_DIR = str(WORDNET)
    dataset = make_scoring_dataset()
    run = scoring_runs.scoring_run_create(dataset=dataset, metrics=["meteor"], batch_size=5)
    wait_for(
        lambda: ScoringRun.objects.get(pk=run.pk).status == ScoringRun.Status.DONE,
        180,
        "the METEOR run",
        worker.log,
    )
    run.refresh_from_db()
    exactly_one_score_each(run)
    for score in MetricScore.objects.select_related("response__instruction"):
        reference = score.response.instruction.references.get(annotator="Annotator_1").text
        assert score.value == pytest.approx(nltk_meteor([reference], score.response.text))


def _reviewed_dataset() -> Dataset:
    """The scoring dataset with two clinicians' submitted rankings of every instruction."""
    dataset = make_scoring_dataset(name="meteor-report")
    clinicians = [factories.make_user(f"c{k}@example.edu", roles=[Role.CLINICIAN]) for k in (1, 2)]
    for instruction in dataset.instructions.filter(references__isnull=False).distinct():
        responses = list(instruction.responses.order_by("model_name"))
        for k, clinician in enumerate(clinicians):
            review = Review.objects.create(
                assignment=factories.assign(instruction, clinician),
                status=Review.Status.SUBMITTED,
                shown_order=[r.pk for r in responses],
            )
            ranks = [1, 2, 3] if k == 0 else [1, 3, 2]
            ResponseJudgement.objects.bulk_create(
                ResponseJudgement(
                    review=review, response=r, position=i, rank=ranks[i], is_correct=ranks[i] == 1
                )
                for i, r in enumerate(responses)
            )
    return dataset


@pytest.mark.slow
@needs_wordnet
def test_a_report_includes_meteor_with_its_wordnet(settings, client) -> None:
    settings.METEOR_WORDNET_DIR = str(WORDNET)
    dataset = _reviewed_dataset()
    scoring_runs.scoring_run_create(dataset=dataset, metrics=["meteor", "bleu"])
    researcher = factories.make_user("r@example.edu", roles=[Role.RESEARCHER])
    report = services.report_create(
        dataset=dataset, actor=researcher, n_resamples=200, seed=3, enqueue=False
    )
    report = compute.report_compute(report_id=report.pk)
    assert report.error == ""
    assert {m["key"]: m["label"] for m in report.results["metrics"]} == {
        "bleu": "BLEU (first reference)",
        "meteor": "METEOR (first reference)",
    }
    correlation = {r["metric"]: r for r in exports.rows(report, "correlation")}
    assert correlation["meteor"]["n_reviews"] == correlation["bleu"]["n_reviews"] == 8
    (meteor,) = [m for m in exports.metric_provenance(report) if m["metric"] == "meteor"]
    config = MetricConfig.objects.get(backend="meteor")
    assert meteor["model"] == "WordNet 3.0"
    assert meteor["weights_sha256"] == config.provenance["wordnet_sha256"]
    assert meteor["tokenizer"] == "whitespace" and meteor["stemming"] is True
    assert meteor["library_versions"] == {"nltk": "3.10.4"}
    rows = list(csv.DictReader(io.StringIO(exports.to_csv(report, "metrics"))))
    assert [r["metric"] for r in rows] == ["bleu", "meteor"]
    client.force_login(researcher)
    page = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert "METEOR (first reference)" in page and "WordNet 3.0" in page
