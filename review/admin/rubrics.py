"""Admin for rubrics and criterion gradings: view only, every view audited. Rubrics change only
through review.services.rubrics (the app's rubric pages), gradings through
review.services.grading, so every transition is checked and audited there."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from review.models import Criterion, CriterionGrading, Rubric

from .audited import RecordReadOnlyAdmin


class CriterionInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Criterion
    fields = ("order", "points", "text", "tags")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Rubric)
class RubricAdmin(RecordReadOnlyAdmin):
    list_display = ("instruction", "version", "status", "author", "reviewer", "source")
    list_filter = ("status", "instruction__dataset")
    search_fields = ("=instruction__instruction_id", "=external_id")
    list_select_related = ("instruction__dataset", "author", "reviewer")
    inlines = (CriterionInline,)


@admin.register(CriterionGrading)
class CriterionGradingAdmin(RecordReadOnlyAdmin):
    list_display = ("instruction", "rubric", "clinician", "status", "submitted_at")
    list_filter = ("status", "instruction__dataset")
    search_fields = ("=instruction__instruction_id", "clinician__email")
    list_select_related = ("instruction__dataset", "rubric__instruction", "clinician")
