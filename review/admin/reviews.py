"""Admin for assignments, reviews and error tags.

Reviews are read-only here: their state changes only through review.services.reviews (the
"reopen" action below), never by editing fields. Model names are fine in the admin: only
admins reach it, and they need them to audit blinding.
"""

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from review.models import Assignment, ErrorTag, ResponseJudgement, Review, User
from review.services import assignments as assignment_services
from review.services.reviews import MAX_REOPEN_REASON_CHARS, review_reopen

from .audited import AuditedAdmin, AuditedReadsAdmin


class ReopenForm(forms.Form):
    reason = forms.CharField(
        max_length=MAX_REOPEN_REASON_CHARS,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="The clinician reads this in their queue and on the review page.",
    )


class ReassignForm(forms.Form):
    clinician = forms.EmailField(label="New clinician's email")


@admin.register(ErrorTag)
class ErrorTagAdmin(AuditedAdmin):
    list_display = ("label", "slug", "order", "is_active", "description")
    list_editable = ("order", "is_active")
    prepopulated_fields = {"slug": ("label",)}
    search_fields = ("label", "slug")


@admin.register(Assignment)
class AssignmentAdmin(AuditedAdmin):
    """Read-only rows; changes go through review.services.assignments (audited), which never
    moves a started or submitted review to another clinician. New assignments: the app's
    "Assign" page (balanced, with a target overlap)."""

    list_display = ("instruction", "clinician", "assigned_by", "created_at", "review_status")
    list_filter = ("instruction__dataset", "instruction__specialty", "instruction__category")
    search_fields = ("=instruction__instruction_id", "clinician__email")
    raw_id_fields = ("instruction", "clinician", "assigned_by")
    list_select_related = ("instruction__dataset", "clinician", "assigned_by", "review")
    readonly_fields = ("created_at",)
    actions = ("reassign", "withdraw")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Assignment | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Assignment | None = None) -> bool:
        return False  # the "withdraw" action, through the service

    def get_actions(self, request: HttpRequest) -> dict:
        # Django hides actions when the model has no change permission; these go to services.
        actions = super().get_actions(request)
        for name in self.actions:
            actions.setdefault(name, self.get_action(name))
        return actions

    @admin.display(description="Review")
    def review_status(self, obj: Assignment) -> str:
        review = getattr(obj, "review", None)
        return review.get_status_display() if review else "not started"

    @admin.action(description="Reassign the selected (not started) assignments…")
    def reassign(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        form = ReassignForm(request.POST if "apply" in request.POST else None)
        if not form.is_bound or not form.is_valid():
            return render(
                request,
                "admin/review/assignment/action_form.html",
                {
                    **self.admin_site.each_context(request),
                    "title": f"Reassign {queryset.count()} assignment(s)",
                    "queryset": queryset,
                    "form": form,
                    "action": request.POST.get("action"),
                    "opts": self.model._meta,
                },
            )
        clinician = User.objects.filter(email__iexact=form.cleaned_data["clinician"]).first()
        if clinician is None:
            self.message_user(request, "No user has that email address.", messages.ERROR)
            return None
        self._each(
            request,
            queryset,
            lambda a: assignment_services.assignment_reassign(
                assignment=a, clinician=clinician, actor=request.user, request=request
            ),
        )
        return None

    @admin.action(description="Withdraw the selected (not started) assignments")
    def withdraw(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._each(
            request,
            queryset,
            lambda a: assignment_services.assignment_delete(
                assignment=a, actor=request.user, request=request
            ),
        )

    def _each(self, request: HttpRequest, queryset: QuerySet, call) -> None:  # noqa: ANN001
        done = 0
        for assignment in queryset.select_related("clinician"):
            try:
                call(assignment)
                done += 1
            except assignment_services.AssignmentError as exc:
                self.message_user(request, str(exc), messages.ERROR)
        if done:
            self.message_user(request, f"{done} assignment(s) updated.", messages.SUCCESS)


class JudgementInline(admin.TabularInline):
    model = ResponseJudgement
    extra = 0
    can_delete = False
    fields = ("position", "response", "rank", "is_correct", "error_tags", "comment")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Review | None = None) -> bool:
        return False


@admin.register(Review)
class ReviewAdmin(AuditedReadsAdmin):
    """Reviews with their judgements and comments (written about a patient's record): every
    list and object page opened is audited."""

    list_display = (
        "id",
        "assignment",
        "status",
        "cannot_assess",
        "time_spent_seconds",
        "updated_at",
        "submitted_at",
    )
    list_filter = ("status", "cannot_assess", "assignment__instruction__dataset")
    search_fields = ("=assignment__instruction__instruction_id", "assignment__clinician__email")
    list_select_related = ("assignment__instruction__dataset", "assignment__clinician")
    inlines = (JudgementInline,)
    actions = ("reopen",)

    def get_readonly_fields(self, request: HttpRequest, obj: Review | None = None) -> list[str]:
        return [f.name for f in Review._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Review | None = None) -> bool:
        return False

    @admin.action(description="Reopen the selected submitted reviews (the clinician may edit)…")
    def reopen(self, request: HttpRequest, queryset: QuerySet[Review]) -> HttpResponse | None:
        # Like the application actions: ask for the reason on an intermediate page first.
        form = ReopenForm(request.POST if "apply" in request.POST else None)
        if not form.is_bound or not form.is_valid():
            return render(
                request,
                "admin/review/review/reopen_form.html",
                {
                    **self.admin_site.each_context(request),
                    "title": f"Reopen {queryset.count()} review(s)",
                    "queryset": queryset.select_related("assignment__clinician"),
                    "form": form,
                    "action": request.POST.get("action"),
                    "opts": self.model._meta,
                },
            )
        reason = form.cleaned_data["reason"]
        reopened = sum(
            review_reopen(review=r, actor=request.user, reason=reason, request=request)
            for r in queryset
        )
        skipped = queryset.count() - reopened
        self.message_user(request, f"Reopened {reopened} review(s).", messages.SUCCESS)
        if skipped:
            self.message_user(
                request, f"{skipped} review(s) were not submitted and were left as they are."
            )
        return None
