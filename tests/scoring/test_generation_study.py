"""A generation run only produces candidates: clinicians never see its responses until an
admin adds a completed run to a study, and a failed or partial run's never join."""

import pytest
from django.urls import reverse

from review.models import ModelResponse, Role, StudyResponse
from review.services import studies as study_services
from scoring.generation import runs as generation
from scoring.llm.backends import GenerationParams
from scoring.models import GenerationBatch, GenerationRun
from tests import factories
from tests.scoring.generation_data import make_generation_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def local_model(tiny_lm, settings) -> str:
    settings.GENERATION_MODEL_DIR = tiny_lm.parent
    return f"local:{tiny_lm.name}"


def _run(capture, dataset, model, lengths=(128,)) -> GenerationRun:
    with capture(execute=True):
        run = generation.generation_run_create(
            dataset=dataset,
            model=model,
            context_lengths=list(lengths),
            params=GenerationParams(max_new_tokens=4),
        )
    run.refresh_from_db()
    return run


def _study_with_imported_set(dataset):
    """Round 1 with one imported model per instruction, as a release import leaves it."""
    for instruction in dataset.instructions.exclude(patient=None):
        ModelResponse.objects.create(instruction=instruction, model_name="release-a", text="A.")
    return factories.put_in_study(*dataset.instructions.exclude(patient=None))


@pytest.mark.slow
def test_a_completed_run_joins_only_by_an_admin_and_a_failed_or_partial_one_never(
    client, local_model, django_capture_on_commit_callbacks
):
    dataset = make_generation_dataset(n_instructions=3)
    study = _study_with_imported_set(dataset)
    clinician = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    admin = factories.make_user("a@example.edu", roles=[Role.ADMIN])
    instructions = list(dataset.instructions.exclude(patient=None).order_by("pk"))
    for instruction in instructions:
        factories.assign(instruction, clinician, study=study)
    run = _run(django_capture_on_commit_callbacks, dataset, local_model)
    assert run.status == GenerationRun.Status.DONE
    generated = ModelResponse.objects.filter(model_name="tiny-lm@128")
    assert generated.count() == 3
    # Candidates only: nothing changed on any clinician's page.
    assert not StudyResponse.objects.filter(response__in=generated).exists()
    factories.sign_in(client, clinician)
    page = client.get(reverse("clinician_review", args=[instructions[0].pk]))
    assert page.content.decode().count('class="response-text"') == 1  # started now

    # A failed run, then a partial one (a batch never finished): refused, whichever way asked.
    for status, batch_status in (("failed", "done"), ("done", "pending")):
        GenerationRun.objects.filter(pk=run.pk).update(status=status)
        GenerationBatch.objects.filter(run=run).update(status=batch_status)
        with pytest.raises(study_services.StudyError, match=f"run #{run.pk}"):
            study_services.study_add_responses(
                study=study,
                responses=generated.filter(instruction__in=instructions[1:]),
                source="model tiny-lm@128",
                actor=admin,
            )
    assert not StudyResponse.objects.filter(response__in=generated).exists()

    # Complete: the admin adds it, but only where nobody has started (instruction 0 has).
    GenerationRun.objects.filter(pk=run.pk).update(status="done")
    GenerationBatch.objects.filter(run=run).update(status="done")
    factories.sign_in(client, admin)
    add = reverse("admin_study_add_model", args=[study.pk])
    refused = client.post(add, {"model_name": "tiny-lm@128"}, follow=True).content.decode()
    assert "a started instruction" in refused
    change = study_services.study_add_responses(
        study=study,
        responses=generated.filter(instruction__in=instructions[1:]),
        source=f"generation run {run.pk}",
        actor=admin,
    )
    assert change.added == 2
    factories.sign_in(client, clinician)
    for instruction, expected in zip(instructions, (1, 2, 2), strict=True):
        html = client.get(reverse("clinician_review", args=[instruction.pk])).content.decode()
        assert html.count('class="response-text"') == expected


@pytest.mark.slow
def test_a_context_longer_than_the_model_holds_is_refused_at_creation(local_model) -> None:
    dataset = make_generation_dataset(n_instructions=1)
    with pytest.raises(generation.GenerationRunError, match=r"4,096 positions"):
        generation.generation_run_create(
            dataset=dataset, model=local_model, context_lengths=[2048, 32768], enqueue=False
        )
    assert not GenerationRun.objects.exists()
