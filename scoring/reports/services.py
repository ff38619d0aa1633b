"""Every write the reports make: correlation reports and their exports, model variants, API
tokens. Metric configurations are written in ``scoring.runs.metric_configs``, runs in
``scoring.runs``."""

import hashlib
import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from review.models import AuditEvent, Dataset, ModelResponse, Study, User
from review.selectors.studies import study_latest_reviewed
from review.services.audit import audit_record
from scoring.models import (
    ApiToken,
    CorrelationReport,
    ModelVariant,
    PaperModelName,
)
from scoring.reports import statistics as st
from scoring.reports import truth
from scoring.reports.errors import ReportError
from scoring.reports.paper import PAPER_LABELS
from scoring.reports.parameters import report_parameters
from scoring.reports.tasks import compute_report

logger = logging.getLogger(__name__)

# --- correlation reports -----------------------------------------------------------------------


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
    parameters = report_parameters(
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
