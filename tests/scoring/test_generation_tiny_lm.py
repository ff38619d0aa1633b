"""The local causal-LM backend on a tiny random model built offline (plumbing, not evaluation)."""

import shutil

import pytest

from scoring.llm.backends import GenerationError, GenerationParams, TransformersBackend
from scoring.metrics import Pair, get_backend
from scoring.weights import model_cache_info

pytestmark = pytest.mark.slow


def test_the_tiny_model_generates_deterministically_per_seed_and_loads_once(tiny_lm) -> None:
    backend = TransformersBackend(tiny_lm)
    params = GenerationParams(max_new_tokens=12, temperature=0.9, seed=7)
    loads = model_cache_info()["loads"]
    first = backend.generate("Question: is the record long?\n\nAnswer:", params)
    again = TransformersBackend(tiny_lm).generate(
        "Question: is the record long?\n\nAnswer:", params
    )
    other = backend.generate(
        "Question: is the record long?\n\nAnswer:",
        GenerationParams(max_new_tokens=12, temperature=0.9, seed=8),
    )
    assert first.text == again.text and first.text.strip()
    assert other.text != first.text  # sampling follows the seed
    assert 1 <= first.completion_tokens <= 12 and first.prompt_tokens > 5
    # The model and tokenizer load once for this process, whatever the number of backends.
    assert model_cache_info()["loads"] - loads <= 2


def test_the_identity_is_the_weights_hash(tiny_lm, tmp_path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tiny_lm, copy)
    a, b = TransformersBackend(tiny_lm).identity(), TransformersBackend(copy).identity()
    assert a["weights_sha256"] == b["weights_sha256"] and len(a["weights_sha256"]) == 64
    (copy / "model.safetensors").write_bytes(b"changed")
    assert TransformersBackend(copy).identity()["weights_sha256"] != a["weights_sha256"]


def test_a_prompt_longer_than_the_models_positions_is_refused(tiny_lm) -> None:
    backend = TransformersBackend(tiny_lm)
    with pytest.raises(GenerationError, match="exceed the model's 4096 positions"):
        backend.generate("word " * 4100, GenerationParams(max_new_tokens=4))


def test_a_folder_without_a_model_is_refused(tmp_path) -> None:
    with pytest.raises(GenerationError, match="no config.json"):
        TransformersBackend(tmp_path)


def test_the_tiny_model_as_a_judge_is_plumbing_its_verdicts_never_parse(tiny_lm) -> None:
    jury = get_backend(
        "jury", judges=[{"kind": "transformers", "path": str(tiny_lm)}], max_new_tokens=8
    )
    values = jury.score([Pair("q?", "an answer", "the reference")])[0]
    assert values["judges_parsed"] == 0 and values["jury"] == 0.0
