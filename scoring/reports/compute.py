"""A report's computation: the reviews and scores read, every section computed, results and
provenance stored. The Celery task (``scoring.reports.tasks``) calls ``report_compute``; a
failure is kept on the report with a reason written for researchers."""

import dataclasses
import logging
import platform
import time
from typing import Any

import django
import numpy
import scipy
from django.db import transaction
from django.utils import timezone
from numpy.typing import NDArray

from medalign_site.logs import redact_exception
from review.models import ModelResponse, Study
from review.selectors.studies import response_set_summary, study_current, study_masking_counts
from scoring.generation.provenance import add_generation_columns
from scoring.models import CorrelationReport, LearnedMetricModel
from scoring.reports import analysis, learned, prediction, truth
from scoring.reports import statistics as st
from scoring.reports.analysis import (
    clean,
    compute_results,
    prediction_powered_results,
    response_rows,
)
from scoring.reports.analysis import metric_provenance as analysis_provenance
from scoring.reports.errors import ReportError
from scoring.reports.parameters import SOURCE_LABELS
from scoring.reports.release_judgements import release_inputs
from scoring.reports.rubric_scores import CLINICIANS_KEY, rubric_section
from scoring.reports.selectors import (
    learned_texts,
    report_inputs,
    response_style,
    study_learned_texts,
    study_responses,
)
from scoring.weights import file_sha256

logger = logging.getLogger(__name__)


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
        boot: dict[str, Any] = {
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
        # response set (scoring.reports.rubric_scores); None when nothing of it was graded.
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
        masked, near = study_masking_counts(study)
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
                # What masking finds in the set's texts now (any name of the dataset, a
                # family or a maker), and the responses whose near misses await an admin.
                "responses_masked": masked,
                "responses_near_misses": near,
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
) -> tuple[NDArray[numpy.float64], NDArray[numpy.float64], NDArray[numpy.float64]]:
    """The learned metric cross-fitted on every response of the study: each fold model of the
    report's first split (fitted without that fold's patients), applied to every response.
    Returns the mean over fold models, the ``(responses, K)`` fold scores, and each response's
    own fold (-1 for an instruction no clinician reviewed)."""

    questions, texts, references = study_learned_texts(
        response_ids=responses.response_ids, instruction_ids=responses.instruction_ids
    )
    index = dict(fit["embedding_index"])
    new = sorted({*questions, *texts, *references} - set(index))
    emb = fit["embeddings"]
    if new:
        emb = numpy.vstack([emb, learned.embed_texts(new)])
        index.update({t: len(index) + k for k, t in enumerate(new)})

    def rows(values: list[str]) -> NDArray[numpy.float64]:
        out: NDArray[numpy.float64] = emb[[index[t] for t in values]]
        return out

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

    release = release_inputs(dataset=report.dataset, study=study)
    if len(release.table) == 0:
        return None
    keys, _ = st.choose_clusters(
        numpy.asarray(release.instruction_code),
        numpy.asarray(release.patient),
        str(params.get("cluster", "auto")),
    )
    boot: dict[str, Any] = {
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
    compared: dict[str, Any] = clean(
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
    return compared


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

    started = time.perf_counter()
    questions, responses, references = learned_texts(table=inputs.table)
    unique = sorted(set(questions) | set(responses) | set(references))
    index = {text: k for k, text in enumerate(unique)}
    emb = learned.embed_texts(unique)

    def rows(texts: list[str]) -> NDArray[numpy.float64]:
        out: NDArray[numpy.float64] = emb[[index[t] for t in texts]]
        return out

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
