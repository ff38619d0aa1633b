"""Every write the reports make: correlation reports and their exports, model variants, API
tokens. Metric configurations are written in ``scoring.runs.metric_configs``, runs in
``scoring.runs``."""

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
from review.models import AuditEvent, Dataset, ModelResponse, User
from review.services.audit import audit_record
from scoring.generation.provenance import add_generation_columns
from scoring.models import (
    ApiToken,
    CorrelationReport,
    LearnedMetricModel,
    ModelVariant,
)
from scoring.reports import learned

logger = logging.getLogger(__name__)

# --- correlation reports -----------------------------------------------------------------------


REPORT_MAX_RESAMPLES = 100_000
REPORT_TABLES = ("correlation", "leaderboard", "responses", "metrics")


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
) -> dict[str, Any]:
    if not 1 <= int(n_resamples) <= REPORT_MAX_RESAMPLES:
        raise ReportError(f"resamples must be between 1 and {REPORT_MAX_RESAMPLES:,}")
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
) -> CorrelationReport:
    """A pending report; its computation is queued once the row is committed.

    ``exclude_truncated``: leave out every score whose metric model cut the text.
    ``learned_metric``: add the metric learned from the clinicians' rankings (cross-validated
    by instruction; ``scoring.reports.learned``) as one more row of the correlation table.
    """
    parameters = _report_parameters(
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        config_ids=config_ids,
        exclude_truncated=exclude_truncated,
        learned_metric=learned_metric,
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
    from scoring.reports.selectors import report_inputs

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
        inputs = report_inputs(
            dataset=report.dataset,
            config_ids=params.get("config_ids"),
            exclude_truncated=bool(params.get("exclude_truncated", False)),
        )
        if len(inputs.table) == 0:
            raise ReportError(
                "no submitted reviews to analyse on this dataset yet (reviews marked "
                "'cannot assess' are left out)"
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
        scores = dict(inputs.scores)
        learned_fit = None
        if params.get("learned_metric"):
            learned_fit = _learned_metric_fit(inputs)
            scores[learned.LEARNED_KEY] = learned_fit["oof"]
            labels[learned.LEARNED_KEY] = learned.LEARNED_LABEL
            metric_provenance.append(learned_fit["provenance_row"])
        results = compute_results(inputs.table, scores, params, labels, variants=inputs.variants)
        results["learned_metric"] = learned_fit["info"] if learned_fit else None
        results["metric_provenance"] = metric_provenance
        results["responses"] = response_rows(
            inputs.table,
            scores,
            clinician_pseudonym=inputs.clinician_pseudonym,
            instruction_code=inputs.instruction_code,
            error_tags=inputs.error_tags,
            simulated_review_ids=inputs.simulated_review_ids,
            truncated=inputs.truncated,
        )
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
            "metric_configs": inputs.metrics,
            "model_variants": {
                name: {"base_model": base, "context_length": length}
                for name, (base, length) in sorted(inputs.variants.items())
            },
            "review_ids": inputs.review_ids,
            "simulated_review_ids": inputs.simulated_review_ids,
            "counts": {
                **results["counts"],
                "reviews_real": len(inputs.review_ids) - n_simulated,
                "reviews_simulated": n_simulated,
                "reviews_cannot_assess_excluded": inputs.n_cannot_assess,
                # Responses that named a model were shown to clinicians with those words masked.
                "responses_masked": ModelResponse.objects.filter(
                    instruction__dataset=report.dataset, names_own_model=True
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


def _learned_metric_fit(inputs: Any) -> dict[str, Any]:
    """Cross-validated scores of the learned metric, and the model fitted on every review."""
    from scoring.metrics.base import file_sha256
    from scoring.reports.selectors import learned_texts

    started = time.perf_counter()
    questions, responses, references = learned_texts(table=inputs.table)
    unique = sorted(set(questions) | set(responses) | set(references))
    index = {text: k for k, text in enumerate(unique)}
    emb = learned.embed_texts(unique)

    def rows(texts: list[str]) -> numpy.ndarray:
        return emb[[index[t] for t in texts]]

    features, names = learned.build_features(
        inputs.scores,
        numpy.array([len(t.split()) for t in responses], dtype=float),
        rows(questions),
        rows(responses),
        rows(references),
    )
    embed_s = time.perf_counter() - started
    oof, info = learned.cross_validated_scores(inputs.table, features)
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
    info = {
        **info,
        "folds": [{k: v for k, v in f.items() if k != "test_instructions"} for f in info["folds"]],
        "n_reviews_final_model": info["n_reviews"],
        "n_pairs_final_model": n_pairs,
        "embedding_seconds": embed_s,
        "final_fit_seconds": time.perf_counter() - started,
        "feature_names": names[:8] + ([f"... {len(names) - 8} more"] if len(names) > 8 else []),
    }
    return {
        "oof": oof,
        "info": info,
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
    works only under the approval, roles and password it was made under (issue 24)."""
    tokens = list(ApiToken.objects.select_for_update().filter(user=user, revoked_at__isnull=True))
    for token in tokens:
        api_token_revoke(token=token, reason=reason)
    return len(tokens)


def api_token_touch(*, token: ApiToken) -> None:
    # One write a minute at most: an API client polling in a loop should not write every call.
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
