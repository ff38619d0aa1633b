"""Django admin for datasets and records. Accounts, audit and assignments are added by their
features below; the audit trail is read-only for everyone."""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from review.models import (
    Dataset,
    Encounter,
    Event,
    Instruction,
    ModelResponse,
    Patient,
    ReferenceResponse,
    TaxonomyEntry,
)


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ("name", "is_synthetic", "show_references_to_clinicians", "updated_at")
    list_editable = ("show_references_to_clinicians",)
    search_fields = ("name",)


@admin.register(Patient)
class PatientAdmin(admin.ModelAdmin):
    list_display = (
        "person_id",
        "dataset",
        "source_format",
        "event_count",
        "note_count",
        "first_event_at",
        "last_event_at",
    )
    list_filter = ("dataset", "source_format", "gender")
    search_fields = ("person_id",)
    readonly_fields = ("event_count", "note_count", "first_event_at", "last_event_at")
    list_select_related = ("dataset",)


@admin.register(Encounter)
class EncounterAdmin(admin.ModelAdmin):
    list_display = ("patient", "ordinal", "encounter_type", "start", "end", "event_count")
    list_filter = ("encounter_type",)
    search_fields = ("patient__person_id",)
    raw_id_fields = ("patient",)
    list_select_related = ("patient__dataset",)


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    # Records reach 100,000+ events: no counts of the whole table, raw id widgets, no date tree.
    list_display = ("patient", "timestamp", "event_type", "code", "name", "value", "unit")
    list_filter = ("event_type",)
    search_fields = ("=patient__person_id", "code")
    raw_id_fields = ("patient", "encounter")
    show_full_result_count = False
    list_select_related = ("patient__dataset",)


class ReferenceInline(admin.StackedInline):
    model = ReferenceResponse
    extra = 0


class ResponseInline(admin.StackedInline):
    model = ModelResponse
    extra = 0
    fields = ("model_name", "text", "context_length", "truncation_policy", "names_own_model")


@admin.register(Instruction)
class InstructionAdmin(admin.ModelAdmin):
    list_display = (
        "instruction_id",
        "dataset",
        "category",
        "subcategory",
        "specialty",
        "person_id",
        "is_applicable",
        "is_sufficient",
    )
    list_filter = ("dataset", "category", "specialty", "is_applicable", "is_sufficient")
    search_fields = ("=instruction_id", "question", "=person_id")
    raw_id_fields = ("patient",)
    inlines = (ReferenceInline, ResponseInline)
    list_select_related = ("dataset",)


@admin.register(ModelResponse)
class ModelResponseAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "instruction",
        "model_name",
        "context_length",
        "truncation_policy",
        "names_own_model",
        "release_binary_correct",
    )
    list_filter = ("model_name", "names_own_model", "instruction__dataset")
    search_fields = ("=instruction__instruction_id", "model_name")
    raw_id_fields = ("instruction",)
    list_select_related = ("instruction__dataset",)

    @admin.action(description="Clear the 'names its model' flag (checked by an admin)")
    def clear_flag(self, request: HttpRequest, queryset: QuerySet[ModelResponse]) -> None:
        queryset.update(names_own_model=False)

    actions = ("clear_flag",)


@admin.register(ReferenceResponse)
class ReferenceResponseAdmin(admin.ModelAdmin):
    list_display = ("instruction", "annotator")
    search_fields = ("=instruction__instruction_id",)
    raw_id_fields = ("instruction",)
    list_select_related = ("instruction__dataset",)


@admin.register(TaxonomyEntry)
class TaxonomyEntryAdmin(admin.ModelAdmin):
    list_display = ("category", "subcategory", "dataset")
    list_filter = ("dataset", "category")
