"""Scoring runs: batches, provenance, idempotence, aggregation over references, failures."""

import pytest
import sacrebleu
from django.core.management import call_command
from django.core.management.base import CommandError

from review.models import AuditEvent, Dataset, ModelResponse
from scoring.models import MetricConfig, MetricScore, ScoringBatch, ScoringRun
from scoring.runs import metric_configs
from scoring.runs import scoring as scoring_runs
from scoring.runs.selectors import run_progress
from tests.scoring.scoring_data import make_scoring_dataset

# Batches are enqueued on commit, so these tests commit for real (Celery runs eagerly here).
pytestmark = pytest.mark.django_db(transaction=True)

LEXICAL = ["rougeL", "bleu", "chrf"]


def scored_pairs() -> list[tuple[int, int]]:
    return list(MetricScore.objects.values_list("response_id", "config_id"))


def test_a_run_scores_every_response_with_references_once(settings) -> None:
    dataset = make_scoring_dataset()
    run = scoring_runs.scoring_run_create(dataset=dataset, metrics=LEXICAL, batch_size=5)
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.DONE
    assert run.total == 12 * 3  # 4 instructions x 3 responses x 3 metrics; the orphan is skipped
    pairs = scored_pairs()
    assert len(pairs) == len(set(pairs)) == 36
    progress = run_progress(run)
    assert (progress.produced, progress.total, progress.percent) == (36, 36, 100)
    assert AuditEvent.objects.filter(action=AuditEvent.Action.SCORING_STARTED).count() == 1


def test_scores_equal_the_library_and_carry_their_configuration() -> None:
    dataset = make_scoring_dataset()
    scoring_runs.scoring_run_create(dataset=dataset, metrics=["chrf"])
    config = MetricConfig.objects.get(backend="chrf")
    assert config.identity["reference_aggregate"] == "first"
    assert "sacrebleu" in str(config.identity)
    response = ModelResponse.objects.get(instruction__instruction_id="S1", model_name="m-beta")
    reference = response.instruction.references.get(annotator="Annotator_1").text
    expected = sacrebleu.CHRF(word_order=2).sentence_score(response.text, [reference]).score
    score = MetricScore.objects.get(response=response, config=config)
    assert score.value == pytest.approx(expected, abs=1e-9)
    assert score.values["score"] == pytest.approx(expected, abs=1e-9)


def test_rerunning_a_finished_run_computes_nothing(monkeypatch) -> None:
    dataset = make_scoring_dataset()
    scoring_runs.scoring_run_create(dataset=dataset, metrics=LEXICAL)
    before = MetricScore.objects.order_by("pk").values_list("pk", "value")
    calls = []
    original = scoring_runs._score_batch
    monkeypatch.setattr(scoring_runs, "_score_batch", lambda b: calls.append(b) or original(b))
    again = scoring_runs.scoring_run_create(dataset=dataset, metrics=LEXICAL)
    again.refresh_from_db()
    assert again.status == ScoringRun.Status.DONE
    assert again.batches.count() == 0 and calls == []
    assert list(MetricScore.objects.order_by("pk").values_list("pk", "value")) == list(before)


def test_max_aggregation_takes_the_best_reference(settings) -> None:
    dataset = make_scoring_dataset()
    scoring_runs.scoring_run_create(dataset=dataset, metrics=["bleu"], aggregate="max")
    response = ModelResponse.objects.get(instruction__instruction_id="S0", model_name="m-alpha")
    score = MetricScore.objects.get(response=response)
    refs = [r.text for r in response.instruction.references.order_by("annotator_order")]
    bleu = sacrebleu.BLEU(effective_order=True)
    per_ref = [bleu.sentence_score(response.text, [r]).score for r in refs]
    assert len(score.per_reference) == 2
    assert score.value == pytest.approx(max(per_ref))
    # "first" and "max" are distinct configurations: both can exist side by side
    scoring_runs.scoring_run_create(dataset=dataset, metrics=["bleu"], aggregate="first")
    assert MetricConfig.objects.filter(backend="bleu").count() == 2


def test_an_unavailable_metric_is_reported_and_the_others_still_run(settings) -> None:
    settings.COMET_MODEL = ""
    dataset = make_scoring_dataset()
    run = scoring_runs.scoring_run_create(dataset=dataset, metrics=["comet", "bleu"])
    run.refresh_from_db()
    assert "no COMET checkpoint configured" in run.unavailable["comet"]
    assert run.status == ScoringRun.Status.DONE
    assert MetricScore.objects.filter(config__backend="bleu").count() == 12
    statuses = {s.name: s for s in metric_configs.metric_statuses()}
    assert not statuses["comet"].available and statuses["bleu"].available


def test_a_batch_executed_twice_writes_no_duplicates() -> None:
    dataset = make_scoring_dataset()
    run = scoring_runs.scoring_run_create(dataset=dataset, metrics=["bleu"], enqueue=False)
    batch = run.batches.get()
    assert scoring_runs.scoring_batch_execute(batch_id=batch.pk) == 12
    # A redelivered message (worker killed after writing, before acking) finds the batch done.
    ScoringBatch.objects.filter(pk=batch.pk).update(status=ScoringBatch.Status.PENDING)
    assert scoring_runs.scoring_batch_execute(batch_id=batch.pk) == 0
    assert MetricScore.objects.count() == 12


def test_resume_scores_only_what_is_missing() -> None:
    dataset = make_scoring_dataset()
    run = scoring_runs.scoring_run_create(
        dataset=dataset, metrics=["bleu", "chrf"], batch_size=4, enqueue=False
    )
    first = run.batches.order_by("pk").first()
    scoring_runs.scoring_batch_execute(batch_id=first.pk)  # then the "worker dies"
    kept = set(scored_pairs())
    assert len(kept) == 4
    pending_before = set(
        run.batches.filter(status=ScoringBatch.Status.PENDING).values_list("pk", flat=True)
    )
    scoring_runs.scoring_run_resume(run=run)
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.DONE
    # Pending batches were queued again, not replaced: a task still waiting for one stays valid.
    assert pending_before <= set(run.batches.values_list("pk", flat=True))
    assert run.batches.count() == 6
    assert scoring_runs.scoring_batch_execute(batch_id=max(pending_before) + 1000) == 0
    pairs = scored_pairs()
    assert len(pairs) == len(set(pairs)) == 24
    assert kept <= set(pairs)


def test_a_failing_batch_fails_the_run_with_its_reason(monkeypatch) -> None:
    dataset = make_scoring_dataset()

    def explode(self, pairs):
        raise RuntimeError("model exploded")

    from scoring.metrics.lexical import BleuBackend

    monkeypatch.setattr(BleuBackend, "score", explode)
    with pytest.raises(RuntimeError):
        scoring_runs.scoring_run_create(dataset=dataset, metrics=["bleu"])
    run = ScoringRun.objects.get()
    assert run.status == ScoringRun.Status.FAILED
    # Researchers see the error's type; its message could quote response text (redacted).
    assert "RuntimeError: <message redacted" in run.error and "exploded" not in run.error
    assert run.batches.get().status == ScoringBatch.Status.FAILED


def test_the_score_command_runs_inline_and_names_unknown_metrics(capsys) -> None:
    make_scoring_dataset(name="cmd")
    call_command(
        "score", "--dataset", "cmd", "--metrics", "bleu,rougeL", "--inline", "--no-progress"
    )
    assert "done: 24 of 24 scored" in capsys.readouterr().out
    with pytest.raises(CommandError, match="unknown metric"):
        call_command("score", "--dataset", "cmd", "--metrics", "bleurt", "--inline")
    with pytest.raises(CommandError, match="no dataset named"):
        call_command("score", "--dataset", "nope", "--inline")


def test_the_run_pages_start_a_run_and_report_progress(client) -> None:
    from review.models import Role
    from tests import factories

    researcher = factories.make_user("r@example.edu", roles=[Role.RESEARCHER])
    client.force_login(researcher)
    dataset = make_scoring_dataset()
    page = client.get("/research/runs/")
    assert page.status_code == 200
    assert b"Unavailable: no COMET checkpoint configured" in page.content
    for bad in ("abc", "99999999999999999999999", ""):
        refused = client.post("/research/runs/", {"dataset": bad, "metrics": ["bleu"]})
        assert refused.status_code == 200 and b"Choose a dataset" in refused.content
    response = client.post("/research/runs/", {"dataset": dataset.pk, "metrics": ["bleu"]})
    run = ScoringRun.objects.get()
    assert response.status_code == 302 and response.url == f"/research/runs/{run.pk}/"
    progress = client.get(f"/research/runs/{run.pk}/progress.json").json()
    assert progress["status"] == "done" and progress["scored"] == progress["total"] == 12
    assert b"m-alpha" not in client.get(f"/research/runs/{run.pk}/").content


@pytest.fixture
def embedding_cache_dir(settings, tmp_path):
    """An empty embedding cache of this test's own (memory tier cleared)."""
    from scoring.metrics import embedding_cache

    settings.SCORING_EMBEDDING_CACHE_DIR = tmp_path / "embedding-cache"
    metric_configs._configure_embedding_cache()
    embedding_cache.clear_memory()
    return embedding_cache


def encoded(cache) -> int:
    return cache.cache_info()["encoded"]


@pytest.mark.slow
def test_a_new_models_responses_cost_only_their_own_texts(embedding_cache_dir) -> None:
    dataset = make_scoring_dataset()
    start = encoded(embedding_cache_dir)
    scoring_runs.scoring_run_create(dataset=dataset, metrics=["bertscore"], batch_size=5)
    first = encoded(embedding_cache_dir) - start
    scored = ModelResponse.objects.filter(instruction__references__isnull=False).distinct()
    texts = {r.text for r in scored} | {
        ref.text for r in scored for ref in r.instruction.references.all()[:1]
    }
    assert first == len(texts)  # each distinct text once, across 3 batches
    # a new model answers every instruction: only its 4 responses are embedded
    for instruction in dataset.instructions.filter(references__isnull=False).distinct():
        ModelResponse.objects.create(
            instruction=instruction, model_name="m-new", text=f"New answer {instruction.pk}."
        )
    scoring_runs.scoring_run_create(dataset=dataset, metrics=["bertscore"])
    assert encoded(embedding_cache_dir) - start == first + 4
    # another reference aggregation embeds only the second references, never seen before
    before = encoded(embedding_cache_dir)
    scoring_runs.scoring_run_create(dataset=dataset, metrics=["bertscore"], aggregate="max")
    assert encoded(embedding_cache_dir) - before == 2  # Annotator_2 of S0 and S2
    assert MetricScore.objects.filter(config__backend="bertscore").count() == 16 * 2


@pytest.mark.slow
def test_a_score_whose_text_the_model_cut_is_marked_truncated(embedding_cache_dir) -> None:
    from tests.scoring.test_metrics import CUT

    dataset = make_scoring_dataset()
    instruction = dataset.instructions.get(instruction_id="S1")
    instruction.references.update(text=CUT.reference)
    cut = ModelResponse.objects.create(
        instruction=instruction, model_name="m-long", text=CUT.hypothesis
    )
    scoring_runs.scoring_run_create(dataset=dataset, metrics=["bertscore", "bleu"])
    bert = MetricScore.objects.get(response=cut, config__backend="bertscore")
    assert bert.truncated and bert.value == pytest.approx(1.0, abs=1e-4)
    assert not MetricScore.objects.get(response=cut, config__backend="bleu").truncated
    short = MetricScore.objects.filter(config__backend="bertscore").exclude(
        response__instruction=instruction
    )
    assert short.count() == 9 and not short.filter(truncated=True).exists()


def test_every_config_records_its_provenance() -> None:
    dataset = make_scoring_dataset()
    scoring_runs.scoring_run_create(dataset=dataset, metrics=[*LEXICAL, "bertscore"], enqueue=False)
    prov = {c.backend: c.provenance for c in MetricConfig.objects.all()}
    assert (
        prov["chrf"]["sacrebleu_signature"].startswith("nrefs:1|")
        and "nw:2" in (prov["chrf"]["sacrebleu_signature"])
    )
    assert (
        "bleu" in prov["bleu"]["sacrebleu_signature"].lower() or prov["bleu"]["sacrebleu_signature"]
    )
    assert prov["rougeL"]["stemming"] is False
    bert = prov["bertscore"]
    assert bert["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert len(bert["weights_sha256"]) == 64 and bert["layer"] == 6
    assert bert["idf"] is False and bert["baseline_rescaling"] is False
    assert bert["tokenizer"] == "BertTokenizerFast" and bert["tokenizer_fast"] is True
    assert bert["library_versions"]["bert-score"]
    assert {p["reference_aggregation"] for p in prov.values()} == {"first"}


def test_the_helm_preset_names_the_missing_models_and_how_to_bring_them(client) -> None:
    preset = metric_configs.PRESETS["medalign-helm"]
    assert set(preset.metrics) == {"bertscore", "comet", "chrf", "rougeL", "bleu", "meteor"}
    missing = metric_configs.preset_missing(preset)
    if not missing:
        pytest.skip("the preset's models are in this machine's cache")
    make_scoring_dataset(name="helm")
    with pytest.raises(CommandError) as exc:
        call_command("score", "--dataset", "helm", "--preset", "medalign-helm", "--inline")
    for repo in missing:
        assert repo in str(exc.value)
    assert "huggingface-cli download" in str(exc.value)
    assert not ScoringRun.objects.exists()  # nothing half-started

    from review.models import Role
    from tests import factories

    client.force_login(factories.make_user("h@example.edu", roles=[Role.RESEARCHER]))
    page = client.get("/research/runs/")
    assert b'value="medalign-helm"' in page.content
    dataset = Dataset.objects.get(name="helm")
    refused = client.post("/research/runs/", {"dataset": dataset.pk, "preset": "medalign-helm"})
    assert refused.status_code == 200 and b"distilbert-base-uncased" in refused.content
    assert not ScoringRun.objects.exists()


def test_the_helm_preset_runs_its_own_models_when_they_are_cached(
    monkeypatch, settings, tmp_path
) -> None:
    monkeypatch.setattr(metric_configs, "_in_hf_cache", lambda repo: True)
    settings.METEOR_WORDNET_DIR = str(tmp_path / "this-servers-wordnet")
    dataset = make_scoring_dataset()
    run = scoring_runs.scoring_run_create(dataset=dataset, metrics=[], preset="medalign-helm")
    assert run.metrics == ["bertscore", "comet", "chrf", "rougeL", "bleu", "meteor"]
    # the preset's models, not this server's settings (not really cached here: unavailable)
    for name in ("bertscore", "comet"):
        if name in run.unavailable:
            assert ("distilbert" if name == "bertscore" else "wmt22") in run.unavailable[name]
        else:
            config = run.configs.get(backend=name)
            assert (
                config.identity["backend_options"]
                == metric_configs.PRESETS["medalign-helm"].metrics[name]
            )
    assert set(run.configs.values_list("backend", flat=True)) >= {"chrf", "rougeL", "bleu"}
    # METEOR's WordNet is this server's (no model cache holds it): here, a folder that is missing
    assert "this-servers-wordnet" in run.unavailable["meteor"]
