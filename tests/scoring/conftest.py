"""Fixtures of the scoring tests."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory) -> Path:
    """A tiny random causal LM (LlamaConfig, MiniLM's tokenizer), built offline once per session.

    Plumbing only: its text is random word pieces and never an evaluation."""
    from tests.scoring.tiny_lm import build_tiny_lm

    return build_tiny_lm(tmp_path_factory.mktemp("tiny-lm") / "tiny-lm")
