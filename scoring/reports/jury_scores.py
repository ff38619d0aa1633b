"""Reports of the LLM jury: each judge as a metric of its own next to the jury.

A jury score (``MetricScore`` under a ``jury`` configuration) keeps every judge's score in its
``values`` (``scoring.metrics.jury``). Reports read them as extra metric columns,
``<jury key>:judge<i>`` ("LLM jury — judge i (model)"), correlated with the clinicians like any
metric, each with the judge's identity and the rubric version as provenance. A jury score with
no parsed verdict (``judges_parsed == 0``, stored as HELM's default 0.0) is missing, not 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from scoring.metrics.jury import judge_keys
from scoring.models import MetricConfig, MetricScore


def jury_expand(
    *,
    configs: list[MetricConfig],
    keys: dict[int, str],
    scores: dict[str, NDArray[Any]],
    truncated: dict[str, NDArray[Any]],
    row_of_response: dict[int, list[int]],
    n_rows: int,
) -> list[dict[str, Any]]:
    """Add the judges' columns to ``scores``/``truncated`` (in place); returns their metric rows.

    One query, only when a jury configuration is in the report."""
    juries = {c.pk: c for c in configs if c.backend == "jury"}
    if not juries or not n_rows:
        return []
    extra: dict[str, dict[str, Any]] = {}
    for config_id, response_id, values in MetricScore.objects.filter(
        config_id__in=juries, response_id__in=row_of_response
    ).values_list("config_id", "response_id", "values"):
        rows = row_of_response[response_id]
        jury_key = keys[config_id]
        if not values.get("judges_parsed", 1):
            scores[jury_key][rows] = np.nan  # no verdict parsed: missing, not HELM's 0.0
        for judge in judge_keys(values):
            key = f"{jury_key}:{judge}"
            if key not in scores:
                scores[key] = np.full(n_rows, np.nan)
                truncated[key] = np.zeros(n_rows, dtype=bool)
                extra[key] = _metric_row(juries[config_id], key, int(judge[len("judge") :]))
            scores[key][rows] = float(values[judge])
    return [extra[k] for k in sorted(extra)]


def _metric_row(config: MetricConfig, key: str, index: int) -> dict[str, Any]:
    judges = config.identity.get("judges") or []
    judge = judges[index - 1] if 0 < index <= len(judges) else {}
    model = judge.get("model") or f"judge {index}"
    provenance = {
        "metric": "jury-judge",
        "model": model,
        "weights_sha256": judge.get("weights_sha256"),
        "rubric": config.identity.get("rubric"),
        "endpoint": judge.get("endpoint"),
        "library_versions": config.identity.get("versions", {}),
    }
    return {
        "key": key,
        "config_id": config.pk,
        "backend": "jury-judge",
        "label": f"LLM jury — judge {index} ({model})",
        "identity": {"jury_identity_hash": config.identity_hash, "judge": judge},
        "provenance": {k: v for k, v in provenance.items() if v is not None},
        "identity_hash": config.identity_hash,
    }
