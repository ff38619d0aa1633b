"""Django admin for datasets and records. Accounts, audit and assignments are added by their
features below; the audit trail is read-only for everyone.

Patient data (patients, encounters, events, instructions, reference and model responses) is
read-only here and every page of it is audited (review.admin.audited): a correction goes through
the import with ``--replace``, which invalidates the scores of changed text.
"""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from review.blinding import model_name_hits
from review.models import (
    AuditEvent,
    Dataset,
    Encounter,
    Event,
    Instruction,
    ModelResponse,
    Patient,
    ReferenceResponse,
    SamplingDraw,
    Study,
    TaxonomyEntry,
)
from review.selectors.datasets import dataset_contents, dataset_model_names
from review.services.audit import audit_record

from .audited import AuditedAdmin, ReadOnlyInline, RecordReadOnlyAdmin


@admin.register(Dataset)
class DatasetAdmin(AuditedAdmin):
    """Datasets are imported by command and deleted by command (``delete_dataset``): Django's
    delete confirmation walks every object a dataset holds (a minute on the demo's 61,000
    rows), so deletion is not offered here; the change page shows the counts instead."""

    list_display = ("name", "is_synthetic", "show_references_to_clinicians", "updated_at")
    list_editable = ("show_references_to_clinicians",)
    search_fields = ("name",)
    readonly_fields = ("contents",)

    def has_delete_permission(self, request: HttpRequest, obj: Dataset | None = None) -> bool:
        return False

    @admin.display(description="Contents")
    def contents(self, obj: Dataset) -> str:
        if obj.pk is None:
            return "-"
        counts = dataset_contents(obj)
        return (
            ", ".join(f"{count:,} {kind}" for kind, count in counts.items())
            + f". To delete it: manage.py delete_dataset {obj.name} --yes"
            + (" --with-reviews" if counts["reviews"] else "")
        )


@admin.register(Patient)
class PatientAdmin(RecordReadOnlyAdmin):
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
    readonly_fields = (
        "event_count",
        "note_count",
        "first_event_at",
        "last_event_at",
        "undescribed_event_count",
    )
    list_select_related = ("dataset",)


@admin.register(Encounter)
class EncounterAdmin(RecordReadOnlyAdmin):
    list_display = ("patient", "ordinal", "encounter_type", "start", "end", "event_count")
    list_filter = ("encounter_type",)
    search_fields = ("patient__person_id",)
    raw_id_fields = ("patient",)
    list_select_related = ("patient__dataset",)


@admin.register(Event)
class EventAdmin(RecordReadOnlyAdmin):
    # Records reach 100,000+ events: no counts of the whole table, raw id widgets, no date tree.
    list_display = ("patient", "timestamp", "event_type", "code", "name", "value", "unit")
    list_filter = ("event_type",)
    search_fields = ("=patient__person_id", "code")
    raw_id_fields = ("patient", "encounter")
    show_full_result_count = False
    list_select_related = ("patient__dataset",)


class ReferenceInline(ReadOnlyInline):
    model = ReferenceResponse


class ResponseInline(ReadOnlyInline):
    model = ModelResponse
    fields = (
        "model_name",
        "text",
        "context_length",
        "truncation_policy",
        "names_own_model",
        "retired_at",
    )


@admin.register(Instruction)
class InstructionAdmin(RecordReadOnlyAdmin):
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
class ModelResponseAdmin(RecordReadOnlyAdmin):
    list_display = (
        "id",
        "instruction",
        "model_name",
        "context_length",
        "truncation_policy",
        "names_own_model",
        "masked_words",
        "mask_checked_at",
        "retired_at",
        "release_binary_correct",
    )
    list_filter = ("model_name", "names_own_model", "instruction__dataset")
    search_fields = ("=instruction__instruction_id", "model_name")
    raw_id_fields = ("instruction",)
    list_select_related = ("instruction__dataset",)

    @admin.display(description="masked for clinicians")
    def masked_words(self, obj: ModelResponse) -> str:
        # The heuristic's hits as written, for the admin to confirm; every response is masked
        # the same way when a clinician sees it: against every model name of the dataset
        # (review.selectors.reviews.masking_names), read once per process and dataset.
        names = (*dataset_model_names(obj.instruction.dataset_id), obj.model_name)
        hits = model_name_hits(obj.text, names) if obj.names_own_model else []
        return ", ".join(dict.fromkeys(hits)) or "—"

    @admin.action(description="Confirm the masking of these responses was checked")
    def confirm_masking(self, request: HttpRequest, queryset: QuerySet[ModelResponse]) -> None:
        ids = list(queryset.values_list("pk", flat=True))
        ModelResponse.objects.filter(pk__in=ids).update(
            mask_checked_by=request.user, mask_checked_at=timezone.now()
        )
        audit_record(
            action=AuditEvent.Action.ADMIN_CHANGED,
            request=request,
            details={"model": "review.ModelResponse", "change": "masking checked", "ids": ids},
        )

    actions = ("confirm_masking",)


@admin.register(Study)
class StudyAdmin(RecordReadOnlyAdmin):
    """Studies are changed on the studies page (review.views.studies), in audited steps."""

    list_display = ("name", "dataset", "round", "assignment_mode", "created_at")
    list_filter = ("dataset", "assignment_mode")
    list_select_related = ("dataset",)


@admin.register(SamplingDraw)
class SamplingDrawAdmin(RecordReadOnlyAdmin):
    """An adaptive study's recorded probabilities and draws: read-only, written by its waves."""

    list_display = ("study", "wave", "instruction", "probability", "drawn", "created_at")
    list_filter = ("study", "wave", "drawn")
    raw_id_fields = ("instruction",)
    list_select_related = ("study__dataset", "instruction")


@admin.register(ReferenceResponse)
class ReferenceResponseAdmin(RecordReadOnlyAdmin):
    list_display = ("instruction", "annotator")
    search_fields = ("=instruction__instruction_id",)
    raw_id_fields = ("instruction",)
    list_select_related = ("instruction__dataset",)


@admin.register(TaxonomyEntry)
class TaxonomyEntryAdmin(AuditedAdmin):
    list_display = ("category", "subcategory", "dataset")
    list_filter = ("dataset", "category")
