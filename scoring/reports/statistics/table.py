"""The data every statistic reads: the judgement table, and the array helpers they share.

A :class:`JudgementTable` is a "long table": one row per (review, response) judgement, where a
*review* is one clinician ranking all responses to one instruction. Ranks follow the convention
``1 = best``; ties are equal ranks. Metric scores are arrays aligned with the table rows
(``higher = better``), with ``nan`` for missing values. A collection of metrics is a
``dict[str, Array]``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]
Scores = Array


Engine = Literal["numpy", "scipy"]


@dataclass(frozen=True, eq=False)
class JudgementTable:
    """One row per (review, response) judgement; all fields are 1-D arrays of equal length."""

    review: Array  # int ids of reviews (one clinician x one instruction)
    instruction: Array  # int ids (the bootstrap cluster)
    clinician: Array  # int ids
    model: Array  # str model names (object/unicode array)
    response: Array  # int response ids
    rank: Array  # float/int, 1 = best, ties allowed (equal ranks)
    correct: Array  # bool (or nan-able float) correct yes/no
    position: Array  # int, 0-based position the response was shown in
    category: Array  # str instruction category
    specialty: Array  # str author specialty
    # The unit every bootstrap and permutation resamples: a stable string key (the patient's
    # pseudonym when instructions share patients, else the instruction's release id), so that a
    # re-import with rows in another order draws the same resamples. Default: the instruction.
    cluster: Array | None = None

    def __post_init__(self) -> None:
        if self.cluster is None:
            object.__setattr__(self, "cluster", np.asarray(self.instruction).astype(str))
        lengths = set()
        for f in fields(self):
            arr = np.asarray(getattr(self, f.name))
            if arr.ndim != 1:
                raise ValueError(f"JudgementTable.{f.name} must be 1-D, got shape {arr.shape}")
            object.__setattr__(self, f.name, arr)
            lengths.add(arr.shape[0])
        if len(lengths) > 1:
            raise ValueError(f"JudgementTable fields have different lengths: {sorted(lengths)}")
        # The keys as integers numbered in the sorted order of the keys: every resampling draws
        # clusters in that order, so the draws are those of the string keys, and sorting and
        # grouping integers costs a fraction of doing it on strings, thousands of times a report.
        codes = np.unique(np.asarray(self.cluster), return_inverse=True)[1].reshape(-1)
        object.__setattr__(self, "_cluster_codes", codes.astype(np.int64))

    def __len__(self) -> int:
        return int(self.review.shape[0])

    @property
    def clusters(self) -> Array:
        """Each row's cluster as an integer code; codes follow the sorted order of the keys,
        so resampling by code is resampling by key."""
        codes: Array = getattr(self, "_cluster_codes")  # noqa: B009 - set in __post_init__
        return codes

    @property
    def cluster_keys(self) -> Array:
        """Each row's cluster key as given (a stable string: for exports)."""
        assert self.cluster is not None
        return self.cluster

    def with_clusters(self, cluster: Array) -> JudgementTable:
        """The same rows resampled by ``cluster`` (one key per row)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["cluster"] = np.asarray(cluster)
        return JudgementTable(**values)

    def subset(self, mask: Array) -> JudgementTable:
        """Rows where the boolean ``mask`` is true, as a new table."""
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != (len(self),):
            raise ValueError("subset() needs a boolean mask with one entry per row")
        return JudgementTable(**{f.name: getattr(self, f.name)[mask] for f in fields(self)})


@dataclass(frozen=True, eq=False)
class ReviewTaus:
    """Per-review Kendall tau-b; iterates as ``(review_ids, instruction_ids, taus)``.
    ``cluster`` is each kept review's resampling unit."""

    review: Array
    instruction: Array
    tau: Array
    skipped: int
    skipped_reviews: Array
    cluster: Array

    def __iter__(self) -> Iterator[Array]:
        return iter((self.review, self.instruction, self.tau))

    def __len__(self) -> int:
        return int(self.tau.shape[0])


def choose_clusters(
    instruction_code: Array, patient: Array | None, mode: str = "auto"
) -> tuple[Array, str]:
    """The resampling unit of every row, as stable string keys, and its name.

    ``mode``: "patient", "instruction", or "auto" (the patient when any patient has two or more
    instructions among the rows: instructions grounded in one record are not independent,
    MedAlign grounds 303 instructions in 276 records). Keys are the release's own ids (the
    instruction's id, the patient's pseudonymous person id), never database keys, so a
    re-import in another order resamples the same clusters."""
    codes = np.asarray(instruction_code).astype(str)
    if mode not in ("auto", "patient", "instruction"):
        raise ValueError("cluster by 'auto', 'patient' or 'instruction'")
    if patient is not None and mode in ("auto", "patient"):
        patients = np.asarray(patient).astype(str)
        if mode == "patient" or _shares(codes, patients):
            return np.char.add("patient:", patients), "patient"
    return np.char.add("instruction:", codes), "instruction"


def _shares(codes: Array, patients: Array) -> bool:
    """Whether any patient has two or more distinct instructions."""
    pairs = np.unique(np.stack([patients, codes], axis=1), axis=0)
    _, counts = np.unique(pairs[:, 0], return_counts=True)
    return bool((counts > 1).any())


def _as_float(values: Any) -> Array:
    """Float copy of ``values``; ``None`` entries of object arrays become nan."""
    arr = np.asarray(values)
    if arr.dtype == object:
        arr = np.array([np.nan if v is None else v for v in arr], dtype=float)
    return arr.astype(float, copy=True)


def _check_scores(table: JudgementTable, scores: Any) -> Array:
    arr = _as_float(scores)
    if arr.shape != (len(table),):
        raise ValueError(
            f"scores must have one value per table row ({len(table)}), got {arr.shape}"
        )
    return arr


def _check_bootstrap_args(n_resamples: int, confidence: float) -> None:
    if int(n_resamples) < 1:
        raise ValueError("n_resamples must be >= 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be strictly between 0 and 1")


def _group_rows(keys: Array) -> tuple[Array, Array]:
    """Group row indices by key.

    Returns ``(ids, rows)`` where ``ids`` are the sorted unique keys and ``rows`` is a
    ``(n_groups, max_group_size)`` matrix of row indices, padded with ``-1``.
    """
    keys = np.asarray(keys)
    if keys.shape[0] == 0:
        return keys[:0], np.zeros((0, 0), dtype=np.intp)
    ids, inverse = np.unique(keys, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse, minlength=ids.shape[0])
    starts = np.cumsum(counts) - counts
    grouped = inverse[order]
    within = np.arange(order.shape[0]) - starts[grouped]
    rows = np.full((ids.shape[0], int(counts.max())), -1, dtype=np.intp)
    rows[grouped, within] = order
    return ids, rows


def _take(values: Array, rows: Array) -> Array:
    """``values[rows]`` as float with nan where ``rows`` is the ``-1`` padding."""
    values = np.asarray(values, dtype=float)
    if values.shape[0] == 0:
        return np.full(rows.shape, np.nan)
    return np.where(rows >= 0, values[rows], np.nan)


_CHUNK_ELEMENTS = 4_000_000


def _tau_b_padded(x: Array, y: Array) -> tuple[Array, Array, Array]:
    """Kendall tau-b for every row of two ``(G, n)`` matrices; nan entries are missing.

    Only positions where both ``x`` and ``y`` are present count. Returns ``(tau, untied_x,
    untied_y)``: ``tau`` is nan where either count of untied pairs is zero (fewer than two
    distinct values on one side), i.e. where tau-b is undefined.
    """
    g, n = x.shape
    tau = np.full(g, np.nan)
    untied_x = np.zeros(g, dtype=np.int64)
    untied_y = np.zeros(g, dtype=np.int64)
    if g == 0 or n < 2:
        return tau, untied_x, untied_y
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    step = max(1, _CHUNK_ELEMENTS // (n * n))
    for start in range(0, g, step):
        xs, ys = x[start : start + step], y[start : start + step]
        present = ~np.isnan(xs) & ~np.isnan(ys)
        pair = present[:, :, None] & present[:, None, :] & upper
        with np.errstate(invalid="ignore"):
            sx = np.where(pair, np.sign(xs[:, :, None] - xs[:, None, :]), 0.0)
            sy = np.where(pair, np.sign(ys[:, :, None] - ys[:, None, :]), 0.0)
        s = (sx * sy).sum(axis=(1, 2))
        ux = np.count_nonzero(sx, axis=(1, 2))
        uy = np.count_nonzero(sy, axis=(1, 2))
        defined = (ux > 0) & (uy > 0)
        denom = np.sqrt(ux.astype(float) * uy.astype(float))
        tau[start : start + step] = np.where(defined, s / np.where(defined, denom, 1.0), np.nan)
        untied_x[start : start + step] = ux
        untied_y[start : start + step] = uy
    return tau, untied_x, untied_y


def _group_nanmean(keys: Array, values: Array) -> tuple[Array, Array]:
    ids, inverse = np.unique(np.asarray(keys), return_inverse=True)
    inverse = inverse.reshape(-1)
    ok = ~np.isnan(values)
    sums = np.bincount(inverse[ok], weights=values[ok], minlength=ids.shape[0])
    counts = np.bincount(inverse[ok], minlength=ids.shape[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        return ids, np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _subset_scores(scores: Any, mask: Array) -> Any:
    if scores is None:
        return None
    if isinstance(scores, Mapping):
        return {k: np.asarray(v)[mask] for k, v in scores.items()}
    return np.asarray(scores)[mask]
