"""Generation runs on a real Celery worker with the tiny causal LM (plumbing, not evaluation):
end to end, and a worker killed mid-run that ends with exactly one response per instruction x
model x context length."""

from collections import Counter

import pytest
from django.db import connection

from review.models import Instruction, ModelResponse
from scoring.generation import runs as generation
from scoring.llm.backends import GenerationParams
from scoring.models import GenerationRun
from scoring.runs.selectors import run_progress
from tests.scoring.generation_data import make_generation_dataset
from tests.scoring.test_worker import Worker, wait_for, worker  # noqa: F401 - the fixture

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def local_model(tiny_lm, settings) -> str:
    settings.GENERATION_MODEL_DIR = tiny_lm.parent
    return f"local:{tiny_lm.name}"


def _status(run: GenerationRun) -> str:
    return run_progress(run).status


def exactly_one_response_each(run: GenerationRun) -> None:
    names = [f"{run.label}@{n}" for n in run.context_lengths]
    pairs = list(
        ModelResponse.objects.filter(model_name__in=names).values_list(
            "instruction_id", "model_name"
        )
    )
    duplicates = [pair for pair, n in Counter(pairs).items() if n > 1]
    assert not duplicates, f"duplicate responses: {duplicates}"
    expected = Instruction.objects.filter(dataset=run.dataset, patient__isnull=False).count()
    assert len(pairs) == run.total == expected * len(run.context_lengths)


def test_a_real_worker_generates_a_run_end_to_end(worker: Worker, local_model) -> None:  # noqa: F811
    dataset = make_generation_dataset(n_instructions=3)
    run = generation.generation_run_create(
        dataset=dataset,
        model=local_model,
        context_lengths=[128, 512],
        params=GenerationParams(max_new_tokens=6),
        batch_size=2,
    )
    wait_for(lambda: _status(run) == GenerationRun.Status.DONE, 180, "the run", worker.log)
    run.refresh_from_db()
    exactly_one_response_each(run)
    gen = ModelResponse.objects.filter(model_name=f"{run.label}@512").first().generation_metadata
    assert gen["generation"]["run"] == run.pk
    assert gen["generation"]["prompt_tokens"] <= 512 - 6


def test_a_worker_killed_mid_run_ends_with_exactly_one_response_each(
    worker: Worker,  # noqa: F811
    local_model,
) -> None:
    if connection.vendor == "sqlite":
        pytest.skip(
            "SIGKILL of a SQLite writer leaves the test database's WAL unusable to the next "
            "process; this drill runs on PostgreSQL (CI, DATABASE_URL)"
        )
    dataset = make_generation_dataset(n_instructions=12, n_patients=3)
    run = generation.generation_run_create(
        dataset=dataset,
        model=local_model,
        context_lengths=[256, 1024],
        params=GenerationParams(max_new_tokens=48),
        batch_size=1,
    )
    names = [f"{run.label}@{n}" for n in run.context_lengths]
    wait_for(
        lambda: ModelResponse.objects.filter(model_name__in=names).count() >= 4,
        180,
        "the first responses",
        worker.log,
    )
    worker.kill()  # SIGKILL the whole worker (main process and pool child)
    killed_at = ModelResponse.objects.filter(model_name__in=names).count()
    assert killed_at < run.total, "the run finished before the kill: make it longer"
    worker.start()
    # Nobody presses Resume: the restarted worker's sweep re-queues the batch the dead one held.
    wait_for(lambda: _status(run) == GenerationRun.Status.DONE, 300, "the healed run", worker.log)
    run.refresh_from_db()
    exactly_one_response_each(run)
