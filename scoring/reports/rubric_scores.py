"""Rubric scores in reports: clinicians' and graders' verdicts read once, scored, compared.

Reads the clinicians' submitted criterion grades (``review.models.CriterionGrade``) and the model
graders' verdicts (``scoring.models.GraderVerdict``) of a set of responses into the pure
statistics' ``Verdicts`` (``scoring.reports.statistics.rubrics``), raters named by pseudonym
(clinicians) or ``grader:<config id>``, each response's cluster its patient. Then:

- ``rubric_expand``: rubric scores as metric columns of the correlation report, beside every
  metric ("Rubric score — clinicians", "Rubric score — grader (<model>)"), correlated with the
  clinicians' rankings like any metric;
- ``rubric_section``: the report's rubric section: per model, clinicians' and each grader's
  scores side by side (overall and per tag), and each grader's agreement with the clinicians
  (macro-F1 and kappa, beside the clinicians against each other; overall, per tag, per version).

A response's score uses, for each rater, the latest rubric version that rater graded it on (a
response graded on two versions is not scored on both at once); agreement is computed per
version as well. A clinician who graded the same response on the same criterion more than once
(the response was in two studies) has one verdict counted: the one of the grading submitted
last; gradings submitted at the same moment, the later study's (its round), then the later
grading's. Numbers and pseudonyms only: no criterion or response text leaves here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import numpy as np
from django.db.models import CharField, DateTimeField, F, IntegerField, Value
from django.db.models.functions import Cast, Concat
from numpy.typing import NDArray

from review.models import Criterion, CriterionGrade, ModelResponse
from scoring.models import GraderVerdict, MetricConfig
from scoring.reports.statistics.intervals import INTERVAL_METHOD
from scoring.reports.statistics.rubrics import (
    GRADER,
    Verdicts,
    agreement_report,
    clinician_mean_scores,
    response_scores,
    score_table,
)

CLINICIANS_KEY = "rubric-clinicians"


def grader_key(config_id: int) -> str:
    return f"{GRADER}:{config_id}"


def rubric_verdicts(*, response_ids: Iterable[int]) -> tuple[Verdicts, dict[int, int], int]:
    """Every clinician's and grader's verdict on ``response_ids`` (four queries), one per
    (rater, response, criterion); each criterion's rubric version number; and how many
    clinicians' verdicts a later grading of theirs superseded (see the module)."""
    ids = list(response_ids)

    def met_value(met: bool | None) -> float:
        return math.nan if met is None else float(met)

    # One query for both (a UNION): a report without rubric grades pays one round trip.
    clinicians = (
        CriterionGrade.objects.filter(response_id__in=ids, grading__status="submitted")
        .annotate(
            rater=F("clinician__pseudonym"),
            verdict=F("met"),
            submitted=F("grading__submitted_at"),
            round=F("grading__study__round"),
            order=F("grading_id"),
        )
        .values_list(
            "rater", "response_id", "criterion_id", "verdict", "submitted", "round", "order"
        )
        .order_by()
    )
    graders = (
        GraderVerdict.objects.filter(response_id__in=ids)
        .annotate(
            rater=Concat(Value(GRADER + ":"), Cast("config_id", output_field=CharField())),
            verdict=F("criteria_met"),
            submitted=Value(None, output_field=DateTimeField()),
            round=Value(0, output_field=IntegerField()),
            order=Value(0, output_field=IntegerField()),
        )
        .values_list(
            "rater", "response_id", "criterion_id", "verdict", "submitted", "round", "order"
        )
        .order_by()
    )
    # The latest submitted counts, whatever order the rows come in (a UNION has none).
    latest: dict[tuple[str, int, int], tuple[tuple[float, int, int], float]] = {}
    n_rows = 0
    for rater, response_id, criterion_id, met, submitted, round_, order in clinicians.union(
        graders, all=True
    ):
        n_rows += 1
        key = (str(rater), int(response_id), int(criterion_id))
        when = submitted.timestamp() if isinstance(submitted, datetime) else -math.inf
        rank = (when, int(round_ or 0), int(order or 0))
        if key not in latest or rank > latest[key][0]:
            latest[key] = (rank, met_value(met))
    rows = [(*key, met) for key, (_, met) in sorted(latest.items())]
    criteria = {
        pk: (float(points), list(tags or []), int(version))
        for pk, points, tags, version in Criterion.objects.filter(
            pk__in={r[2] for r in rows}
        ).values_list("pk", "points", "tags", "rubric__version")
    }
    cluster = dict(
        ModelResponse.objects.filter(pk__in={r[1] for r in rows}).values_list(
            "pk", "instruction__person_id"
        )
    )
    verdicts = Verdicts(
        np.array([r[0] for r in rows], dtype=object),
        np.array([r[1] for r in rows], dtype=np.int64),
        np.array([r[2] for r in rows], dtype=np.int64),
        np.array([r[3] for r in rows], dtype=float),
        points={pk: c[0] for pk, c in criteria.items()},
        tags={pk: c[1] for pk, c in criteria.items()},
        version={pk: f"v{c[2]}" for pk, c in criteria.items()},
        cluster={pk: str(person or pk) for pk, person in cluster.items()},
    )
    return verdicts, {pk: c[2] for pk, c in criteria.items()}, n_rows - len(rows)


def latest_versions(verdicts: Verdicts, version_of: dict[int, int]) -> Verdicts:
    """Each rater's verdicts on each response on the latest version they graded it on."""
    if not len(verdicts):
        return verdicts
    versions = np.array([version_of.get(int(c), 0) for c in verdicts.criterion])
    latest: dict[tuple[str, int], int] = {}
    for rater, response, version in zip(verdicts.rater, verdicts.response, versions, strict=True):
        key = (str(rater), int(response))
        latest[key] = max(latest.get(key, 0), int(version))
    keep = np.array(
        [
            latest[(str(r), int(p))] == int(v)
            for r, p, v in zip(verdicts.rater, verdicts.response, versions, strict=True)
        ],
        dtype=bool,
    )
    return verdicts.subset(keep)


def _graders(verdicts: Verdicts) -> list[int]:
    return sorted(
        {int(str(r).split(":", 1)[1]) for r in verdicts.rater if str(r).startswith(GRADER + ":")}
    )


def _grader_labels(config_ids: list[int]) -> dict[int, MetricConfig]:
    return {c.pk: c for c in MetricConfig.objects.filter(pk__in=config_ids)}


def rubric_expand(
    *,
    scores: dict[str, NDArray[Any]],
    truncated: dict[str, NDArray[Any]],
    row_of_response: dict[int, list[int]],
    n_rows: int,
) -> list[dict[str, Any]]:
    """Add the rubric-score columns to ``scores``/``truncated`` (in place); returns their
    metric rows. Nothing when no response of the report has a rubric verdict."""
    if not n_rows:
        return []
    verdicts, version_of, _ = rubric_verdicts(response_ids=row_of_response)
    if not len(verdicts):
        return []
    per_rater = response_scores(latest_versions(verdicts, version_of))
    columns: list[tuple[str, dict[int, float], dict[str, Any]]] = []
    clinicians = clinician_mean_scores(per_rater)
    if clinicians:
        columns.append(
            (
                CLINICIANS_KEY,
                clinicians,
                {
                    "key": CLINICIANS_KEY,
                    "config_id": None,
                    "backend": "rubric",
                    "label": "Rubric score — clinicians",
                    "identity": {"backend": "rubric", "rater": "clinicians"},
                    "provenance": {
                        "metric": "rubric",
                        "model": "clinicians' criterion grades",
                        "aggregation": "points met / positive points, clipped to [0, 1]; "
                        "mean over clinicians",
                    },
                    "identity_hash": "rubric-clinicians",
                },
            )
        )
    configs = _grader_labels(_graders(verdicts))
    for config_id, config in sorted(configs.items()):
        key = f"rubric-{grader_key(config_id).replace(':', '-')}"
        model = config.provenance.get("model") or "model"
        columns.append(
            (
                key,
                per_rater.get(grader_key(config_id), {}),
                {
                    "key": key,
                    "config_id": config_id,
                    "backend": "rubric-grader",
                    "label": f"Rubric score — grader ({model})",
                    "identity": config.identity,
                    "provenance": {
                        **config.provenance,
                        "aggregation": "points met / positive points, clipped to [0, 1]; "
                        "none where a verdict is missing",
                    },
                    "identity_hash": config.identity_hash,
                },
            )
        )
    rows = []
    for key, values, row in columns:
        column = np.full(n_rows, np.nan)
        for response, value in values.items():
            column[row_of_response[response]] = value
        scores[key] = column
        truncated[key] = np.zeros(n_rows, dtype=bool)
        rows.append(row)
    return rows


def _clean(value: Any) -> Any:
    """nan -> None, numpy scalars -> Python: the stored results are JSON."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def rubric_section(
    *,
    response_ids: Iterable[int],
    n_resamples: int,
    seed: int,
    confidence: float,
    min_clusters: int,
) -> dict[str, Any] | None:
    """The report's rubric section (None when no response has a rubric verdict)."""
    ids = list(response_ids)
    verdicts, version_of, n_superseded = rubric_verdicts(response_ids=ids)
    if not len(verdicts):
        return None
    model_of = dict(ModelResponse.objects.filter(pk__in=ids).values_list("pk", "model_name"))
    kwargs: dict[str, Any] = {
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "min_clusters": min_clusters,
    }
    latest = latest_versions(verdicts, version_of)
    configs = _grader_labels(_graders(verdicts))
    clinicians = latest.clinicians()
    graders = []
    for config_id, config in sorted(configs.items()):
        key = grader_key(config_id)
        mine = np.array([not str(r).startswith(GRADER) or r == key for r in verdicts.rater])
        mine_latest = np.array([not str(r).startswith(GRADER) or r == key for r in latest.rater])
        table = score_table(latest.subset(mine_latest), model_of, grader=key, **kwargs)
        graders.append(
            {
                "config_id": config_id,
                "label": f"Rubric grader ({config.provenance.get('model') or 'model'})",
                "provenance": config.provenance,
                "scores": table,
                "agreement": agreement_report(verdicts.subset(mine), grader=key, **kwargs)
                if clinicians
                else None,
            }
        )
    clinician_only = latest.subset(np.array([not str(r).startswith(GRADER) for r in latest.rater]))
    section: dict[str, Any] = _clean(
        {
            "n_clinicians": len(clinicians),
            "n_verdicts": len(verdicts),
            "n_superseded": n_superseded,
            "interval_method": INTERVAL_METHOD,
            "clinicians": score_table(clinician_only, model_of, **kwargs)
            if len(clinician_only)
            else None,
            "graders": graders,
        }
    )
    return section
