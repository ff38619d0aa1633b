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

import re
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.options import IS_FACETS_VAR, IS_POPUP_VAR, TO_FIELD_VAR
from django.contrib.admin.views.main import (
    ALL_VAR,
    ERROR_FLAG,
    ORDER_VAR,
    PAGE_VAR,
    SEARCH_VAR,
)
from django.core.exceptions import FieldDoesNotExist
from django.db.models import Field, Model, QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict

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


# The change list's own parameters (ordering, page, show all, popup, facets): field numbers and
# names, never text from a record.
_LIST_VARS = {ORDER_VAR, PAGE_VAR, ALL_VAR, ERROR_FLAG, IS_POPUP_VAR, TO_FIELD_VAR, IS_FACETS_VAR}
_LIST_VALUE = re.compile(r"[\w.,-]{0,60}")
# Filter values that cannot quote a record: numbers (ids, booleans as 0/1), True/False, dates.
_PLAIN_VALUE = re.compile(
    r"-?\d{1,19}|True|False|\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)?"
    r"(?:[+-]\d{2}:?\d{2}|Z)?"
)


def _filtered_field(model: type[Model], lookup: str) -> "Field[Any, Any] | None":
    """The field a filter parameter (``assignment__instruction__dataset__id__exact``) ends on."""
    field: Field[Any, Any] | None = None
    current: type[Model] | None = model
    for part in lookup.split("__"):
        if current is None:
            break
        try:
            found = current._meta.get_field(part)
        except FieldDoesNotExist:
            break  # a lookup (exact, gte, isnull…): the field is the one before it
        if not isinstance(found, Field):
            break
        field = found
        current = found.related_model if found.is_relation else None  # type: ignore[assignment]
    return field


def _is_plain(model: type[Model], key: str, value: str) -> bool:
    if key in _LIST_VARS:
        return _LIST_VALUE.fullmatch(value) is not None
    if _PLAIN_VALUE.fullmatch(value):
        return True
    # A value from a vocabulary the code fixes (a review's status), not one an import brings.
    field = _filtered_field(model, key)
    if field is None or not field.choices:
        return False
    return value in {str(k) for k, _ in field.flatchoices}


def audited_query(model: type[Model], params: QueryDict) -> dict[str, Any]:
    """What an audit row keeps of a change list's address: the search's length, never its
    words, as for the clinicians' record search (a term can quote a patient's record, and the
    audit log is exported); filters and list parameters whose values cannot carry record text
    as they are; any other filter value by its length only."""
    kept: list[tuple[str, str]] = []
    withheld: dict[str, int] = {}
    details: dict[str, Any] = {}
    for key, values in params.lists():
        for value in values:
            if key == SEARCH_VAR:
                details["search_length"] = details.get("search_length", 0) + len(value)
            elif _is_plain(model, key, value):
                kept.append((key, value))
            else:
                withheld[key] = withheld.get(key, 0) + len(value)
    details["query"] = urlencode(kept)[:500]
    if withheld:
        details["withheld"] = withheld
    return details


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
                    **audited_query(self.model, request.GET),
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
