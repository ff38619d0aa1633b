"""Admin for accounts, DUA versions, applications and the audit trail.

No business logic here: status changes go through review.services.accounts (admin actions call
them), DUA versions are published from the app (or ``dua_publish``), and the audit trail is
read-only for everyone, superusers included.
"""

from datetime import timedelta
from typing import Any

from allauth.account.models import EmailAddress, EmailConfirmation
from allauth.mfa.models import Authenticator
from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from review.models import (
    AccessApplication,
    AuditEvent,
    DUASignature,
    DUAVersion,
    RejectedEmailDomain,
    Role,
    User,
)
from review.services import accounts as services
from review.services.audit import audit_record

from .audited import AuditedAdmin

# allauth registers admins that show every TOTP secret and recovery seed, and let an admin
# change an email address and mark it verified (with a password reset, a way to take over an
# account). Replaced below: factors are listed without their data and can only be removed
# (audited: a user who lost their phone sets TOTP up again); addresses are read-only.
for _model in (Authenticator, EmailAddress, EmailConfirmation):
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)


@admin.register(Authenticator)
class AuthenticatorAdmin(AuditedAdmin):
    list_display = ("user", "type", "created_at", "last_used_at")
    list_filter = ("type",)
    search_fields = ("user__email",)
    list_select_related = ("user",)
    fields = ("user", "type", "created_at", "last_used_at")  # never ``data``
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Authenticator | None = None) -> bool:
        return False

    def log_deletions(self, request: HttpRequest, queryset: QuerySet) -> Any:
        for authenticator in queryset:
            audit_record(
                action=AuditEvent.Action.MFA_CHANGED,
                request=request,
                obj=authenticator,
                details={
                    "change": "removed by an admin",
                    "type": authenticator.type,
                    "user": authenticator.user.email,
                },
            )
        return super().log_deletions(request, queryset)


@admin.register(EmailAddress)
class EmailAddressAdmin(AuditedAdmin):
    list_display = ("email", "user", "primary", "verified")
    list_filter = ("primary", "verified")
    search_fields = ("email", "user__email")
    list_select_related = ("user",)
    readonly_fields = ("user", "email", "verified", "primary")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: EmailAddress | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: EmailAddress | None = None) -> bool:
        return False


@admin.register(User)
class UserAdmin(AuditedAdmin):
    list_display = ("email", "full_name", "pseudonym", "is_active", "is_staff", "date_joined")
    list_filter = ("is_active", "is_staff")
    search_fields = ("email", "full_name", "=pseudonym")
    # Roles and staff status follow the user's approved application; passwords go through
    # allauth's reset flow. Only deactivating an account is done here.
    fields = (
        "email",
        "full_name",
        "pseudonym",
        "is_active",
        "is_staff",
        "date_joined",
        "last_login",
    )
    readonly_fields = ("email", "pseudonym", "is_staff", "date_joined", "last_login")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        return False  # users are referenced by the audit trail and by reviews


@admin.register(RejectedEmailDomain)
class RejectedEmailDomainAdmin(AuditedAdmin):
    list_display = ("domain", "note")
    search_fields = ("domain",)


@admin.register(DUAVersion)
class DUAVersionAdmin(admin.ModelAdmin):
    list_display = ("version", "title", "is_active", "published_at", "signature_count")
    readonly_fields = ("version", "title", "text", "is_active", "published_at", "created_at")

    # Publishing deactivates the old version and must be audited: done by the service, from the
    # app's "Publish a new DUA version" page.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: DUAVersion | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: DUAVersion | None = None) -> bool:
        return False

    @admin.display(description="Signatures")
    def signature_count(self, obj: DUAVersion) -> int:
        return obj.signatures.count()


@admin.register(DUASignature)
class DUASignatureAdmin(admin.ModelAdmin):
    list_display = ("user", "dua_version", "typed_name", "signed_at", "ip_address")
    list_filter = ("dua_version",)
    search_fields = ("user__email", "typed_name")
    list_select_related = ("user", "dua_version")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: DUASignature | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: DUASignature | None = None) -> bool:
        return False


class ApproveForm(forms.Form):
    roles = forms.MultipleChoiceField(choices=Role.choices, widget=forms.CheckboxSelectMultiple)
    expires_on = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}))


class ReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))


@admin.register(AccessApplication)
class AccessApplicationAdmin(admin.ModelAdmin):
    list_display = (
        "user",
        "institution",
        "requested_role",
        "status",
        "submitted_at",
        "roles_display",
        "expires_on",
        "certificate_expires_on",
    )
    list_filter = (
        "status",
        "requested_role",
        "is_clinician",
        "is_researcher",
        "is_admin",
        "is_adjudicator",
    )
    search_fields = ("user__email", "full_name", "institution", "institutional_email")
    date_hierarchy = "submitted_at"
    list_select_related = ("user", "reviewer")
    actions = ("approve", "reject", "request_changes", "revoke")
    # The certificate appears only as the audited view's link: as a field, the admin would link
    # the storage's URL (none for a bucket; a 404 on local disk) and bypass the audit.
    readonly_fields = [
        f.name for f in AccessApplication._meta.fields if f.name != "certificate"
    ] + ["certificate_link"]
    exclude = ("certificate",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: AccessApplication | None = None
    ) -> bool:
        return False

    @admin.display(description="Roles")
    def roles_display(self, obj: AccessApplication) -> str:
        return ", ".join(obj.roles) or "—"

    @admin.display(description="Certificate")
    def certificate_link(self, obj: AccessApplication) -> str:
        url = reverse("admin_application_certificate", kwargs={"application_id": obj.pk})
        return format_html('<a href="{}">View certificate (audited)</a>', url)

    # --- actions: each one asks for its input on an intermediate page, then calls a service ----
    @admin.action(description="Approve selected applications…")
    def approve(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        if "apply" not in request.POST:
            form = ApproveForm(initial={"expires_on": timezone.localdate() + timedelta(days=365)})
            return self._intermediate(request, queryset, form, "Approve")
        form = ApproveForm(request.POST)
        if not form.is_valid():
            return self._intermediate(request, queryset, form, "Approve")
        self._run(
            request,
            queryset,
            lambda app: services.application_approve(
                application=app,
                reviewer=request.user,
                roles=form.cleaned_data["roles"],
                expires_on=form.cleaned_data["expires_on"],
                request=request,
            ),
        )
        return None

    @admin.action(description="Reject selected applications…")
    def reject(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        return self._with_reason(request, queryset, "Reject", services.application_reject)

    @admin.action(description="Request changes to selected applications…")
    def request_changes(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        return self._with_reason(
            request, queryset, "Request changes", services.application_request_changes
        )

    @admin.action(description="Revoke selected approvals…")
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        return self._with_reason(request, queryset, "Revoke", services.application_revoke)

    def _with_reason(
        self, request: HttpRequest, queryset: QuerySet, title: str, service
    ) -> HttpResponse | None:
        form = ReasonForm(request.POST if "apply" in request.POST else None)
        if not form.is_bound or not form.is_valid():
            return self._intermediate(request, queryset, form, title)
        self._run(
            request,
            queryset,
            lambda app: service(
                application=app,
                reviewer=request.user,
                reason=form.cleaned_data["reason"],
                request=request,
            ),
        )
        return None

    def _intermediate(
        self, request: HttpRequest, queryset: QuerySet, form: forms.Form, title: str
    ) -> HttpResponse:
        return render(
            request,
            "admin/review/accessapplication/action_form.html",
            {
                **self.admin_site.each_context(request),
                "title": f"{title}: {queryset.count()} application(s)",
                "queryset": queryset.select_related("user"),
                "form": form,
                "action": request.POST.get("action"),
                "opts": self.model._meta,
            },
        )

    def _run(self, request: HttpRequest, queryset: QuerySet, call) -> None:
        done = 0
        for application in queryset.select_related("user"):
            try:
                call(application)
                done += 1
            except services.AccountsError as exc:
                self.message_user(request, f"{application.user}: {exc}", messages.ERROR)
        if done:
            self.message_user(request, f"{done} application(s) updated.", messages.SUCCESS)


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only for everyone: no add, change or delete, superusers included."""

    list_display = (
        "created_at",
        "actor_email",
        "action",
        "object_label",
        "person_id",
        "ip_address",
    )
    list_filter = ("action", ("created_at", admin.DateFieldListFilter))
    search_fields = ("actor_email", "=person_id", "=object_id", "=instruction_id")
    date_hierarchy = "created_at"
    show_full_result_count = False
    actions = None

    def get_readonly_fields(self, request: HttpRequest, obj: AuditEvent | None = None) -> list:
        return [f.name for f in self.model._meta.fields]

    @admin.display(description="Object")
    def object_label(self, obj: AuditEvent) -> str:
        return obj.object_label

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False
