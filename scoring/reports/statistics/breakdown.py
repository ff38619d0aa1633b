"""A statistic computed separately for every category or specialty."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

import numpy as np

from .table import JudgementTable, Scores, _check_scores, _subset_scores


def breakdown(
    table: JudgementTable,
    scores: Scores | Mapping[str, Scores] | None,
    by: str,
    fn: Callable[..., Any],
    **kw: Any,
) -> dict[str, Any]:
    """Apply a statistic separately to every value of ``table.<by>`` (e.g. category).

    ``result[v] = fn(table.subset(table.<by> == v), scores[mask], **kw)``; when ``scores`` is
    None the statistic is called without scores (``fn(subset, **kw)``), which suits
    :func:`human_ceiling`, :func:`leaderboard` and :func:`position_bias`. Keys are sorted.
    """
    if by not in {f.name for f in fields(JudgementTable)}:
        raise ValueError(f"unknown field {by!r}; use e.g. 'category' or 'specialty'")
    column = np.asarray(getattr(table, by))
    if scores is not None:
        if isinstance(scores, Mapping):
            for v in scores.values():
                _check_scores(table, v)
        else:
            _check_scores(table, scores)
    result: dict[str, Any] = {}
    for value in np.unique(column.astype(str)):
        mask = column.astype(str) == value
        sub = table.subset(mask)
        sub_scores = _subset_scores(scores, mask)
        result[str(value)] = fn(sub, **kw) if scores is None else fn(sub, sub_scores, **kw)
    return result
