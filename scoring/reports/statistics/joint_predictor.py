"""A joint predictor of clinicians' verdicts: every response's scores of an instruction at once.

A metric scores each response alone, yet an instruction's responses share its difficulty: when
every model's answer scores low, the instruction is probably hard and each answer is less likely
correct than its own score says. The joint predictor is a least-squares fit of the clinicians'
label (a response's mean verdict) on, per response::

    [model indicator (one per model), each score column, each score column's mean over the
     instruction's other responses]

(a score column: a metric, the jury where there is one). Tried on the bench's generator, the
logit scale and per-model slopes explained less after cross-fitting than the scores as they
are with one slope each.

Fitted on the reviewed instructions only, so it must be cross-fitted: reviewed instructions are
split into folds *by patient* (a patient's instructions never on both sides),
each reviewed instruction is predicted by the fold model that never saw its patient, every other
instruction by the mean of the fold models (cross-prediction, Zrnic & Candes 2024). Everything
is vectorised over leading axes (simulated replicates).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .table import Array

RIDGE = 1e-6  # keeps the normal equations solvable when a fold lacks a model or is constant


def joint_features(scores: Any) -> Array:
    """Features (…, N, K, F) from score columns (…, N, K, S): a model indicator per model, the
    ``S`` scores, and their means over the instruction's other ``K - 1`` responses."""
    s = np.asarray(scores, dtype=float)
    lead, k = s.shape[:-2], s.shape[-2]
    if k < 2:
        raise ValueError("a joint predictor needs at least two responses an instruction")
    one_hot = np.broadcast_to(np.eye(k), (*lead, k, k))
    shared = (s.sum(-2, keepdims=True) - s) / (k - 1)
    return np.asarray(np.concatenate([one_hot, s, shared], axis=-1), dtype=float)


def _solve(xtx: Array, xty: Array) -> Array:
    f = xtx.shape[-1]
    scale = np.trace(xtx, axis1=-2, axis2=-1)[..., None, None] / f
    ridge = RIDGE * (scale + 1.0) * np.eye(f)
    out: Array = np.linalg.solve(xtx + ridge, xty[..., None])[..., 0]
    return out


def cross_fitted(features: Any, label: Any, labelled: Any, fold: Any, folds: int) -> Array:
    """The joint predictor (…, N, K), cross-fitted.

    ``features`` (…, N, K, F), ``label`` (…, N, K) read only where ``labelled`` (…, N);
    ``fold`` (N,) or (…, N): each instruction's fold in ``0..folds-1`` (its patient's), used for
    labelled instructions. A labelled instruction gets the prediction of the model fitted
    without its fold; an unlabelled one the mean of the ``folds`` models' predictions."""
    x = np.asarray(features, dtype=float)
    lab = np.asarray(labelled, dtype=bool)
    y = np.where(lab[..., None], np.asarray(label, dtype=float), 0.0)
    fold_of = np.broadcast_to(np.asarray(fold), lab.shape)
    xx, xy = [], []
    for q in range(folds):
        # The fold's labelled responses: their sums of X'X and X'y.
        xq = x * (lab & (fold_of == q)).astype(float)[..., None, None]
        xx.append(np.einsum("...nkf,...nkg->...fg", xq, x))
        xy.append(np.einsum("...nkf,...nk->...f", xq, y))
    fold_xx, fold_xy = (
        np.stack(xx, axis=-3),
        np.stack(xy, axis=-2),
    )  # (…, folds, F, F), (…, folds, F)
    beta = _solve(
        fold_xx.sum(-3, keepdims=True) - fold_xx, fold_xy.sum(-2, keepdims=True) - fold_xy
    )
    # beta: (…, folds, F), each fitted without its fold.
    every = np.einsum("...nkf,...qf->...nkq", x, beta)  # (…, N, K, folds)
    own = np.take_along_axis(every, np.clip(fold_of, 0, folds - 1)[..., None, None], axis=-1)
    out: Array = np.where(lab[..., None], own[..., 0], every.mean(-1))
    return out
