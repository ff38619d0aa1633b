"""Django admin for what researchers declare about a dataset's models."""

from django.contrib import admin

from scoring.models import ModelVariant


@admin.register(ModelVariant)
class ModelVariantAdmin(admin.ModelAdmin):
    list_display = ("model_name", "base_model", "context_length", "dataset")
    list_filter = ("dataset",)
    search_fields = ("model_name", "base_model")
