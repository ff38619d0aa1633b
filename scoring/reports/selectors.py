"""Reads the report pages, the API and the commands need."""

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db.models import Q, QuerySet
from django.utils import timezone

from review.linear import DIGIT, SPACE, Pattern
from review.models import (
    Assignment,
    ClinicianExclusion,
    Dataset,
    Instruction,
    ModelResponse,
    ReferenceResponse,
    ResponseJudgement,
    Review,
    Study,
    StudyResponse,
)
from review.selectors.studies import study_latest_reviewed
from scoring.models import (
    ApiToken,
    CorrelationReport,
    MetricConfig,
    MetricScore,
    ModelVariant,
)
from scoring.reports.jury_scores import jury_expand
from scoring.reports.rubric_scores import rubric_expand
from scoring.reports.statistics import JudgementTable


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report is computed from, read in a handful of queries.

    ``table`` has one row per judgement of a submitted, assessable review; ``scores`` maps a
    metric key to values aligned with those rows (nan where a response has no score). The
    ``extra`` columns only feed the per-response export table: pseudonymous clinician ids,
    the dataset's own instruction ids and error tags, never names, emails or any text.
    """

    table: JudgementTable
    scores: dict[str, np.ndarray]
    metrics: list[dict[str, Any]]  # key, config id, backend, label, identity, identity hash
    review_ids: list[int]
    simulated_review_ids: list[int]
    n_cannot_assess: int
    clinician_pseudonym: list[str]
    instruction_code: list[str]
    error_tags: list[list[str]]
    variants: dict[str, tuple[str, int | None]]  # model name -> (base model, context length)
    # Per metric key: rows whose score came from a cut text (MetricScore.truncated). When the
    # report excludes truncated pairs, those rows' scores are nan in ``scores``.
    truncated: dict[str, np.ndarray]
    # Submitted reviews left out because their reviewer could read model names.
    n_unblindable_excluded: int = 0
    # Each row's patient (the instruction's pseudonymous person id): the resampling unit when
    # instructions share records, and the learned metric's folds.
    patient: list[str] = field(default_factory=list)
    # Submitted reviews outside the table, for the reviews export: "cannot assess" ones (with
    # their reason) and those left out because the reviewer could unblind.
    other_reviews: list[dict[str, Any]] = field(default_factory=list)
    # Reviewing quality (review.models.quality): gold items' reviews left out (unless the
    # report includes them), calibration reviews (never analysed), and the clinicians an admin
    # left out, each with the admin's reason.
    n_gold_excluded: int = 0
    n_calibration_excluded: int = 0
    exclusions: list[dict[str, Any]] = field(default_factory=list)


def _metric_keys(configs: list[MetricConfig]) -> dict[int, str]:
    # The backend name is the natural column name ("bleu"); two configs of one backend (another
    # model or aggregation) get the config id appended so exports never merge them.
    by_backend: dict[str, int] = {}
    for config in configs:
        by_backend[config.backend] = by_backend.get(config.backend, 0) + 1
    return {
        c.pk: c.backend if by_backend[c.backend] == 1 else f"{c.backend}-{c.pk}" for c in configs
    }


def report_configs(*, dataset: Dataset, config_ids: list[int] | None = None) -> list[MetricConfig]:
    """The metric configurations a report covers: those given, else all scored on the dataset."""
    qs = MetricConfig.objects.all()
    if config_ids:
        qs = qs.filter(pk__in=config_ids)
    else:
        qs = qs.filter(
            pk__in=MetricScore.objects.filter(response__instruction__dataset=dataset)
            .values("config_id")
            .distinct()
        )
    return list(qs.order_by("backend", "id"))


def model_variants(*, dataset: Dataset) -> dict[str, tuple[str, int | None]]:
    """Which model names are one base model at a context length (2 queries).

    From the import (a ``base_model`` column, kept in ``generation_metadata``, with the
    responses' ``context_length``: the most common one per model), overridden by the
    researcher's ``ModelVariant`` rows. Models with neither are not in the result.
    """
    counts: dict[str, dict[int | None, int]] = {}
    imported: dict[str, str] = {}
    for name, length, base in (
        ModelResponse.objects.filter(instruction__dataset=dataset)
        .values_list("model_name", "context_length", "generation_metadata__base_model")
        .order_by()
    ):
        by_length = counts.setdefault(name, {})
        by_length[length] = by_length.get(length, 0) + 1
        if isinstance(base, str) and base.strip():
            imported.setdefault(name, base.strip())

    def usual_length(name: str) -> int | None:
        lengths = counts.get(name, {})
        known = {k: v for k, v in lengths.items() if k is not None}
        return max(sorted(known), key=lambda k: known[k]) if known else None

    out = {name: (base, usual_length(name)) for name, base in imported.items()}
    for v in ModelVariant.objects.filter(dataset=dataset):
        length = v.context_length if v.context_length is not None else usual_length(v.model_name)
        out[v.model_name] = (v.base_model, length)
    return out


def aligned_scores(
    *,
    dataset: Dataset,
    config_ids: list[int] | None,
    response_ids: list[int],
    exclude_truncated: bool,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], list[dict[str, Any]]]:
    """Each metric's scores aligned with the rows (``response_ids``, one per row; nan where a
    response has no score), which rows' scores judged a cut text, and the metrics' rows
    (key, config id, backend, label, identity, provenance); the jury's judges each a column."""
    configs = report_configs(dataset=dataset, config_ids=config_ids)
    keys = _metric_keys(configs)
    n = len(response_ids)
    row_of_response: dict[int, list[int]] = {}
    for i, rid in enumerate(response_ids):
        row_of_response.setdefault(rid, []).append(i)
    scores = {keys[c.pk]: np.full(n, np.nan) for c in configs}
    truncated = {keys[c.pk]: np.zeros(n, dtype=bool) for c in configs}
    if configs and n:
        for config_id, response_id, value, cut in MetricScore.objects.filter(
            config_id__in=keys, response_id__in=set(response_ids)
        ).values_list("config_id", "response_id", "value", "truncated"):
            rows_of = row_of_response[response_id]
            truncated[keys[config_id]][rows_of] = cut
            if not (cut and exclude_truncated):
                scores[keys[config_id]][rows_of] = value
    # The LLM jury's judges, each a column of its own (scoring.reports.jury_scores).
    judge_metrics = jury_expand(
        configs=configs,
        keys=keys,
        scores=scores,
        truncated=truncated,
        row_of_response=row_of_response,
        n_rows=n,
    )
    # Rubric scores (clinicians' and each model grader's), columns like any metric.
    rubric_metrics = rubric_expand(
        scores=scores, truncated=truncated, row_of_response=row_of_response, n_rows=n
    )
    metrics = (
        [
            {
                "key": keys[c.pk],
                "config_id": c.pk,
                "backend": c.backend,
                "label": c.label,
                "identity": c.identity,
                "provenance": c.provenance,
                "identity_hash": c.identity_hash,
            }
            for c in configs
        ]
        + judge_metrics
        + rubric_metrics
    )
    return scores, truncated, metrics


def report_inputs(
    *,
    dataset: Dataset,
    study: Study | None = None,
    config_ids: list[int] | None = None,
    exclude_truncated: bool = False,
    include_unblindable: bool = False,
    include_gold: bool = False,
) -> ReportInputs:
    """Build the judgement table, aligned metric scores and model variants (11 queries).

    ``study``: whose reviews (default: the dataset's latest round with submitted reviews).
    ``exclude_truncated`` leaves out (as missing) every score whose metric model cut a text.
    ``include_unblindable`` keeps reviews whose reviewer could read model names
    (researcher, admin or staff access: ``review.access.can_unblind``).
    ``include_gold`` keeps the reviews of gold items (left out by default: they are quality
    checks). Calibration reviews are never analysed, nor the reviews of a clinician an admin
    left out of the study's reports (``ClinicianExclusion``, listed with its reason).
    """
    if study is None:
        study = study_latest_reviewed(dataset)
    exclusions = {
        e.clinician_id: e
        for e in ClinicianExclusion.objects.filter(study=study, lifted_at__isnull=True)
        .select_related("clinician", "excluded_by")
        .order_by("excluded_at")
    }
    left_out_purposes = [Assignment.Purpose.CALIBRATION] + (
        [] if include_gold else [Assignment.Purpose.GOLD]
    )
    reviews = (
        Review.objects.filter(
            assignment__study=study, status=Review.Status.SUBMITTED, cannot_assess=""
        )
        .exclude(assignment__purpose__in=left_out_purposes)
        .exclude(assignment__clinician_id__in=list(exclusions))
    )
    n_unblindable = n_gold = n_calibration = 0
    excluded_reviews: dict[int, int] = {}
    other_reviews = []
    for review_id, code, person, pseudonym, reason, could_unblind, purpose, clinician_id in (
        Review.objects.filter(assignment__study=study, status=Review.Status.SUBMITTED)
        .filter(
            Q(~Q(cannot_assess=""))
            | Q(reviewer_could_unblind=True)
            | Q(assignment__purpose__in=left_out_purposes)
            | Q(assignment__clinician_id__in=list(exclusions))
        )
        .order_by("id")
        .values_list(
            "id",
            "assignment__instruction__instruction_id",
            "assignment__instruction__person_id",
            "assignment__clinician__pseudonym",
            "cannot_assess",
            "reviewer_could_unblind",
            "assignment__purpose",
            "assignment__clinician_id",
        )
    ):
        if purpose == Assignment.Purpose.CALIBRATION:
            why = "calibration review (never analysed)"
            n_calibration += 1
        elif purpose == Assignment.Purpose.GOLD and not include_gold:
            why = "gold item, a quality check (left out unless the report includes them)"
            n_gold += 1
        elif clinician_id in exclusions:
            why = f"clinician left out by an admin: {exclusions[clinician_id].reason}"
            excluded_reviews[clinician_id] = excluded_reviews.get(clinician_id, 0) + 1
        elif reason:
            why = f"cannot assess: {reason}"
        elif not include_unblindable:
            why = "reviewer could read model names: researcher, admin or staff (left out)"
            n_unblindable += 1
        else:
            continue
        other_reviews.append(
            {
                "review_id": review_id,
                "instruction_id": code,
                "patient": person,
                "clinician": pseudonym,
                "excluded": why,
                "reviewer_could_unblind": could_unblind,
            }
        )
    if not include_unblindable:
        reviews = reviews.filter(reviewer_could_unblind=False)
    base = ResponseJudgement.objects.filter(review__in=reviews)
    rows = list(
        base.order_by("review_id", "position").values_list(
            "id",
            "review_id",
            "review__assignment__instruction_id",
            "review__assignment__instruction__instruction_id",
            "review__assignment__clinician_id",
            "review__assignment__clinician__pseudonym",
            "review__assignment__clinician__is_simulated",
            "response__model_name",
            "response_id",
            "rank",
            "is_correct",
            "position",
            "review__assignment__instruction__category",
            "review__assignment__instruction__specialty",
            "review__assignment__instruction__person_id",
        )
    )
    n_cannot_assess = (
        Review.objects.filter(assignment__study=study, status=Review.Status.SUBMITTED)
        .exclude(cannot_assess="")
        .count()
    )
    tags: dict[int, list[str]] = {}
    through = ResponseJudgement.error_tags.through
    for judgement_id, slug in (
        through.objects.filter(responsejudgement__in=base)
        .order_by("responsejudgement_id", "errortag__order", "errortag__slug")
        .values_list("responsejudgement_id", "errortag__slug")
    ):
        tags.setdefault(judgement_id, []).append(slug)
    columns = list(zip(*rows, strict=True)) if rows else [()] * 15
    response_ids = np.asarray(columns[8], dtype=np.int64)
    scores, truncated, metrics = aligned_scores(
        dataset=dataset,
        config_ids=config_ids,
        response_ids=list(columns[8]),
        exclude_truncated=exclude_truncated,
    )

    table = JudgementTable(
        review=np.asarray(columns[1], dtype=np.int64),
        instruction=np.asarray(columns[2], dtype=np.int64),
        clinician=np.asarray(columns[4], dtype=np.int64),
        model=np.asarray(columns[7], dtype=object),
        response=response_ids,
        rank=np.array([np.nan if r is None else r for r in columns[9]], dtype=float),
        correct=np.array([np.nan if c is None else float(c) for c in columns[10]], dtype=float),
        position=np.asarray(columns[11], dtype=np.int64),
        category=np.asarray([c or "(none)" for c in columns[12]], dtype=object),
        specialty=np.asarray([s or "(none)" for s in columns[13]], dtype=object),
    )
    review_ids = sorted(set(columns[1]))
    simulated = sorted(
        {r for r, simulated in zip(columns[1], columns[6], strict=True) if simulated}
    )
    return ReportInputs(
        table=table,
        scores=scores,
        metrics=metrics,
        review_ids=review_ids,
        simulated_review_ids=simulated,
        n_cannot_assess=n_cannot_assess,
        clinician_pseudonym=list(columns[5]),
        instruction_code=list(columns[3]),
        error_tags=[tags.get(jid, []) for jid in columns[0]],
        variants=model_variants(dataset=dataset),
        truncated=truncated,
        n_unblindable_excluded=n_unblindable,
        patient=[p or f"(instruction {c})" for p, c in zip(columns[14], columns[3], strict=True)],
        other_reviews=other_reviews,
        n_gold_excluded=n_gold,
        n_calibration_excluded=n_calibration,
        exclusions=[
            {
                "clinician": e.clinician.pseudonym,
                "reason": e.reason,
                "excluded_at": e.excluded_at.isoformat(),
                "excluded_by": e.excluded_by.pseudonym,
                "reviews_left_out": excluded_reviews.get(clinician_id, 0),
            }
            for clinician_id, e in exclusions.items()
        ],
    )


# Style features of a response (FastChat's style control counts markdown the same way): its
# length in words, list items, headers and bold spans. Numbers only leave this function.
# Responses are model output: RE2, linear in them (with ``re`` a run of blank lines was
# quadratic). ``SPACE``/``DIGIT`` are Python's Unicode ``\s``/``\d``.
_LIST_ITEM = Pattern(rf"(?m)^{SPACE}*(?:[-*+\x{{2022}}]|{DIGIT}+[.)]){SPACE}+")
_HEADER = Pattern(rf"(?m)^{SPACE}*#{{1,6}}{SPACE}+[^{SPACE[1:-1]}]")
_BOLD = Pattern(r"\*\*[^*\n]+\*\*|__[^_\n]+__")
STYLE_FEATURES = ("length_words", "list_items", "headers", "bold")


def response_style(*, table: JudgementTable) -> dict[str, np.ndarray]:
    """Per table row, each style feature of the row's response (1 query)."""
    texts = dict(
        ModelResponse.objects.filter(pk__in={int(r) for r in table.response})
        .values_list("id", "text")
        .order_by()
    )
    per_response = {
        rid: (
            len(text.split()),
            len(_LIST_ITEM.findall(text)),
            len(_HEADER.findall(text)),
            len(_BOLD.findall(text)),
        )
        for rid, text in texts.items()
    }
    values = np.array([per_response.get(int(r), (0, 0, 0, 0)) for r in table.response], float)
    values = values.reshape(len(table), len(STYLE_FEATURES))
    return {name: values[:, k] for k, name in enumerate(STYLE_FEATURES)}


def learned_texts(*, table: JudgementTable) -> tuple[list[str], list[str], list[str]]:
    """Per table row: the instruction's question, the response and the first reference answer
    (3 queries). For the learned metric's embeddings only: the texts never leave the worker."""

    response_ids = {int(r) for r in table.response}
    instruction_ids = {int(i) for i in table.instruction}
    responses = dict(
        ModelResponse.objects.filter(pk__in=response_ids).values_list("id", "text").order_by()
    )
    questions = dict(
        Instruction.objects.filter(pk__in=instruction_ids).values_list("id", "question").order_by()
    )
    references: dict[int, str] = {}
    for instruction_id, text in (
        ReferenceResponse.objects.filter(instruction_id__in=instruction_ids)
        .order_by("instruction_id", "annotator", "id")
        .values_list("instruction_id", "text")
    ):
        references.setdefault(instruction_id, text)
    return (
        [questions.get(int(i), "") for i in table.instruction],
        [responses.get(int(r), "") for r in table.response],
        [references.get(int(i), "") for i in table.instruction],
    )


def reports_recent(limit: int = 50) -> QuerySet[CorrelationReport]:
    # results can be megabytes (the per-response table): list pages never load them.
    return CorrelationReport.objects.select_related("dataset", "created_by").defer("results")[
        :limit
    ]


def report_get(*, report_id: int) -> CorrelationReport | None:
    return CorrelationReport.objects.select_related("dataset").filter(pk=report_id).first()


def report_status(*, report_id: int) -> dict[str, Any] | None:
    row = (
        CorrelationReport.objects.filter(pk=report_id)
        .values("id", "status", "error", "finished_at")
        .first()
    )
    if row is None:
        return None
    return {
        "report": row["id"],
        "status": row["status"],
        "error": row["error"],
        "finished_at": row["finished_at"].isoformat() if row["finished_at"] else None,
    }


def report_datasets() -> QuerySet[Dataset]:
    return Dataset.objects.order_by("name")


def api_tokens_for_user(*, user: Any) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("-created_at")


def api_token_for_key(*, key: str) -> ApiToken | None:
    """The live (unrevoked, unexpired) token whose sha256 matches ``key``; only hashes are
    stored."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    return (
        ApiToken.objects.select_related("user")
        .filter(key_hash=digest, revoked_at__isnull=True, expires_at__gt=timezone.now())
        .first()
    )


@dataclass(frozen=True)
class StudyResponses:
    """Every response of a study's response set, reviewed or not, with each metric's score:
    what a predictor sees on the instructions no clinician has judged yet (2-3 queries)."""

    response_ids: list[int]
    instruction_ids: list[int]  # database ids, as JudgementTable.instruction
    instruction_code: list[str]  # the release's instruction ids
    patient: list[str]
    model: list[str]
    scores: dict[str, np.ndarray]
    metrics: list[dict[str, Any]]


def study_responses(
    *,
    dataset: Dataset,
    study: Study,
    config_ids: list[int] | None = None,
    exclude_truncated: bool = False,
) -> StudyResponses:

    rows = list(
        StudyResponse.objects.filter(study=study)
        .order_by("instruction_id", "response_id")
        .values_list(
            "response_id",
            "instruction_id",
            "instruction__instruction_id",
            "instruction__person_id",
            "response__model_name",
        )
    )
    columns = list(zip(*rows, strict=True)) if rows else [()] * 5
    scores, _, metrics = aligned_scores(
        dataset=dataset,
        config_ids=config_ids,
        response_ids=list(columns[0]),
        exclude_truncated=exclude_truncated,
    )
    return StudyResponses(
        response_ids=list(columns[0]),
        instruction_ids=list(columns[1]),
        instruction_code=list(columns[2]),
        patient=[p or f"(instruction {c})" for p, c in zip(columns[3], columns[2], strict=True)],
        model=list(columns[4]),
        scores=scores,
        metrics=metrics,
    )


def study_learned_texts(
    *, response_ids: list[int], instruction_ids: list[int]
) -> tuple[list[str], list[str], list[str]]:
    """Per response of a study: its instruction's question, its text and the first reference
    answer (3 queries); for the learned metric's embeddings only, never leaving the worker."""

    texts = dict(
        ModelResponse.objects.filter(pk__in=set(response_ids)).values_list("id", "text").order_by()
    )
    questions = dict(
        Instruction.objects.filter(pk__in=set(instruction_ids))
        .values_list("id", "question")
        .order_by()
    )
    references: dict[int, str] = {}
    for instruction_id, text in (
        ReferenceResponse.objects.filter(instruction_id__in=set(instruction_ids))
        .order_by("instruction_id", "annotator", "id")
        .values_list("instruction_id", "text")
    ):
        references.setdefault(instruction_id, text)
    return (
        [questions.get(int(i), "") for i in instruction_ids],
        [texts.get(int(r), "") for r in response_ids],
        [references.get(int(i), "") for i in instruction_ids],
    )
