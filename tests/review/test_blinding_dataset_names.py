"""Masking on the clinician pages reads every model name of the dataset, not only those of the
instruction's response set: a response may name another model of the dataset ("Unlike
Atlas-13B…"), which would tell the clinician which models are compared, and in which responses.
The names are read once per process and dataset, and again after a short while
(``review.selectors.datasets.dataset_model_names``)."""

import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from review.blinding import MASK
from review.models import ModelResponse, Role
from review.selectors.datasets import dataset_model_names, dataset_model_names_forget
from review.services import grading as grading_services
from review.services import rubrics as rubric_services
from review.services.rubrics import CriterionInput
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db

TEXT = "Unlike Atlas-13B and SecretModel, I, Med42, would hold the statin."
MASKED = f"Unlike {MASK} and {MASK}, I, {MASK}, would hold the statin."


@pytest.fixture
def world():
    dataset = review_data.make_dataset("dataset-names")
    patient = review_data.make_record(dataset, "P-NAMES", n_events=5)
    shown = review_data.make_instruction(dataset, patient, "N-SHOWN", n_responses=0)
    ModelResponse.objects.create(instruction=shown, model_name="Med42-70B", text=TEXT)
    ModelResponse.objects.create(instruction=shown, model_name="Med42-70B@4096", text="Rest.")
    other = review_data.make_instruction(dataset, patient, "N-OTHER", n_responses=0)
    for name in ("Atlas-13B", "SecretModel"):
        ModelResponse.objects.create(instruction=other, model_name=name, text="Fluids.")
    clinician = factories.make_user("names@example.edu", roles=[Role.CLINICIAN])
    return dataset, shown, clinician


def test_the_review_page_masks_every_model_name_of_the_dataset(client, world):
    _, shown, clinician = world
    review_data.assign(shown, clinician)
    factories.sign_in(client, clinician)
    html = client.get(reverse("clinician_review", args=[shown.pk])).content.decode()
    assert MASKED in html
    for word in ("Atlas", "SecretModel", "Med42"):
        assert word not in html
    data = json.loads(
        html.split('id="review-data" type="application/json">')[1].split("</script>")[0]
    )
    assert any(r["preview"].startswith(f"Unlike {MASK} and {MASK}") for r in data["responses"])


def test_the_grading_page_masks_every_model_name_of_the_dataset(client, world):
    _, shown, clinician = world
    study = factories.put_in_study(shown)
    author = factories.make_user("author@example.edu", roles=[Role.CLINICIAN])
    reviewer = factories.make_user("reviewer@example.edu", roles=[Role.CLINICIAN])
    rubric = rubric_services.rubric_assign(
        instruction=shown, author=author, reviewer=reviewer, actor=None
    )
    rubric_services.rubric_save_criteria(
        rubric=rubric, actor=author, criteria=[CriterionInput("Holds the statin.", 5, ())]
    )
    rubric_services.rubric_submit(rubric=rubric, actor=author)
    rubric = rubric_services.rubric_accept(rubric=rubric, actor=reviewer)
    (grading,) = grading_services.gradings_assign(
        rubric=rubric, study=study, clinicians=[clinician], actor=None
    )
    factories.sign_in(client, clinician)
    html = client.get(reverse("grading_page", args=[grading.pk])).content.decode()
    assert MASKED in html
    for word in ("Atlas", "SecretModel", "Med42"):
        assert word not in html


def test_the_names_are_read_once_then_again_after_a_while(
    world, monkeypatch, django_assert_num_queries
):
    dataset, shown, _ = world
    names = dataset_model_names(dataset.pk)
    assert names == ("Atlas-13B", "Med42-70B", "Med42-70B@4096", "SecretModel")
    ModelResponse.objects.create(instruction=shown, model_name="Zephyrine-9B", text="New.")
    with django_assert_num_queries(0):
        assert dataset_model_names(dataset.pk) == names  # the process's copy
    import review.selectors.datasets as datasets

    later = datasets.time.monotonic() + datasets.MODEL_NAMES_CACHE_SECONDS + 1
    monkeypatch.setattr(datasets.time, "monotonic", lambda: later)
    assert "Zephyrine-9B" in dataset_model_names(dataset.pk)
    dataset_model_names_forget()


def test_every_response_mask_check_flags_is_masked_on_the_page(client, world, capsys):
    dataset, shown, clinician = world
    call_command("mask_check", "--dataset", dataset.name)
    out = capsys.readouterr().out
    assert "1 of 4 responses had model names masked for clinicians" in out
    flagged = ModelResponse.objects.get(names_own_model=True)
    assert flagged.text == TEXT
    review_data.assign(shown, clinician)
    factories.sign_in(client, clinician)
    html = client.get(reverse("clinician_review", args=[shown.pk])).content.decode()
    assert MASKED in html


def test_the_admin_lists_the_words_masked_for_clinicians(world, capsys):
    from django.contrib import admin

    dataset, _, _ = world
    call_command("mask_check", "--dataset", dataset.name)
    flagged = ModelResponse.objects.get(names_own_model=True)
    listed = admin.site._registry[ModelResponse].masked_words(flagged)
    assert listed == "Atlas-13B, SecretModel, Med42"
