"""Django admin for what researchers declare about a dataset's models."""

from django.contrib import admin
from django.http import HttpRequest

from scoring.models import LearnedMetricModel, ModelVariant


@admin.register(ModelVariant)
class ModelVariantAdmin(admin.ModelAdmin):
    list_display = ("model_name", "base_model", "context_length", "dataset")
    list_filter = ("dataset",)
    search_fields = ("model_name", "base_model")


@admin.register(LearnedMetricModel)
class LearnedMetricModelAdmin(admin.ModelAdmin):
    """Read-only: a fitted model is what a report trained; changing it would break provenance."""

    list_display = ("pk", "dataset", "report", "n_reviews", "n_pairs", "created_at")
    list_filter = ("dataset",)
    readonly_fields = (
        "dataset",
        "report",
        "feature_names",
        "parameters",
        "provenance",
        "n_reviews",
        "n_pairs",
        "created_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
