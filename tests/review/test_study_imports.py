"""Imports and studies: a release's responses form the latest study's set (an admin's audited
import), never a started instruction's; a re-import cannot rewrite text a clinician ranked."""

from pathlib import Path

import pytest

from review.importers import ImportFailed
from review.models import ModelResponse, Role, StudyResponse
from review.services.imports import dataset_import
from review.services.reviews import review_get_or_start
from tests import factories
from tests.review import test_importers as importer_tests
from tests.review.test_importers import RESPONSES_HEADER, response_row, write

pytestmark = pytest.mark.django_db
release = importer_tests.release  # the importer tests' release folder, as a fixture here


def test_an_import_fills_round_1_and_a_later_one_leaves_candidates_once_started(release: Path):
    summary = dataset_import(path=release, dataset_name="t")
    study = factories.study_for(ModelResponse.objects.first().instruction.dataset)
    assert summary.counts["responses added to Round 1"] == ModelResponse.objects.count()
    assert StudyResponse.objects.filter(study=study).count() == ModelResponse.objects.count()
    clinician = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    instruction = ModelResponse.objects.get(
        model_name="model-a", instruction__instruction_id="101"
    ).instruction
    review_get_or_start(assignment=factories.assign(instruction, clinician))
    # A new model arrives for an instruction under review: it stays a candidate.
    write(
        release,
        "clinician-reviewed-model-responses.tsv",
        RESPONSES_HEADER + response_row("model-new", "101", "A later answer."),
    )
    summary = dataset_import(path=release, dataset_name="t")
    assert summary.counts["responses kept as candidates"] == 1
    late = ModelResponse.objects.get(model_name="model-new")
    assert not StudyResponse.objects.filter(response=late).exists()


def test_a_reimport_cannot_change_the_text_of_a_ranked_response(release: Path):
    dataset_import(path=release, dataset_name="t")
    a101 = ModelResponse.objects.get(model_name="model-a", instruction__instruction_id="101")
    clinician = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    review_get_or_start(assignment=factories.assign(a101.instruction, clinician))
    write(
        release,
        "clinician-reviewed-model-responses.tsv",
        RESPONSES_HEADER + response_row("model-a", "101", "Heart rate was 110."),
    )
    with pytest.raises(ImportFailed) as failed:
        dataset_import(path=release, dataset_name="t", replace=True)
    assert "already shown to clinicians" in failed.value.render()
    a101.refresh_from_db()
    assert a101.text == "Heart rate was 104."


def test_candidates_only_import_leaves_every_response_out_of_studies(release: Path):
    summary = dataset_import(path=release, dataset_name="t", responses_as_candidates=True)
    assert summary.counts["responses kept as candidates"] == ModelResponse.objects.count() > 0
    assert not StudyResponse.objects.exists()
