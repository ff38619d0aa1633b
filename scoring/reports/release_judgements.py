"""The release's own clinician judgements as a source of reviews.

A MedAlign release ships its clinicians' verdicts beside each response
(``clinician-reviewed-model-responses.tsv``: ``binary_correct`` and, where present,
``model_rank``), stored on the responses as ``release_binary_correct`` and ``release_rank``.
Read here as one review per instruction, by one clinician the release does not name, so that
every statistic of a report can run on them: kept apart from the reviews made in the app,
labelled in every report, never mixed silently (a report analyses one source; the "compare"
section sets the two side by side).

The release names no clinician: the pseudo-review has clinician id 0 and pseudonym
``release``, no shown order (position bias does not apply) and one judgement per response (no
inter-clinician agreement can be computed from it).
"""

from __future__ import annotations

import numpy as np

from review.models import Dataset, ModelResponse, Study
from scoring.reports.selectors import ReportInputs, aligned_scores, model_variants
from scoring.reports.statistics import JudgementTable

RELEASE_CLINICIAN = "release"


def release_inputs(
    *,
    dataset: Dataset,
    study: Study | None,
    config_ids: list[int] | None = None,
    exclude_truncated: bool = False,
) -> ReportInputs:
    """The release's judgements of the study's responses (every response of the dataset when
    there is no study), aligned with the metrics as ``report_inputs`` aligns reviews."""
    responses = ModelResponse.objects.filter(instruction__dataset=dataset).exclude(
        release_rank__isnull=True, release_binary_correct__isnull=True
    )
    if study is not None:
        responses = responses.filter(studies__study=study)
    rows = list(
        responses.order_by("instruction_id", "model_name").values_list(
            "instruction_id",
            "instruction__instruction_id",
            "model_name",
            "id",
            "release_rank",
            "release_binary_correct",
            "instruction__category",
            "instruction__specialty",
            "instruction__person_id",
        )
    )
    columns = list(zip(*rows, strict=True)) if rows else [()] * 9
    n = len(rows)
    scores, truncated, metrics = aligned_scores(
        dataset=dataset,
        config_ids=config_ids,
        response_ids=list(columns[3]),
        exclude_truncated=exclude_truncated,
    )
    table = JudgementTable(
        # One review per instruction: the release's clinician judged all its responses.
        review=np.asarray(columns[0], dtype=np.int64),
        instruction=np.asarray(columns[0], dtype=np.int64),
        clinician=np.zeros(n, dtype=np.int64),
        model=np.asarray(columns[2], dtype=object),
        response=np.asarray(columns[3], dtype=np.int64),
        rank=np.array([np.nan if r is None else float(r) for r in columns[4]], dtype=float),
        correct=np.array([np.nan if c is None else float(c) for c in columns[5]], dtype=float),
        position=np.full(n, -1, dtype=np.int64),
        category=np.asarray([c or "(none)" for c in columns[6]], dtype=object),
        specialty=np.asarray([s or "(none)" for s in columns[7]], dtype=object),
    )
    return ReportInputs(
        table=table,
        scores=scores,
        metrics=metrics,
        review_ids=sorted(set(columns[0])),
        simulated_review_ids=[],
        n_cannot_assess=0,
        clinician_pseudonym=[RELEASE_CLINICIAN] * n,
        instruction_code=list(columns[1]),
        error_tags=[[] for _ in range(n)],
        variants=model_variants(dataset=dataset),
        truncated=truncated,
        patient=[p or f"(instruction {c})" for p, c in zip(columns[8], columns[1], strict=True)],
    )
