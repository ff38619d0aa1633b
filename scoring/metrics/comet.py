"""COMET via unbabel-comet 2.2.x, fully offline.

``checkpoint`` option (default: the ``COMET_MODEL`` environment variable, read when the backend is
created):
    * a path to a ``.ckpt`` file (COMET layout: ``<root>/checkpoints/model.ckpt`` with
      ``<root>/hparams.yaml``), or to the ``<root>`` folder itself;
    * a model id such as ``"Unbabel/wmt22-comet-da"``: resolved in the local Hugging Face cache only
      (``huggingface_hub.snapshot_download(..., local_files_only=True)``).  ``comet.download_model``
      is NOT used: when the cache lookup fails it falls back to a legacy download over the network.
The encoder named in the checkpoint's hparams (e.g. ``xlm-roberta-large``) must be loadable offline
too (``local_files_only=True``); otherwise loading raises ``MetricUnavailable``.

``gpus`` is 0 or 1 (default: 1 if CUDA is available, resolved lazily); more than one GPU would make
COMET use DDP, which exits non-zero ranks, so it is refused.  ``predict`` always runs with
``num_workers=0`` (DataLoader workers fail in daemonic Celery workers) and no progress bar.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scoring.weights import cached_model, file_sha256, library_versions, set_offline_env

from .base import LOCATION_KEY, MetricBackend, MetricUnavailable, Pair, Scored
from .embedding_cache import (
    CacheEntry,
    get_many,
    namespace_for,
    put_many,
    record_encoded,
    text_key,
)

set_offline_env()

__all__ = ["CometBackend", "NO_CHECKPOINT_REASON", "import_comet"]

NO_CHECKPOINT_REASON = (
    "no COMET checkpoint configured: set COMET_MODEL to a checkpoint path or a model id "
    "available offline"
)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_QUIET_LOGGERS = (
    "pytorch_lightning",
    "lightning",
    "lightning.pytorch",
    "lightning_fabric",
    "lightning.fabric",
    "comet",
)


def import_comet():
    """Import ``comet`` offline, hide its import-time deprecation noise, quieten Lightning."""
    set_offline_env()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pkg_resources.*")
        import comet
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    # emitted by pytorch_lightning 2.6 on every predict() (its own deprecation, not ours)
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
    return comet


@dataclass(frozen=True)
class _Resolved:
    ckpt: Path
    source: str  # "local" or "hub"
    model_id: str | None
    revision: str | None


def _is_path(value: str) -> bool:
    expanded = os.path.expanduser(value)
    return (
        os.path.isabs(expanded)
        or value.startswith((".", "~"))
        or value.endswith(".ckpt")
        or os.path.exists(expanded)
        or not _HUB_ID.match(value)
    )


class CometBackend(MetricBackend):
    name = "comet"
    primary = "score"
    kind = "model"
    option_defaults = {"checkpoint": None, "batch_size": 8, "gpus": None}

    def _validate(self, o: dict[str, Any]) -> dict[str, Any]:
        ckpt = o["checkpoint"]
        if ckpt is None:
            ckpt = os.environ.get("COMET_MODEL") or None
        if ckpt is not None:
            if not isinstance(ckpt, (str, os.PathLike)):
                raise ValueError("comet option checkpoint must be a path or a model id string")
            ckpt = os.fspath(ckpt).strip() or None
        if ckpt is not None and _is_path(ckpt):
            ckpt = str(Path(ckpt).expanduser().resolve())
        o["checkpoint"] = ckpt
        bs = o["batch_size"]
        if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1:
            raise ValueError("comet option batch_size must be a positive int")
        if o["gpus"] not in (None, 0, 1) or isinstance(o["gpus"], bool):
            raise ValueError("comet option gpus must be None (auto), 0 or 1")
        self._resolved: _Resolved | None = None
        self._namespace: str | None = None
        return o

    @property
    def gpus(self) -> int:
        if self.options["gpus"] is None:
            import torch

            self.options["gpus"] = 1 if torch.cuda.is_available() else 0
        return self.options["gpus"]

    def _resolve(self) -> _Resolved:
        if self._resolved is not None:
            return self._resolved
        ckpt = self.options["checkpoint"]
        if ckpt is None:
            raise MetricUnavailable(NO_CHECKPOINT_REASON)
        if _is_path(ckpt):
            path = Path(ckpt)
            if path.is_dir():
                path = path / "checkpoints" / "model.ckpt"
            if not path.is_file():
                raise MetricUnavailable(f"COMET checkpoint not found: {path}")
            resolved = _Resolved(path, "local", None, None)
        else:
            try:
                from huggingface_hub import snapshot_download

                root = Path(snapshot_download(repo_id=ckpt, local_files_only=True))
            except Exception as exc:  # LocalEntryNotFoundError (an OSError), bad id, ...
                raise MetricUnavailable(
                    f"COMET model {ckpt!r} is not available offline: it is not in the local "
                    f"Hugging Face cache and downloads are disabled ({type(exc).__name__}: {exc}). "
                    "Set COMET_MODEL to a checkpoint path or pre-populate the cache."
                ) from exc
            path = root / "checkpoints" / "model.ckpt"
            if not path.is_file():
                raise MetricUnavailable(
                    f"COMET model {ckpt!r}: no checkpoints/model.ckpt in {root}"
                )
            resolved = _Resolved(path, "hub", ckpt, root.name)
        if not (path.parents[1] / "hparams.yaml").is_file():
            raise MetricUnavailable(
                f"COMET checkpoint {path} has no hparams.yaml in {path.parents[1]} "
                "(expected <root>/hparams.yaml beside <root>/checkpoints/)"
            )
        self._resolved = resolved
        return resolved

    def check_available(self) -> None:
        import importlib.util

        if importlib.util.find_spec("comet") is None:
            raise MetricUnavailable("the unbabel-comet package is not installed")
        self._resolve()

    def identity(self) -> dict[str, Any]:
        """Checkpoint identity = sha256 of the .ckpt file (1 MiB chunks, cached per path + size +
        mtime) and of hparams.yaml; ``location`` (not hashed) holds the absolute checkpoint path.
        Raises ``MetricUnavailable`` when no checkpoint can be found."""
        r = self._resolve()
        hparams = r.ckpt.parents[1] / "hparams.yaml"
        return {
            "backend": self.name,
            "checkpoint": {
                "source": r.source,
                "id": r.model_id,
                "revision": r.revision,
                "sha256": file_sha256(r.ckpt),
                "hparams_sha256": file_sha256(hparams),
            },
            "options": {"batch_size": self.options["batch_size"], "gpus": self.gpus},
            "versions": library_versions(
                "unbabel-comet", "torch", "transformers", "pytorch-lightning"
            ),
            LOCATION_KEY: {"checkpoint_path": str(r.ckpt)},
        }

    def _cache_key(self) -> tuple:
        r = self._resolve()
        st = r.ckpt.stat()
        return (self.name, str(r.ckpt), st.st_size, st.st_mtime_ns)

    def _load(self):
        r = self._resolve()
        comet = import_comet()
        try:
            model = comet.load_from_checkpoint(str(r.ckpt), local_files_only=True)
        except Exception as exc:  # bad file, encoder/tokenizer not cached (OSError), ...
            raise MetricUnavailable(
                f"could not load COMET checkpoint {r.ckpt}: {type(exc).__name__}: {exc}"
            ) from exc
        model.eval()
        if self.gpus:  # the fast path runs the encoder itself (predict would move it anyway)
            model.to("cuda")
        return model

    def model(self):
        """The per-process cached COMET model (loaded on first use)."""
        return cached_model(self._cache_key(), self._load)

    def embedding_namespace(self) -> str:
        """COMET sentence vectors depend on the checkpoint only (encoder + layer mix)."""
        if self._namespace is None:
            ident = self.identity()["checkpoint"]
            self._namespace = namespace_for(
                {
                    "kind": "comet-sentence-vectors",
                    "sha256": ident["sha256"],
                    "hparams_sha256": ident["hparams_sha256"],
                }
            )
        return self._namespace

    def _fast_path(self, model: Any) -> bool:
        # The sentence-embedding shortcut is exact for COMET's RegressionMetric (wmt20/22-comet-da
        # and the like: the estimator sees three independent sentence vectors). Other model
        # classes (ranking, unified/xCOMET, QE) go through COMET's own predict.
        return type(model).__name__ == "RegressionMetric" and not getattr(
            model, "use_context", False
        )

    def sentence_vectors(self, model: Any, texts: Sequence[str]) -> dict[str, CacheEntry]:
        """One vector per distinct text (a source or reference shared by an instruction's
        responses is encoded once), from the cache or one length-sorted forward pass."""
        import torch

        wanted = list(dict.fromkeys(texts))
        namespace = self.embedding_namespace()
        keys = {t: text_key(t) for t in wanted}
        found = get_many(namespace, keys.values())
        missing = [t for t in wanted if keys[t] not in found]
        if missing:
            encoder = model.encoder
            limit = encoder.max_positions - 2  # COMET's own max_length for the tokenizer
            lengths = [
                len(ids) for ids in encoder.tokenizer(missing, truncation=False)["input_ids"]
            ]
            too_long = {t: n > limit for t, n in zip(missing, lengths, strict=True)}
            order = sorted(range(len(missing)), key=lambda i: lengths[i])
            device = next(model.parameters()).device
            bs = self.options["batch_size"]
            new: dict[str, CacheEntry] = {}
            with torch.inference_mode():
                for start in range(0, len(order), bs):
                    chunk = [missing[i] for i in order[start : start + bs]]
                    inputs = encoder.prepare_sample(chunk)
                    vectors = model.compute_sentence_embedding(
                        inputs["input_ids"].to(device), inputs["attention_mask"].to(device)
                    )
                    vectors = vectors.float().cpu().numpy()
                    for row, text in enumerate(chunk):
                        new[keys[text]] = CacheEntry(
                            ids=np.zeros(0, dtype=np.int32),
                            vectors=np.ascontiguousarray(vectors[row]),
                            truncated=too_long[text],
                        )
            record_encoded(len(missing))
            put_many(namespace, new)
            found.update(new)
        return {t: found[keys[t]] for t in wanted}

    def score_detailed(self, pairs: Sequence[Pair]) -> list[Scored]:
        import torch

        pairs = self._check_pairs(pairs)
        if not pairs:
            return []
        model = self.model()
        if not self._fast_path(model):
            return [Scored(v) for v in self._predict(model, pairs)]
        texts = [p.source for p in pairs] + [p.reference for p in pairs]
        vectors = self.sentence_vectors(model, texts + [p.hypothesis for p in pairs])
        device = next(model.parameters()).device
        out: list[Scored] = []
        bs = max(self.options["batch_size"], 256)  # the estimator is a small MLP: wide batches
        with torch.inference_mode():
            for start in range(0, len(pairs), bs):
                chunk = pairs[start : start + bs]

                def stack(field: str, chunk: list[Pair] = chunk) -> torch.Tensor:
                    rows = [vectors[getattr(p, field)].vectors for p in chunk]
                    return torch.from_numpy(np.stack(rows)).to(device)

                scores = model.estimate(stack("source"), stack("hypothesis"), stack("reference"))
                for pair, value in zip(chunk, scores.score.float().cpu().tolist(), strict=True):
                    truncated = any(
                        vectors[getattr(pair, f)].truncated
                        for f in ("source", "hypothesis", "reference")
                    )
                    out.append(Scored({"score": float(value)}, truncated=truncated))
        return out

    def _predict(self, model: Any, pairs: list[Pair]) -> list[dict[str, float]]:
        samples = [{"src": p.source, "mt": p.hypothesis, "ref": p.reference} for p in pairs]
        out = model.predict(
            samples,
            batch_size=self.options["batch_size"],
            gpus=self.gpus,
            progress_bar=False,
            num_workers=0,
        )
        return [{"score": float(s)} for s in out.scores]

    def score(self, pairs: Sequence[Pair]) -> list[dict[str, float]]:
        return [s.values for s in self.score_detailed(pairs)]

    def provenance(self) -> dict[str, Any]:
        import yaml

        ident = self.identity()
        ckpt = ident["checkpoint"]
        r = self._resolve()
        try:
            hparams = yaml.safe_load((r.ckpt.parents[1] / "hparams.yaml").read_text()) or {}
        except (OSError, yaml.YAMLError):
            hparams = {}
        return {
            "metric": self.name,
            "model": ckpt["id"] or f"local checkpoint {r.ckpt.parents[1].name}",
            "model_source": ckpt["source"],
            "model_revision": ckpt["revision"],
            "weights_sha256": ckpt["sha256"],
            "hparams_sha256": ckpt["hparams_sha256"],
            "model_class": hparams.get("class_identifier"),
            "encoder": hparams.get("pretrained_model"),
            "encoder_type": hparams.get("encoder_model"),
            "layer": hparams.get("layer"),
            "pool": hparams.get("pool"),
            "tokenizer": hparams.get("pretrained_model"),
            "library_versions": ident["versions"],
        }
