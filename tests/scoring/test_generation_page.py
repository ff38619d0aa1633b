"""The generation runs page as a new user met it: no raw template comment, one true sentence
about where the responses go (candidates, until an admin adds them to a round), a finished run
linking to that step, a start that returns at once (the worker loads the tokenizer and hashes
the weights, and the run page says so while it does), and `generate --list-models` saying why
it lists nothing."""

import re
import shutil
from pathlib import Path

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.urls import reverse

from review.models import ModelResponse, Role
from scoring.generation import runs as generation
from scoring.llm import backends
from scoring.llm.backends import GenerationParams
from scoring.models import GenerationRun
from scoring.runs.selectors import run_progress
from tests import factories
from tests.scoring.generation_data import make_generation_dataset

pytestmark = pytest.mark.django_db
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


@pytest.fixture
def model_copy(tiny_lm, settings, tmp_path) -> Path:
    shutil.copytree(tiny_lm, tmp_path / "models" / "tiny-copy")
    settings.GENERATION_MODEL_DIR = tmp_path / "models"
    return tmp_path / "models" / "tiny-copy"


@pytest.fixture
def researcher(client):
    user = factories.make_user("gen-page@example.edu", roles=[Role.RESEARCHER])
    factories.sign_in(client, user)
    return user


def _main(response) -> str:
    return response.content.decode().split("<main", 1)[1].split("</main>", 1)[0]


def _run(dataset, **kwargs) -> GenerationRun:
    return generation.generation_run_create(
        dataset=dataset,
        model="local:tiny-copy",
        context_lengths=[128],
        params=GenerationParams(max_new_tokens=4),
        enqueue=False,
        **kwargs,
    )


def _nothing_heavy_in_the_request(monkeypatch) -> None:
    """Fail the test if the request loads the tokenizer (transformers) or hashes the weights."""

    def refuse(*args, **kwargs):
        raise AssertionError("the web request did the worker's work")

    monkeypatch.setattr(backends, "weights_sha256", refuse)
    monkeypatch.setattr(backends.ModelTokenizer, "_load", refuse)


# --- the page's text -----------------------------------------------------------------------------
def test_no_template_holds_a_comment_django_would_print():
    # {# … #} is one line only in Django: a comment spread over lines is printed as text.
    found = []
    for path in TEMPLATES.rglob("*.html"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "{#" in line and "#}" not in line[line.index("{#") :]:
                found.append(f"{path.relative_to(TEMPLATES)}:{number}")
    assert not found, found


def test_the_page_says_the_responses_are_candidates_and_prints_no_comment(
    client, researcher, model_copy
):
    page = _main(client.get(reverse("generation_runs")))
    assert "{#" not in page and "#}" not in page
    assert "ordinary responses" not in page
    assert "candidates" in page and "round" in page


def test_a_finished_run_links_to_adding_its_responses_to_a_round(client, model_copy):
    dataset = make_generation_dataset(n_instructions=1)
    run = _run(dataset)
    admin = factories.make_user("gen-admin@example.edu", roles=[Role.ADMIN])
    researcher = factories.make_user("gen-res@example.edu", roles=[Role.RESEARCHER])
    studies = reverse("admin_studies", args=[dataset.pk])
    factories.sign_in(client, admin)
    pending = _main(client.get(reverse("generation_run_detail", args=[run.pk])))
    assert studies not in pending  # nothing to add yet
    GenerationRun.objects.filter(pk=run.pk).update(status=GenerationRun.Status.DONE)
    done = _main(client.get(reverse("generation_run_detail", args=[run.pk])))
    link = re.search(rf'<a [^>]*href="{re.escape(studies)}#models-title"[^>]*>([^<]*)</a>', done)
    assert link and "round" in link.group(1)
    assert "tiny-copy@128" in done
    factories.sign_in(client, researcher)
    theirs = _main(client.get(reverse("generation_run_detail", args=[run.pk])))
    assert studies not in theirs  # not their page: they are told who does it
    assert "an admin adds them to a round" in theirs


# --- the start returns at once; the worker does the heavy part ----------------------------------
@pytest.mark.slow
def test_starting_a_run_neither_loads_the_tokenizer_nor_hashes_the_weights(model_copy, monkeypatch):
    dataset = make_generation_dataset(n_instructions=2)
    with monkeypatch.context() as patched:
        _nothing_heavy_in_the_request(patched)
        run = _run(dataset)
    assert "weights_sha256" not in run.model_identity
    # The tokenizer's hash is the same taken from its files as from the loaded tokenizer.
    assert run.model_identity["tokenizer_sha256"] == backends.ModelTokenizer(model_copy).sha256()
    generation.generation_batch_execute(batch_id=run.batches.get().pk)
    run.refresh_from_db()
    assert run.status == GenerationRun.Status.DONE
    assert ModelResponse.objects.filter(model_name="tiny-copy@128").count() == 2

    # The same folder again, once its label names responses: still nothing heavy in the request
    # (the folder's files are the ones those responses recorded).
    ModelResponse.objects.filter(model_name="tiny-copy@128").first().delete()
    with monkeypatch.context() as patched:
        _nothing_heavy_in_the_request(patched)
        again = _run(dataset)
    generation.generation_batch_execute(batch_id=again.batches.get().pk)
    again.refresh_from_db()
    assert again.status == GenerationRun.Status.DONE
    assert ModelResponse.objects.filter(model_name="tiny-copy@128").count() == 2


@pytest.mark.slow
def test_a_label_of_other_weights_is_refused_by_the_worker_before_any_response(
    model_copy, monkeypatch
):
    dataset = make_generation_dataset(n_instructions=2)
    first = _run(dataset)
    generation.generation_batch_execute(batch_id=first.batches.get().pk)
    ModelResponse.objects.filter(model_name="tiny-copy@128").first().delete()
    weights = model_copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\x01")  # other weights, same label
    with monkeypatch.context() as patched:
        _nothing_heavy_in_the_request(patched)
        run = _run(dataset)  # cannot tell without hashing: the worker will
    before = ModelResponse.objects.count()
    with pytest.raises(generation.GenerationRunError, match="already names other responses"):
        generation.generation_batch_execute(batch_id=run.batches.get().pk)
    run.refresh_from_db()
    assert run.status == GenerationRun.Status.FAILED
    assert "tiny-copy@128" in run.error and "another label" in run.error
    assert ModelResponse.objects.count() == before


def test_imported_responses_under_the_label_are_refused_at_once(model_copy, monkeypatch):
    dataset = make_generation_dataset(n_instructions=1)
    instruction = dataset.instructions.filter(patient__isnull=False).first()
    ModelResponse.objects.create(instruction=instruction, model_name="tiny-copy@128", text="x")
    with monkeypatch.context() as patched:
        _nothing_heavy_in_the_request(patched)
        with pytest.raises(generation.GenerationRunError, match="already names other responses"):
            _run(dataset)
    assert not GenerationRun.objects.exists()


def test_a_folder_without_a_tokenizer_is_refused_at_once(model_copy, monkeypatch):
    for name in backends.TOKENIZER_FILES:
        (model_copy / name).unlink(missing_ok=True)
    dataset = make_generation_dataset(n_instructions=1)
    with monkeypatch.context() as patched:
        _nothing_heavy_in_the_request(patched)
        with pytest.raises(generation.GenerationRunError, match="tokenizer.json"):
            _run(dataset)


# --- the run page while the worker checks the model ---------------------------------------------
@pytest.mark.slow
def test_the_run_page_says_the_worker_is_hashing_the_weights(client, researcher, model_copy):
    dataset = make_generation_dataset(n_instructions=1)
    run = _run(dataset)
    size = (model_copy / "model.safetensors").stat().st_size
    progress = run_progress(run)
    assert "hash" in progress.phase and "before the first response" in progress.phase
    cache.set(generation.hashing_key(run.pk), [size // 2, size], 60)
    progress = run_progress(run)
    assert "50%" in progress.phase
    detail = _main(client.get(reverse("generation_run_detail", args=[run.pk])))
    assert 'data-field="phase"' in detail and "50%" in detail
    assert "50%" in client.get(reverse("generation_run_progress", args=[run.pk])).json()["phase"]
    generation.generation_batch_execute(batch_id=run.batches.get().pk)
    assert run_progress(run).phase == ""
    assert cache.get(generation.hashing_key(run.pk)) is None


# --- the command ---------------------------------------------------------------------------------
def test_generate_list_models_with_none_says_why(settings, tmp_path, capsys):
    settings.GENERATION_MODEL_DIR = tmp_path / "models"
    call_command("generate", "--list-models")
    out, err = capsys.readouterr()
    assert out == ""
    assert "No model is available" in err
    assert str(tmp_path / "models") in err and "does not exist" in err
    assert "allowlist" in err
    (tmp_path / "models" / "half-copied").mkdir(parents=True)
    call_command("generate", "--list-models")
    err = capsys.readouterr().err
    assert "half-copied" in err and "config.json" in err


@pytest.mark.slow
def test_responses_imported_under_the_label_after_the_start_are_refused_by_the_worker(
    model_copy,
):
    dataset = make_generation_dataset(n_instructions=2)
    run = _run(dataset)
    instruction = dataset.instructions.filter(patient__isnull=False).first()
    ModelResponse.objects.create(instruction=instruction, model_name="tiny-copy@128", text="x")
    with pytest.raises(generation.GenerationRunError, match="already names other responses"):
        generation.generation_batch_execute(batch_id=run.batches.get().pk)
    assert ModelResponse.objects.filter(model_name="tiny-copy@128").count() == 1
