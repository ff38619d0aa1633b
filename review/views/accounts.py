"""Account, application, DUA and admin-queue views. Thin: forms validate, services write."""

import csv
import json
from collections.abc import Iterator
from datetime import date, timedelta

from allauth.core import ratelimit
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from medalign_site.uploads import upload_limit
from review.access import admin_required, user_access
from review.csv_safety import csv_safe_cell
from review.forms.accounts import (
    ApplicationForm,
    AuditFilterForm,
    DecisionForm,
    DUAPublishForm,
    DUASignForm,
    RevokeForm,
    RolesForm,
)
from review.models import AccessApplication, AuditEvent, DUAVersion
from review.selectors import accounts as selectors
from review.services import accounts as services
from review.services.audit import audit_record

Status = AccessApplication.Status


# --- applicant pages -----------------------------------------------------------------------------
@login_required
@require_GET
def application_status(request: HttpRequest) -> HttpResponse:
    """The applicant's page: where the application stands and what to do next."""
    application = selectors.application_latest_for_user(request.user)
    access = user_access(request.user)
    active_dua = selectors.dua_active()
    needs_dua = bool(
        active_dua
        and application
        and application.status == Status.APPROVED
        and selectors.dua_signature_for(request.user, active_dua) is None
    )
    return render(
        request,
        "review/accounts/status.html",
        {
            "application": application,
            "access": access,
            "can_apply": _can_apply(request),
            "can_resubmit": application is not None
            and application.status == Status.CHANGES_REQUESTED,
            "needs_dua": needs_dua,
            "needs_mfa_hint": _has_no_totp(request),
            "lone_admin_until": _lone_admin_until(request),
            "decision_days": settings.APPLICATION_DECISION_DAYS,
            "decision_expected_by": (
                application.submitted_at + timedelta(days=settings.APPLICATION_DECISION_DAYS)
                if application is not None and application.status == Status.PENDING
                else None
            ),
        },
    )


def _signed_in(request: HttpRequest) -> bool:
    """Who may send a training certificate: a signed-in account (an anonymous body is refused
    unread past Django's limit for form fields)."""
    return bool(request.user.is_authenticated)


@login_required
@require_http_methods(["GET", "POST"])
@upload_limit("MAX_UPLOAD_BYTES", allowed=_signed_in)
def application_apply(request: HttpRequest) -> HttpResponse:
    if not _can_apply(request):
        return redirect("application_status")
    dua = selectors.dua_active()
    if dua is None:
        messages.error(request, "No data use agreement is published yet; try again later.")
        return redirect("application_status")
    form = ApplicationForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.application_submit(
                user=request.user,
                details=form.details(),
                certificate=form.cleaned_data["certificate"],
                typed_name=form.cleaned_data["typed_name"],
                dua_version=dua,
                request=request,
            )
        except services.AccountsError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, "Application submitted. We will email you the decision.")
            return redirect("application_status")
    return render(
        request, "review/accounts/apply.html", {"form": form, "dua": dua, "resubmit": False}
    )


@login_required
@require_http_methods(["GET", "POST"])
@upload_limit("MAX_UPLOAD_BYTES", allowed=_signed_in)
def application_resubmit(request: HttpRequest) -> HttpResponse:
    application = selectors.application_open_for_user(request.user)
    if application is None or application.status != Status.CHANGES_REQUESTED:
        return redirect("application_status")
    dua = selectors.dua_active()
    if dua is None:
        return redirect("application_status")
    initial = {
        field: getattr(application, field)
        for field in (
            "full_name",
            "institution",
            "institutional_email",
            "requested_role",
            "specialty",
            "research_use",
            "certificate_completed_on",
            "certificate_expires_on",
            "storage_attestation",
        )
    }
    form = ApplicationForm(
        request.POST or None, request.FILES or None, initial=initial, certificate_required=False
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.application_resubmit(
                application=application,
                details=form.details(),
                certificate=form.cleaned_data.get("certificate"),
                typed_name=form.cleaned_data["typed_name"],
                dua_version=dua,
                request=request,
            )
        except services.AccountsError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, "Application resubmitted.")
            return redirect("application_status")
    return render(
        request,
        "review/accounts/apply.html",
        {"form": form, "dua": dua, "resubmit": True, "application": application},
    )


@login_required
@require_http_methods(["GET", "POST"])
def dua_sign(request: HttpRequest) -> HttpResponse:
    """Re-sign the agreement after a new version is published."""
    dua = selectors.dua_active()
    if dua is None or selectors.dua_signature_for(request.user, dua) is not None:
        if dua is not None:
            messages.info(request, f"You have signed version {dua.version} of the agreement.")
        return redirect("application_status")
    form = DUASignForm(request.POST or None, full_name=request.user.full_name)
    if request.method == "POST" and form.is_valid():
        try:
            services.dua_sign(
                user=request.user,
                version=dua,
                typed_name=form.cleaned_data["typed_name"],
                request=request,
            )
        except services.AccountsError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Thank you: version {dua.version} is signed.")
            return redirect("home")
    return render(request, "review/accounts/dua_sign.html", {"form": form, "dua": dua})


@login_required
@require_http_methods(["GET", "POST"])
def application_verify_email(request: HttpRequest, token: str) -> HttpResponse:
    """The link sent to the institutional email: GET asks to confirm (mail scanners follow
    links), POST confirms."""
    try:
        if request.method == "POST":
            services.application_email_verify(user=request.user, token=token, request=request)
            messages.success(request, "Thank you: your institutional email address is confirmed.")
            return redirect("application_status")
        application = services.application_email_link_check(user=request.user, token=token)
    except services.AccountsError as exc:
        return render(request, "review/accounts/verify_email.html", {"error": str(exc)}, status=400)
    return render(request, "review/accounts/verify_email.html", {"application": application})


@login_required
@require_POST
def application_email_resend(request: HttpRequest) -> HttpResponse:
    application = selectors.application_open_for_user(request.user)
    if application is None or application.institutional_email_verified_at is not None:
        return redirect("application_status")
    # One link per application every three minutes (allauth's "confirm_email" limit).
    if not ratelimit.consume(
        request, action="confirm_email", key=f"institutional-email-{application.pk}"
    ):
        messages.error(request, "A link was sent a moment ago: check that mailbox first.")
        return redirect("application_status")
    services.application_email_link_send(application=application, request=request)
    messages.success(request, f"A new link is on its way to {application.institutional_email}.")
    return redirect("application_status")


# --- admin: application queue --------------------------------------------------------------------
@admin_required
@require_GET
def admin_applications(request: HttpRequest) -> HttpResponse:
    """Every application by status, revoked and rejected ones included; ``?status=`` shows
    one status only."""
    statuses = dict(selectors.QUEUE_SECTIONS)
    status = request.GET.get("status", "")
    status = status if status in statuses else ""
    queue = selectors.applications_for_queue(status=status)
    return render(
        request,
        "review/accounts/admin_queue.html",
        {
            "sections": [(key, statuses[key], rows) for key, rows in queue.items()],
            "statuses": selectors.QUEUE_SECTIONS,
            "status": status,
            "lone_admin_until": _lone_admin_until(request),
        },
    )


@admin_required
@require_http_methods(["GET", "POST"])
def admin_application_detail(request: HttpRequest, application_id: int) -> HttpResponse:
    application = _application_or_404(application_id)
    form = DecisionForm(request.POST or None, requested_role=application.requested_role)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            if data["decision"] == DecisionForm.APPROVE:
                services.application_approve(
                    application=application,
                    reviewer=request.user,
                    roles=data["roles"],
                    expires_on=data["expires_on"],
                    request=request,
                )
            elif data["decision"] == DecisionForm.REJECT:
                services.application_reject(
                    application=application,
                    reviewer=request.user,
                    reason=data["reason"],
                    request=request,
                )
            else:
                services.application_request_changes(
                    application=application,
                    reviewer=request.user,
                    reason=data["reason"],
                    request=request,
                )
        except services.AccountsError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Decision recorded for {application.user.email}.")
            return redirect("admin_applications")
    return _render_detail(request, application, decision_form=form)


@admin_required
@require_POST
def admin_application_revoke(request: HttpRequest, application_id: int) -> HttpResponse:
    application = _application_or_404(application_id)
    form = RevokeForm(request.POST)
    if form.is_valid():
        try:
            services.application_revoke(
                application=application,
                reviewer=request.user,
                reason=form.cleaned_data["reason"],
                request=request,
            )
        except services.AccountsError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Access revoked for {application.user.email}.")
            return redirect("admin_applications")
    return _render_detail(request, application, revoke_form=form, status=400)


@admin_required
@require_POST
def admin_application_roles(request: HttpRequest, application_id: int) -> HttpResponse:
    application = _application_or_404(application_id)
    form = RolesForm(request.POST)
    if form.is_valid():
        try:
            services.application_set_roles(
                application=application,
                reviewer=request.user,
                roles=form.cleaned_data["roles"],
                expires_on=form.cleaned_data["expires_on"],
                request=request,
            )
        except services.AccountsError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Roles updated for {application.user.email}.")
            return redirect("admin_application_detail", application_id=application.pk)
    return _render_detail(request, application, roles_form=form, status=400)


@admin_required
@require_GET
def admin_application_certificate(request: HttpRequest, application_id: int) -> FileResponse:
    """Stream a training certificate from private storage; every view is audited."""
    application = _application_or_404(application_id)
    if not application.certificate:
        raise Http404
    try:
        handle = application.certificate.open("rb")
    except FileNotFoundError:
        raise Http404 from None
    # The hash of the bytes served goes in the audit event: approval needs a view of the file
    # on file now, not of one the applicant replaced since.
    services.certificate_view_record(
        application=application, sha256=services.certificate_sha256(handle), request=request
    )
    extension = {"application/pdf": "pdf", "image/png": "png", "image/jpeg": "jpg"}.get(
        application.certificate_content_type, "bin"
    )
    response = FileResponse(
        handle,
        content_type=application.certificate_content_type or "application/octet-stream",
        as_attachment=False,
        filename=f"certificate-{application.pk}.{extension}",
    )
    response["Cache-Control"] = "no-store, private"
    # An uploaded file is untrusted: if a browser ever renders it as a document (a PDF with
    # scripts), it runs sandboxed, in no origin, with nothing of this site's.
    response["Content-Security-Policy"] = "sandbox; default-src 'none'; object-src 'none'"
    return response


@admin_required
@require_http_methods(["GET", "POST"])
def admin_dua_publish(request: HttpRequest) -> HttpResponse:
    """Edit (from the current text), preview the difference, then publish on confirmation.

    A POST without ``action=publish`` (the "Preview" button) only shows the difference and
    the confirmation; publishing needs both the button and the ticked confirmation."""
    current = selectors.dua_active()
    current_text = current.text if current else ""
    form = DUAPublishForm(
        request.POST or None,
        initial={"text": current_text, "version": _next_version(current)},
        current_text=current_text,
    )
    action = request.POST.get("action", "")
    preview = request.method == "POST" and action != "edit" and form.is_valid()
    if preview and action == "publish":
        if not form.cleaned_data["confirm"]:
            form.add_error("confirm", "Tick this to publish: it suspends every user's access.")
        else:
            try:
                dua = services.dua_publish(
                    version=form.cleaned_data["version"],
                    title=form.cleaned_data["title"],
                    text=form.cleaned_data["text"],
                    actor=request.user,
                    request=request,
                )
            except services.AccountsError as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(
                    request,
                    f"Version {dua.version} published: every user must now sign it, you first.",
                )
                # The admin's own access is suspended too, until they sign.
                return redirect("dua_sign")
    diff = (
        selectors.dua_text_diff(current_text, form.cleaned_data["text"])
        if preview and "text" in form.cleaned_data
        else None
    )
    return render(
        request,
        "review/accounts/dua_publish.html",
        {
            "form": form,
            "current": current,
            "diff": diff,
            "preview": preview,
            "affected": selectors.users_with_access_count(),
        },
    )


def _next_version(current: DUAVersion | None) -> str:
    """A suggestion for the next label: "1.0" -> "1.1"; empty when the label is not numeric."""
    if current is None:
        return "1.0"
    major, _, minor = current.version.partition(".")
    if major.isdigit() and (minor.isdigit() or not minor):
        return f"{major}.{int(minor or 0) + 1}"
    return ""


# --- admin: audit log ----------------------------------------------------------------------------
AUDIT_PAGE_SIZE = 50
AUDIT_CSV_COLUMNS = (
    "created_at",
    "actor_email",
    "action",
    "object_type",
    "object_id",
    "person_id",
    "instruction_id",
    "ip_address",
    "user_agent",
    "details",
)


@admin_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET or None)
    events = selectors.audit_events(**form.filters())
    page = Paginator(events, AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "review/accounts/audit_log.html",
        {"form": form, "page": page, "query": query.urlencode()},
    )


@admin_required
@require_GET
def audit_log_csv(request: HttpRequest) -> StreamingHttpResponse:
    form = AuditFilterForm(request.GET or None)
    filters = form.filters()
    events = selectors.audit_events(**filters)
    # The export is itself audited, with the filters used, before any row leaves the server.
    audit_record(
        action=AuditEvent.Action.AUDIT_EXPORTED,
        request=request,
        details={k: str(v) for k, v in filters.items()},
    )
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response = StreamingHttpResponse(_csv_rows(events), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.csv"'
    response["Cache-Control"] = "no-store, private"
    return response


class _Echo:
    def write(self, value: str) -> str:
        return value


# Spreadsheet formula injection: user agents and emails are attacker-controlled.
_csv_cell = csv_safe_cell


def _csv_rows(events: QuerySet[AuditEvent]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(AUDIT_CSV_COLUMNS)
    for event in events.iterator(chunk_size=2000):
        row = []
        for column in AUDIT_CSV_COLUMNS:
            value = getattr(event, column)
            if column == "created_at":
                value = value.isoformat()
            elif column == "details":
                value = json.dumps(value, sort_keys=True)
            row.append(_csv_cell(value))
        yield writer.writerow(row)


# --- helpers -------------------------------------------------------------------------------------
def _application_or_404(application_id: int) -> AccessApplication:
    application = selectors.application_get(application_id=application_id)
    if application is None:
        raise Http404
    return application


def _render_detail(
    request: HttpRequest,
    application: AccessApplication,
    *,
    decision_form: DecisionForm | None = None,
    revoke_form: RevokeForm | None = None,
    roles_form: RolesForm | None = None,
    status: int = 200,
) -> HttpResponse:
    return render(
        request,
        "review/accounts/admin_detail.html",
        {
            "application": application,
            "history": selectors.applications_history_for_user(application.user).exclude(
                pk=application.pk
            ),
            "decision_form": decision_form
            or DecisionForm(requested_role=application.requested_role),
            "revoke_form": revoke_form or RevokeForm(),
            "roles_form": roles_form
            or RolesForm(
                initial={"roles": application.roles, "expires_on": application.expires_on}
            ),
            "access": user_access(application.user),
        },
        status=status if request.method == "POST" else 200,
    )


def _lone_admin_until(request: HttpRequest) -> date | None:
    """For an admin with no other current admin: the day their own access ends, by which a
    second admin must be approved (four eyes: nobody extends their own access). None else."""
    access = user_access(request.user)
    if not access.is_admin or access.application is None:
        return None
    if selectors.admins_current(exclude=request.user).exists():
        return None
    return access.application.access_ends_on()


def _can_apply(request: HttpRequest) -> bool:
    """A new application is possible when none is open and the user has no current access."""
    if selectors.application_open_for_user(request.user) is not None:
        return False
    access = user_access(request.user)
    if access.is_approved:
        return False
    # Approved but only missing the new DUA signature: re-signing, not re-applying, is the fix.
    return access.reason != "new DUA version not signed"


def _has_no_totp(request: HttpRequest) -> bool:
    from allauth.mfa.models import Authenticator

    return not Authenticator.objects.filter(
        user=request.user, type=Authenticator.Type.TOTP
    ).exists()
