"""Every write the reports make: correlation reports and their exports, model variants, API
tokens. Metric configurations are written in ``scoring.runs.metric_configs``, runs in
``scoring.runs``."""

import dataclasses
import hashlib
import logging
import platform
import secrets
import time
from datetime import timedelta
from typing import Any

import django
import numpy
import scipy
from django.conf import settings
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from medalign_site.logs import redact_exception
from review.models import AuditEvent, Dataset, ModelResponse, Study, User
from review.selectors.studies import response_set_summary, study_current, study_latest_reviewed
from review.services.audit import audit_record
from scoring.generation.provenance import add_generation_columns
from scoring.models import (
    ApiToken,
    CorrelationReport,
    LearnedMetricModel,
    ModelVariant,
    PaperModelName,
)
from scoring.reports import analysis, learned, truth
from scoring.reports import statistics as st
from scoring.reports.paper import PAPER_LABELS
from scoring.reports.statistics.consensus import CONSENSUS_METHODS

logger = logging.getLogger(__name__)

# --- correlation reports -----------------------------------------------------------------------


REPORT_MAX_RESAMPLES = 100_000
REPORT_TABLES = ("correlation", "leaderboard", "responses", "metrics")
CLUSTER_CHOICES = ("auto", "patient", "instruction")
# Where the judgements come from: clinicians reviewing in this app, or the judgements shipped
# with the release (``binary_correct``/``model_rank``; scoring.reports.release_judgements).
SOURCES = ("app", "release")
SOURCE_LABELS = {
    "app": "reviews made in this app",
    "release": "the release's own clinician judgements (binary_correct, model_rank)",
}


class ReportError(Exception):
    """A report request that cannot be carried out, with a message for the user."""


def _report_parameters(
    *,
    n_resamples: int,
    seed: int | None,
    confidence: float,
    config_ids: list[int] | None,
    exclude_truncated: bool = False,
    learned_metric: bool = False,
    study_id: int | None = None,
    include_unblindable: bool = False,
    cluster: str = "auto",
    min_clusters: int = st.MIN_CLUSTERS,
    n_permutations: int = st.DEFAULT_PERMUTATIONS,
    source: str = "app",
    ppi_predictor: str = "auto",
    consensus: str = truth.DEFAULT_CONSENSUS,
    include_gold: bool = False,
) -> dict[str, Any]:
    if consensus not in CONSENSUS_METHODS:
        raise ReportError(f"the consensus is one of {', '.join(CONSENSUS_METHODS)}")
    if source not in SOURCES:
        raise ReportError(f"the judgements come from {' or '.join(SOURCES)}")
    if not 1 <= int(n_resamples) <= REPORT_MAX_RESAMPLES:
        raise ReportError(f"resamples must be between 1 and {REPORT_MAX_RESAMPLES:,}")
    if cluster not in CLUSTER_CHOICES:
        raise ReportError(f"cluster by {' or '.join(CLUSTER_CHOICES)}")
    if not 2 <= int(min_clusters) <= 1000:
        raise ReportError("the fewest clusters for an interval must be from 2 to 1,000")
    if not 99 <= int(n_permutations) <= 100_000:
        raise ReportError("permutations must be from 99 to 100,000")
    if not 0.5 <= float(confidence) < 1.0:
        raise ReportError("confidence must be at least 0.5 and below 1")
    if seed is not None and not 0 <= int(seed) < 2**32:
        raise ReportError("seed must be a whole number from 0 to 4294967295")
    # A seed is always recorded, drawn at random when none is given, so any report can be
    # recomputed exactly (same cluster draws) from its parameters.
    return {
        "n_resamples": int(n_resamples),
        "seed": int(seed) if seed is not None else secrets.randbelow(2**31),
        "seed_given": seed is not None,
        "confidence": float(confidence),
        "config_ids": sorted(int(c) for c in config_ids) if config_ids else None,
        "exclude_truncated": bool(exclude_truncated),
        "learned_metric": bool(learned_metric),
        # The study whose reviews (and so whose response set) the report analyses.
        "study_id": study_id,
        # Reviews by accounts that could read model names are left out unless asked for.
        "include_unblindable": bool(include_unblindable),
        # The resampling unit: "auto" clusters by patient when instructions share patients.
        "cluster": cluster,
        "min_clusters": int(min_clusters),
        "n_permutations": int(n_permutations),
        # Whose judgements: reviews made in the app, or the release's own (never mixed).
        "source": source,
        # The predictor of the prediction-powered estimates: "auto", "none", "learned" or a
        # metric key (scoring.reports.prediction).
        "ppi_predictor": (ppi_predictor or "auto").strip()[:100],
        # Which truth metrics are scored against (scoring.reports.truth), and whether the
        # reviews of gold items (quality checks) are analysed too.
        "consensus": consensus,
        "include_gold": bool(include_gold),
    }


@transaction.atomic
def report_create(
    *,
    dataset: Dataset,
    actor: User | None,
    n_resamples: int = 10_000,
    seed: int | None = None,
    confidence: float = 0.95,
    config_ids: list[int] | None = None,
    exclude_truncated: bool = False,
    learned_metric: bool = False,
    title: str = "",
    request: HttpRequest | None = None,
    enqueue: bool = True,
    study: Study | None = None,
    include_unblindable: bool = False,
    cluster: str = "auto",
    min_clusters: int = st.MIN_CLUSTERS,
    n_permutations: int = st.DEFAULT_PERMUTATIONS,
    source: str = "app",
    ppi_predictor: str = "auto",
    consensus: str = truth.DEFAULT_CONSENSUS,
    include_gold: bool = False,
) -> CorrelationReport:
    """A pending report; its computation is queued once the row is committed.

    ``exclude_truncated``: leave out every score whose metric model cut the text.
    ``learned_metric``: add the metric learned from the clinicians' rankings (cross-validated
    by instruction; ``scoring.reports.learned``) as one more row of the correlation table.
    ``study``: whose reviews to analyse (default: the dataset's latest round with submitted
    reviews, so that a new, empty round is not analysed by default).
    ``include_unblindable``: keep reviews by accounts that could read model names
    (researcher, admin or staff access); left out by default.
    ``consensus``: the truth metrics are scored against (``scoring.reports.truth``);
    ``include_gold``: analyse the reviews of gold items too (left out by default).
    """
    if study is None:
        study = study_latest_reviewed(dataset)
    elif study.dataset_id != dataset.pk:
        raise ReportError(f"{study.name} is a study of another dataset than {dataset.name}")
    parameters = _report_parameters(
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        config_ids=config_ids,
        exclude_truncated=exclude_truncated,
        learned_metric=learned_metric,
        study_id=study.pk if study is not None else None,
        include_unblindable=include_unblindable,
        cluster=cluster,
        min_clusters=min_clusters,
        n_permutations=n_permutations,
        source=source,
        ppi_predictor=ppi_predictor,
        consensus=consensus,
        include_gold=include_gold,
    )
    report = CorrelationReport.objects.create(
        dataset=dataset,
        title=title[:200],
        status=CorrelationReport.Status.PENDING,
        parameters=parameters,
        created_by=actor,
    )
    audit_record(
        action=AuditEvent.Action.REPORT_CREATED,
        actor=actor,
        request=request,
        obj=report,
        details={"dataset": dataset.name, **parameters},
    )
    if enqueue:
        transaction.on_commit(lambda: _enqueue_report(report.pk))
    return report


def _enqueue_report(report_id: int) -> None:
    from scoring.reports.tasks import compute_report

    try:
        compute_report.delay(report_id)
    except Exception as exc:
        # The broker is down: say so on the report rather than leave it pending forever.
        logger.warning("could not queue report %s: %s", report_id, exc)
        CorrelationReport.objects.filter(pk=report_id).update(
            status=CorrelationReport.Status.FAILED,
            error=f"could not queue the computation (task broker unreachable): {exc}"[:2000],
            finished_at=timezone.now(),
        )


def _library_versions() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "django": django.get_version(),
    }


def report_compute(*, report_id: int) -> CorrelationReport:
    """Compute and store a report's results and provenance; failures are kept with the reason.

    A report that is already done is returned unchanged (a redelivered task does nothing).
    """
    from scoring.reports.analysis import compute_results, response_rows
    from scoring.reports.analysis import metric_provenance as analysis_provenance
    from scoring.reports.release_judgements import release_inputs
    from scoring.reports.selectors import report_inputs, response_style
    from scoring.rubric_scores import rubric_section

    with transaction.atomic():
        report = (
            CorrelationReport.objects.select_for_update()
            .select_related("dataset")
            .get(pk=report_id)
        )
        if report.status == CorrelationReport.Status.DONE:
            return report
        report.status = CorrelationReport.Status.RUNNING
        report.error = ""
        report.save(update_fields=["status", "error"])
    try:
        params = report.parameters
        study = _report_study(report)
        source = str(params.get("source", "app"))
        if source == "release":
            inputs = release_inputs(
                dataset=report.dataset,
                study=study,
                config_ids=params.get("config_ids"),
                exclude_truncated=bool(params.get("exclude_truncated", False)),
            )
            if len(inputs.table) == 0:
                raise ReportError(
                    f"the release carries no clinician judgements of {study.name}'s responses "
                    "(binary_correct / model_rank columns)"
                )
        else:
            inputs = report_inputs(
                dataset=report.dataset,
                study=study,
                config_ids=params.get("config_ids"),
                exclude_truncated=bool(params.get("exclude_truncated", False)),
                include_unblindable=bool(params.get("include_unblindable", False)),
                include_gold=bool(params.get("include_gold", False)),
            )
        if len(inputs.table) == 0:
            raise ReportError(
                f"no submitted reviews to analyse in {study.name} of this dataset yet (reviews "
                "marked 'cannot assess' are left out, and so are reviews by accounts that can "
                "read model names unless the report includes them)"
            )
        labels = {m["key"]: m["label"] for m in inputs.metrics}
        excluded = bool(params.get("exclude_truncated", False))
        metric_provenance = [
            {
                "key": m["key"],
                "label": m["label"],
                "config_id": m["config_id"],
                "backend": m["backend"],
                "identity_hash": m["identity_hash"],
                **analysis_provenance(m["identity"], m.get("provenance")),
                # Responses in this report whose score judged a cut text, and whether the
                # report left those scores out.
                "n_truncated": int(
                    numpy.unique(inputs.table.response[inputs.truncated[m["key"]]]).shape[0]
                ),
                "truncated_excluded": excluded,
            }
            for m in inputs.metrics
        ]
        keys, unit = st.choose_clusters(
            numpy.asarray(inputs.instruction_code),
            numpy.asarray(inputs.patient),
            str(params.get("cluster", "auto")),
        )
        table = inputs.table.with_clusters(keys)
        inputs = dataclasses.replace(inputs, table=table)
        scores = dict(inputs.scores)
        learned_fit = None
        if params.get("learned_metric"):
            learned_fit = _learned_metric_fit(inputs, seed=int(params.get("seed", 0)))
            scores[learned.LEARNED_KEY] = learned_fit["oof"]
            labels[learned.LEARNED_KEY] = learned.LEARNED_LABEL
            metric_provenance.append(learned_fit["provenance_row"])
        # The truth metrics are scored against: each review on its own, or one consensus per
        # response (scoring.reports.truth); the sections about the clinicians themselves
        # (their agreement, position bias) are computed on their own reviews either way.
        chosen = str(params.get("consensus", truth.DEFAULT_CONSENSUS))
        adjudicated = truth.adjudicated_judgements(study) if source == "app" else {}
        built: dict[str, Any] = {}
        analysed, analysed_scores = inputs, scores
        if chosen != truth.DEFAULT_CONSENSUS:
            built[chosen] = truth.build_consensus(inputs, chosen, adjudicated)
            analysed = truth.consensus_inputs(inputs, built[chosen])
            analysed_scores = built[chosen].aligned(scores)
        results = compute_results(
            analysed.table,
            analysed_scores,
            params,
            labels,
            variants=inputs.variants,
            style=response_style(table=analysed.table),
            cluster_unit=unit,
        )
        boot = {
            "n_resamples": int(params["n_resamples"]),
            "seed": int(params["seed"]),
            "confidence": float(params["confidence"]),
            "min_clusters": int(params.get("min_clusters", st.MIN_CLUSTERS)),
        }
        if analysed is not inputs:
            results["human_ceiling"] = analysis.clean(st.human_ceiling(table, **boot))
            results["leave_one_out"] = analysis.clean(
                st.leave_one_clinician_out(table, scores, **boot)
            )
            results["position_bias"] = analysis.clean(st.position_bias(table, **boot))
        results["consensus"] = analysis.clean(
            truth.consensus_section(
                inputs, scores, labels, chosen=chosen, adjudicated=adjudicated, boot=boot,
                built=built,
            )
        )  # fmt: skip
        results["adjudications"] = analysis.clean(truth.adjudication_trail(study))
        results["gold"] = analysis.clean(
            truth.gold_results(
                study,
                dict(zip(table.clinician.tolist(), inputs.clinician_pseudonym, strict=True)),
            )
        )
        results["exclusions"] = list(getattr(inputs, "exclusions", []))
        results["learned_metric"] = learned_fit["info"] if learned_fit else None
        results["source"] = {"name": source, "label": SOURCE_LABELS[source]}
        results["release_comparison"] = (
            _release_comparison(report, study, table, params) if source == "app" else None
        )
        results["metric_provenance"] = metric_provenance
        # Rubric scores side by side and the graders against the clinicians, on the study's
        # response set (scoring.rubric_scores); None when nothing of it was graded.
        results["rubrics"] = rubric_section(
            response_ids=ModelResponse.objects.filter(studies__study=study).values_list(
                "pk", flat=True
            ),
            n_resamples=int(params["n_resamples"]),
            seed=int(params["seed"]),
            confidence=float(params["confidence"]),
            min_clusters=int(params.get("min_clusters", st.MIN_CLUSTERS)),
        )
        results["prediction_powered"] = _prediction_powered(
            report, study, analysed, analysed_scores, labels, params, unit, learned_fit
        )
        results["responses"] = response_rows(
            inputs.table,
            scores,
            clinician_pseudonym=inputs.clinician_pseudonym,
            instruction_code=inputs.instruction_code,
            error_tags=inputs.error_tags,
            simulated_review_ids=inputs.simulated_review_ids,
            truncated=inputs.truncated,
            patient=inputs.patient,
        )
        # The leave-one-out distribution names clinicians by pseudonym, as every export does.
        pseudonym = dict(
            zip(inputs.table.clinician.tolist(), inputs.clinician_pseudonym, strict=True)
        )
        sections = [results["leave_one_out"]] + [
            group["leave_one_out"]
            for groups in results["breakdowns"].values()
            for group in groups.values()
        ]
        for section in sections:
            for c in section.get("clinicians", []):
                c["clinician"] = pseudonym.get(c["clinician"], c["clinician"])
        # Each response's generation provenance (context length, model identity, versions,
        # prompt sha256…): ids, hashes and numbers only.
        add_generation_columns(results["responses"])
        n_simulated = len(inputs.simulated_review_ids)
        provenance = {
            "dataset": {
                "id": report.dataset.pk,
                "name": report.dataset.name,
                "version": report.dataset.updated_at.isoformat(),
                "is_synthetic": report.dataset.is_synthetic,
            },
            # What the clinicians ranked: the study's response set, named so two reports of
            # different sets are never read as one.
            "response_set": response_set_summary(study).as_dict(),
            "reviews_could_unblind": {
                "included": bool(params.get("include_unblindable", False)),
                "excluded": inputs.n_unblindable_excluded,
            },
            # The truth metrics were scored against, and what reviewing quality left out.
            "consensus": {"method": chosen, "label": truth.consensus_label(chosen)},
            "quality": {
                "gold_included": bool(params.get("include_gold", False)),
                "gold_reviews_excluded": getattr(inputs, "n_gold_excluded", 0),
                "calibration_reviews_excluded": getattr(inputs, "n_calibration_excluded", 0),
                "clinicians_excluded": list(getattr(inputs, "exclusions", [])),
            },
            "metric_configs": inputs.metrics,
            "model_variants": {
                name: {"base_model": base, "context_length": length}
                for name, (base, length) in sorted(inputs.variants.items())
            },
            "review_ids": inputs.review_ids,
            # Submitted reviews outside the analysis, with the reason (the reviews export).
            "other_reviews": inputs.other_reviews,
            "simulated_review_ids": inputs.simulated_review_ids,
            "counts": {
                **results["counts"],
                "reviews_real": len(inputs.review_ids) - n_simulated,
                "reviews_simulated": n_simulated,
                "reviews_cannot_assess_excluded": inputs.n_cannot_assess,
                # Responses of the set that named a model (heuristic hits): shown to
                # clinicians with those words masked, as every response is.
                "responses_masked": ModelResponse.objects.filter(
                    studies__study=study, names_own_model=True
                ).count(),
            },
            "library_versions": _library_versions(),
            "report_created_at": report.created_at.isoformat(),
            "computed_at": timezone.now().isoformat(),
            "method": "scoring.reports.analysis.compute_results (see the Method page)",
        }
    except Exception as exc:
        logger.exception("report %s failed", report_id)
        # Shown to researchers: the type only, redacted like the logs (medalign_site.logs).
        CorrelationReport.objects.filter(pk=report_id).update(
            status=CorrelationReport.Status.FAILED,
            # The app's own ReportError messages are written for researchers and quote no data.
            error=(str(exc) if isinstance(exc, ReportError) else redact_exception(exc))[:2000],
            finished_at=timezone.now(),
        )
        report.refresh_from_db()
        return report
    report.results = results
    report.provenance = provenance
    report.status = CorrelationReport.Status.DONE
    report.finished_at = timezone.now()
    with transaction.atomic():
        report.save(update_fields=["results", "provenance", "status", "finished_at"])
        if learned_fit is not None:
            _learned_metric_store(report=report, fit=learned_fit)
    return report


def _prediction_powered(
    report: CorrelationReport,
    study: Study,
    inputs: Any,
    scores: dict[str, Any],
    labels: dict[str, str],
    params: dict[str, Any],
    unit: str,
    learned_fit: dict[str, Any] | None,
) -> dict[str, Any]:
    """Prediction-powered estimates and the reviews still needed, with the report's predictor
    on every response of the study (scoring.reports.prediction)."""
    from scoring.reports import prediction
    from scoring.reports.selectors import study_responses

    responses = study_responses(
        dataset=report.dataset,
        study=study,
        config_ids=params.get("config_ids"),
        exclude_truncated=bool(params.get("exclude_truncated", False)),
    )
    try:
        key = prediction.choose_predictor(
            str(params.get("ppi_predictor", "auto")),
            inputs.metrics,
            learned=learned_fit is not None,
        )
    except prediction.PredictorError as exc:
        return {"predictor": None, "error": str(exc), "estimates": None, "power": None}
    if study.assignment_mode == Study.AssignmentMode.ADAPTIVE:
        # PPI here takes the reviewed instructions as a uniform sample of the study; an adaptive
        # design chose them for doubt, so these numbers would be biased (3-4 points in an
        # outside review's simulation), and a warning on the page does not travel with an
        # export. The inverse-probability-weighted estimates live with the study.
        return {
            "predictor": key,
            "design": study.assignment_mode,
            "error": (
                "this round assigned its reviews adaptively, so estimates that take the reviewed "
                "instructions as a uniform sample would be biased; the weighted (active-inference) "
                "estimates and the stopping rule are on the admin's studies page"
            ),
            "estimates": None,
            "power": None,
        }
    preds = None
    if key == prediction.LEARNED and learned_fit is not None:
        if int(learned_fit["info"].get("n_splits") or 0) < 2:
            return {
                "predictor": None,
                "error": "the learned metric had too few patients for cross-fitting",
                "estimates": None,
                "power": None,
            }
        values, folds, fold = _learned_study_predictions(inputs, responses, learned_fit)
        preds = prediction.predictions(responses, key, unit, values=values, folds=folds, fold=fold)
    elif key is not None:
        preds = prediction.predictions(responses, key, unit)
    try:
        section = _prediction_powered_results(
            inputs, responses, key, labels, preds, scores, params, unit
        )
        section["design"] = study.assignment_mode
        return section
    except (ValueError, ArithmeticError, numpy.linalg.LinAlgError) as exc:
        # An auxiliary section must not fail the report: it says it could not be computed.
        logger.warning("report %s: prediction-powered section failed: %s", report.pk, exc)
        return {
            "predictor": key,
            "error": f"could not be computed ({type(exc).__name__})",
            "estimates": None,
            "power": None,
        }


def _prediction_powered_results(
    inputs: Any,
    responses: Any,
    key: str | None,
    labels: dict[str, str],
    preds: Any,
    scores: dict[str, Any],
    params: dict[str, Any],
    unit: str,
) -> dict[str, Any]:
    from scoring.reports.analysis import prediction_powered_results

    return prediction_powered_results(
        inputs.table,
        responses,
        predictor=key,
        label=labels.get(key, key) if key else "",
        preds=preds,
        table_scores=scores,
        confidence=float(params.get("confidence", 0.95)),
        unit=unit,
        min_clusters=int(params.get("min_clusters", st.MIN_CLUSTERS)),
    )


def _learned_study_predictions(
    inputs: Any, responses: Any, fit: dict[str, Any]
) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """The learned metric cross-fitted on every response of the study: each fold model of the
    report's first split (fitted without that fold's patients), applied to every response.
    Returns the mean over fold models, the ``(responses, K)`` fold scores, and each response's
    own fold (-1 for an instruction no clinician reviewed)."""
    from scoring.reports.selectors import study_learned_texts

    questions, texts, references = study_learned_texts(
        response_ids=responses.response_ids, instruction_ids=responses.instruction_ids
    )
    index = dict(fit["embedding_index"])
    new = sorted({*questions, *texts, *references} - set(index))
    emb = fit["embeddings"]
    if new:
        emb = numpy.vstack([emb, learned.embed_texts(new)])
        index.update({t: len(index) + k for k, t in enumerate(new)})

    def rows(values: list[str]) -> numpy.ndarray:
        return emb[[index[t] for t in values]]

    n = len(responses.response_ids)
    features, _ = learned.build_features(
        {k: responses.scores.get(k, numpy.full(n, numpy.nan)) for k in inputs.scores},
        numpy.array([len(t.split()) for t in texts], dtype=float),
        rows(questions),
        rows(texts),
        rows(references),
    )
    fold_of = fit["info"]["fold_of_instruction"]
    table_fold = numpy.array([fold_of.get(c, -1) for c in inputs.instruction_code])
    k = int(fit["info"]["n_splits"])
    folds = numpy.column_stack(
        [
            learned.fit_ranker(inputs.table, fit["features"], numpy.flatnonzero(table_fold != j))[
                0
            ].score(features)
            for j in range(k)
        ]
    )
    reviewed = set(inputs.instruction_code)
    fold = numpy.array(
        [
            fold_of.get(c, -1) if c in reviewed and fold_of.get(c) is not None else -1
            for c in responses.instruction_code
        ]
    )
    return folds.mean(axis=1), folds, fold


def _release_comparison(
    report: CorrelationReport, study: Study, app: Any, params: dict[str, Any]
) -> dict[str, Any] | None:
    """The two sources side by side, when the release judged the responses reviewed here:
    each model's share correct and mean rank by either source, and how the app's reviewers
    agree with the release's (never pooled into one estimate)."""
    from scoring.reports.analysis import clean
    from scoring.reports.release_judgements import release_inputs

    release = release_inputs(dataset=report.dataset, study=study)
    if len(release.table) == 0:
        return None
    keys, _ = st.choose_clusters(
        numpy.asarray(release.instruction_code),
        numpy.asarray(release.patient),
        str(params.get("cluster", "auto")),
    )
    boot = {
        "n_resamples": int(params["n_resamples"]),
        "seed": int(params["seed"]),
        "confidence": float(params["confidence"]),
        "min_clusters": int(params.get("min_clusters", st.MIN_CLUSTERS)),
    }
    app_rows = {r["model"]: r for r in st.leaderboard(app, **boot)}
    release_rows = {
        r["model"]: r for r in st.leaderboard(release.table.with_clusters(keys), **boot)
    }
    models = sorted(set(app_rows) | set(release_rows))
    fields = ("share_correct", "correct_ci_low", "correct_ci_high", "mean_rank", "n")
    return clean(
        {
            "models": [
                {
                    "model": m,
                    **{f"app_{f}": app_rows.get(m, {}).get(f) for f in fields},
                    **{f"release_{f}": release_rows.get(m, {}).get(f) for f in fields},
                }
                for m in models
            ],
            "agreement": st.source_agreement(app, release.table, **boot),
        }
    )


def _report_study(report: CorrelationReport) -> Study:
    """The study a report analyses: recorded at creation (reports made before studies existed
    analysed the dataset's only round)."""
    study_id = report.parameters.get("study_id")
    study = (
        Study.objects.filter(pk=study_id, dataset=report.dataset).first()
        if study_id is not None
        else study_current(report.dataset)
    )
    if study is None:
        raise ReportError(
            "no submitted reviews to analyse: this dataset has no study yet (import responses, "
            "or add candidates to a study)"
        )
    return study


def _learned_metric_fit(inputs: Any, *, seed: int) -> dict[str, Any]:
    """Cross-validated scores of the learned metric, and the model fitted on every review."""
    from scoring.reports.selectors import learned_texts
    from scoring.weights import file_sha256

    started = time.perf_counter()
    questions, responses, references = learned_texts(table=inputs.table)
    unique = sorted(set(questions) | set(responses) | set(references))
    index = {text: k for k, text in enumerate(unique)}
    emb = learned.embed_texts(unique)

    def rows(texts: list[str]) -> numpy.ndarray:
        return emb[[index[t] for t in texts]]

    from scoring.rubric_scores import CLINICIANS_KEY

    features, names = learned.build_features(
        # The clinicians' rubric score is a human judgement, not a metric: never a feature.
        {k: v for k, v in inputs.scores.items() if k != CLINICIANS_KEY},
        numpy.array([len(t.split()) for t in responses], dtype=float),
        rows(questions),
        rows(responses),
        rows(references),
    )
    embed_s = time.perf_counter() - started
    oof, info = learned.cross_validated_scores(
        inputs.table,
        features,
        patient=inputs.patient,
        repeats=learned.DEFAULT_REPEATS,
        seed=seed,
    )
    started = time.perf_counter()
    final, n_pairs = learned.fit_ranker(inputs.table, features, numpy.arange(len(inputs.table)))
    path = learned.minilm_path()
    provenance = {
        "method": info["method"],
        "cv": info["cv"],
        "c": info["c"],
        "embedding_model": learned.EMBEDDING_MODEL_ID,
        "embedding_weights_sha256": file_sha256(path / "model.safetensors"),
        "embedding_pooling": "mean over tokens, L2-normalised",
        "embedding_max_tokens": learned.EMBEDDING_MAX_TOKENS,
        "feature_metrics": [
            {"key": m["key"], "config_id": m["config_id"], "identity_hash": m["identity_hash"]}
            for m in inputs.metrics
        ],
        "versions": learned.versions(),
        "n_reviews": info["n_reviews"],
        "n_pairs": n_pairs,
    }
    fold_of_patient = info.pop("fold_of_patient")
    info = {
        **info,
        # Each instruction's fold in the first split (its patient's), for a rerun from exports.
        "fold_of_instruction": {
            code: fold_of_patient.get(patient)
            for code, patient in zip(inputs.instruction_code, inputs.patient, strict=True)
        },
        "n_reviews_final_model": info["n_reviews"],
        "n_pairs_final_model": n_pairs,
        "embedding_seconds": embed_s,
        "final_fit_seconds": time.perf_counter() - started,
        "feature_names": names[:8] + ([f"... {len(names) - 8} more"] if len(names) > 8 else []),
    }
    return {
        "oof": oof,
        "info": info,
        # Kept in memory for the cross-fitted predictor (never stored): the training features
        # and the embeddings already computed, by text.
        "features": features,
        "embeddings": emb,
        "embedding_index": index,
        "model": final,
        "names": names,
        "provenance": provenance,
        "provenance_row": {
            "key": learned.LEARNED_KEY,
            "label": learned.LEARNED_LABEL,
            "config_id": None,
            "backend": "learned",
            "identity_hash": None,
            "model": f"pairwise logistic regression + {learned.EMBEDDING_MODEL_ID}",
            "weights_sha256": provenance["embedding_weights_sha256"],
            "tokenizer": "MiniLM word pieces (max 256)",
            "library_versions": provenance["versions"],
            "n_truncated": 0,
            "truncated_excluded": False,
        },
    }


def _learned_metric_store(*, report: CorrelationReport, fit: dict[str, Any]) -> None:
    model = LearnedMetricModel.objects.create(
        dataset=report.dataset,
        report=report,
        feature_names=fit["names"],
        parameters=fit["model"].as_dict(),
        provenance=fit["provenance"],
        n_reviews=fit["provenance"]["n_reviews"],
        n_pairs=fit["provenance"]["n_pairs"],
    )
    report.results["learned_metric"]["stored_model_id"] = model.pk
    report.save(update_fields=["results"])


def report_export_record(
    *,
    report: CorrelationReport,
    table: str,
    fmt: str,
    channel: str,
    actor: User | None,
    rows: int,
    request: HttpRequest | None = None,
) -> None:
    """Audit one export (page download, API or command line) before any row leaves."""
    audit_record(
        action=AuditEvent.Action.EXPORT,
        actor=actor,
        request=request,
        obj=report,
        details={
            "report": report.pk,
            "dataset": report.dataset.name,
            "table": table,
            "format": fmt,
            "channel": channel,
            "rows": rows,
        },
    )


@transaction.atomic
def model_variant_set(
    *, dataset: Dataset, model_name: str, base_model: str, context_length: int | None
) -> ModelVariant:
    """Declare that ``model_name`` is ``base_model`` at ``context_length`` on ``dataset``."""
    variant, _ = ModelVariant.objects.update_or_create(
        dataset=dataset,
        model_name=model_name,
        defaults={"base_model": base_model, "context_length": context_length},
    )
    return variant


@transaction.atomic
def paper_model_names_set(
    *,
    dataset: Dataset,
    mapping: dict[str, str],
    actor: User | None,
    request: HttpRequest | None = None,
    channel: str = "page",
) -> list[str]:
    """Declare which of the MedAlign paper's models each of ``dataset``'s model names is
    (``mapping``: model name -> one of ``paper.PAPER_LABELS``; an empty label removes the
    declaration). All or nothing: an unknown model name or label raises ``ReportError`` naming
    it. Audited. Returns one line per change."""
    known = set(ModelResponse.objects.filter(instruction__dataset=dataset).values_list(
        "model_name", flat=True
    ))  # fmt: skip
    changes: list[str] = []
    for name, label in sorted(mapping.items()):
        name, label = name.strip(), label.strip()
        if name not in known:
            raise ReportError(f"{dataset.name} has no model named {name!r}")
        if label and label not in PAPER_LABELS:
            raise ReportError(
                f"the paper has no model {label!r}; its models are {', '.join(PAPER_LABELS)}"
            )
        if not label:
            deleted, _ = PaperModelName.objects.filter(dataset=dataset, model_name=name).delete()
            if deleted:
                changes.append(f"{name}: no longer mapped")
            continue
        PaperModelName.objects.update_or_create(
            dataset=dataset, model_name=name, defaults={"paper_label": label}
        )
        changes.append(f"{name} = {label}")
    if changes:
        audit_record(
            action=AuditEvent.Action.ADMIN_CHANGED,
            actor=actor,
            request=request,
            obj=dataset,
            details={"change": "paper model names", "channel": channel, "lines": changes},
        )
    return changes


API_TOKEN_PREFIX = "mar_"  # noqa: S105 - a label, not a secret


def api_token_create(*, user: User, name: str) -> tuple[ApiToken, str]:
    """A new read-only API token; returns it with the key, which is never stored or shown again."""
    key = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = timezone.now()
    token = ApiToken.objects.create(
        user=user,
        name=(name.strip() or "API token")[:100],
        prefix=key[:12],
        key_hash=hashlib.sha256(key.encode()).hexdigest(),
        created_at=now,
        expires_at=now + timedelta(days=settings.API_TOKEN_DAYS),
    )
    audit_record(
        action=AuditEvent.Action.API_TOKEN_CREATED,
        actor=user,
        obj=token,
        details={
            "name": token.name,
            "prefix": token.prefix,
            "expires_at": token.expires_at.isoformat() if token.expires_at else None,
        },
    )
    return token, key


def api_token_revoke(*, token: ApiToken, reason: str = "revoked by its owner") -> None:
    if token.revoked_at is None:
        revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_reason=reason[:100]
        )
        if revoked:
            audit_record(
                action=AuditEvent.Action.API_TOKEN_REVOKED,
                actor=token.user,
                obj=token,
                details={"prefix": token.prefix, "reason": reason},
            )


@transaction.atomic
def api_tokens_revoke_for_user(*, user: User, reason: str) -> int:
    """Revoke every live token of ``user`` (their access, roles or password changed): a token
    works only under the approval, roles and password it was made under."""
    tokens = list(ApiToken.objects.select_for_update().filter(user=user, revoked_at__isnull=True))
    for token in tokens:
        api_token_revoke(token=token, reason=reason)
    return len(tokens)


def api_token_touch(*, token: ApiToken) -> None:
    # One write a minute at most: an API client polling in a loop should not write every call.
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
