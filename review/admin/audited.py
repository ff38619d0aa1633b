"""Audit for the Django admin: every change, and every read of patient data.

``AuditedAdmin`` writes an ADMIN_CHANGED audit event next to Django's own LogEntry for every
addition, change and deletion (LogEntry can be edited by a superuser; the audit trail cannot).
``AuditedReadsAdmin`` audits every list, object, history and delete-confirmation page an admin
opens (reviews: their comments are about a patient's record). ``RecordReadOnlyAdmin`` is for
patient data (records, instructions, reference and model responses, rubrics and gradings):
read-only for everyone (corrections go through the import with ``--replace``, which invalidates
the scores of changed text), and every page of it an admin opens writes an ADMIN_VIEWED event
naming the patient where there is one.
"""

from typing import Any

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse

from review.models import AuditEvent
from review.services.audit import audit_record


def _person_id(obj: Any) -> str:
    for path in (
        "person_id",
        "patient.person_id",
        "instruction.person_id",
        "assignment.instruction.person_id",
    ):
        value: Any = obj
        for part in path.split("."):
            value = getattr(value, part, None)
            if value is None:
                break
        if isinstance(value, str):
            return value
    return ""


def _instruction_id(obj: Any) -> str:
    for path in (
        "instruction_id",
        "instruction.instruction_id",
        "assignment.instruction.instruction_id",
    ):
        value: Any = obj
        for part in path.split("."):
            value = getattr(value, part, None)
            if value is None:
                break
        if isinstance(value, str):
            return value
    return ""


class AuditedAdmin(admin.ModelAdmin):
    def _audit_change(self, request: HttpRequest, obj: Model, change: str, message: Any) -> None:
        audit_record(
            action=AuditEvent.Action.ADMIN_CHANGED,
            request=request,
            obj=obj,
            person_id=_person_id(obj),
            details={
                "model": obj._meta.label,
                "change": change,
                # Django's change message names the fields changed, never their values.
                "fields": message if isinstance(message, list) else str(message)[:500],
            },
        )

    def log_addition(self, request: HttpRequest, obj: Model, message: Any) -> Any:
        self._audit_change(request, obj, "added", message)
        return super().log_addition(request, obj, message)

    def log_change(self, request: HttpRequest, obj: Model, message: Any) -> Any:
        self._audit_change(request, obj, "changed", message)
        return super().log_change(request, obj, message)

    def log_deletions(self, request: HttpRequest, queryset: QuerySet) -> Any:
        for obj in queryset:
            self._audit_change(request, obj, "deleted", "")
        return super().log_deletions(request, queryset)


class AuditedReadsAdmin(AuditedAdmin):
    """Every page of an object an admin opens (the list, the object, its history, the delete
    confirmation) writes an ADMIN_VIEWED event (patient data, and clinicians' reviews with
    their comments)."""

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        if response.status_code == 200:
            audit_record(
                action=AuditEvent.Action.ADMIN_VIEWED,
                request=request,
                details={
                    "model": self.model._meta.label,
                    "page": "list",
                    # Filters and search name what was looked for (ids, codes), not record text.
                    "query": request.GET.urlencode()[:500],
                },
            )
        return response

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        response = super().change_view(request, object_id, form_url, extra_context)
        if response.status_code == 200:
            obj = self.get_object(request, object_id)
            audit_record(
                action=AuditEvent.Action.ADMIN_VIEWED,
                request=request,
                obj=obj,
                person_id=_person_id(obj),
                instruction_id=_instruction_id(obj),
                details={"model": self.model._meta.label, "page": "object"},
            )
        return response

    def _audit_object_page(
        self, request: HttpRequest, object_id: str, response: HttpResponse, page: str
    ) -> None:
        if response.status_code != 200:
            return  # refused (403), missing (redirect), or a POST that changed something
        obj = self.get_object(request, object_id)
        audit_record(
            action=AuditEvent.Action.ADMIN_VIEWED,
            request=request,
            obj=obj,
            person_id=_person_id(obj) if obj is not None else "",
            instruction_id=_instruction_id(obj) if obj is not None else "",
            details={"model": self.model._meta.label, "page": page},
        )

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # Its title is the object's name: an event's type, code and time.
        response = super().history_view(request, object_id, extra_context)
        self._audit_object_page(request, object_id, response, "history")
        return response

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # The confirmation lists the object and everything that would go with it.
        response = super().delete_view(request, object_id, extra_context)
        if request.method != "POST":
            self._audit_object_page(request, object_id, response, "delete confirmation")
        return response


class RecordReadOnlyAdmin(AuditedReadsAdmin):
    """Patient data: view only, and every view audited."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(admin.StackedInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
