"""Django admin for what researchers declare about a dataset's models, and the allowlist of
institution-run model endpoints."""

import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from review.admin.audited import AuditedAdmin
from scoring.generation.runs import GenerationRunError, generation_template_approve
from scoring.llm.backends import address_refusal, normalize_endpoint
from scoring.models import GenerationEndpoint, GenerationTemplate, LearnedMetricModel, ModelVariant


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


class GenerationEndpointForm(forms.ModelForm):
    class Meta:
        model = GenerationEndpoint
        fields = (
            "url",
            "model",
            "label",
            "tokenizer_path",
            "enabled",
            "allow_public_address",
            "timeout_seconds",
            "notes",
        )

    def clean_url(self) -> str:
        try:
            return normalize_endpoint(self.cleaned_data["url"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self) -> dict[str, Any]:
        # Said at once rather than at the first request: where the name points now.
        data = super().clean()
        url = data.get("url")
        if url:
            host, port = urlsplit(url).hostname or "", urlsplit(url).port or 80
            try:
                answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError:
                # The workers resolve it at every request (they may see another DNS than the
                # web server); they refuse it then if it does not resolve or points outside.
                return data
            for answer in answers:
                why = address_refusal(
                    str(answer[4][0]), allow_public=bool(data.get("allow_public_address"))
                )
                if why:
                    self.add_error("url", f"{host} resolves to {why}")
                    break
        return data

    def clean_tokenizer_path(self) -> str:
        path = Path(self.cleaned_data["tokenizer_path"]).expanduser()
        if not (path / "tokenizer.json").is_file():
            raise forms.ValidationError(
                "no tokenizer.json in this folder: copy the served model's tokenizer files here"
            )
        return str(path.resolve())


@admin.register(GenerationEndpoint)
class GenerationEndpointAdmin(AuditedAdmin):
    """The allowlist of institution-run model servers: every addition, change and deletion is
    audited (``AuditedAdmin``). Nothing else may be sent a prompt or a response to judge."""

    form = GenerationEndpointForm
    list_display = (
        "url",
        "model",
        "label",
        "enabled",
        "allow_public_address",
        "timeout_seconds",
        "created_at",
    )
    list_filter = ("enabled",)
    search_fields = ("url", "model", "label")


@admin.register(GenerationTemplate)
class GenerationTemplateAdmin(AuditedAdmin):
    """Templates researchers asked to run on data that is not synthetic: read the text, then
    approve it (an action, audited; another admin than the one who asked). Nothing here is
    edited: a changed text is another template."""

    list_display = ("__str__", "name", "requested_by", "requested_at", "approved_by", "approved_at")
    list_filter = (("approved_at", admin.EmptyFieldListFilter),)
    readonly_fields = (
        "sha256",
        "name",
        "text",
        "requested_by",
        "requested_at",
        "approved_by",
        "approved_at",
    )
    actions = ["approve"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Approve the selected templates for data that is not synthetic")
    def approve(self, request: HttpRequest, queryset: QuerySet[GenerationTemplate]) -> None:
        for template in queryset:
            try:
                generation_template_approve(
                    template=template,
                    admin=request.user,  # type: ignore[arg-type]
                    request=request,
                )
            except GenerationRunError as exc:
                self.message_user(request, f"{template}: {exc}.", level=messages.ERROR)
            else:
                self.message_user(request, f"{template}: approved.")
