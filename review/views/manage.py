"""Admins' progress pages: per dataset, each clinician's progress and each instruction's reviews,
with reopening a submitted review (with a reason) in place."""

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from review import access
from review.models import AuditEvent, Dataset, Review
from review.selectors.progress import dataset_progress_detail, datasets_progress
from review.selectors.reviews import reopen_reason_hits
from review.selectors.studies import studies_of, study_label
from review.services import reviews as review_services
from review.services.audit import audit_record
from scoring.reports.prediction import study_power

PROGRESS_STATUSES = (
    ("", "All"),
    ("new", "Not started"),
    (Review.Status.DRAFT, "In progress"),
    (Review.Status.REOPENED, "Reopened"),
    (Review.Status.SUBMITTED, "Submitted"),
)


class ReopenForm(forms.Form):
    reason = forms.CharField(
        max_length=review_services.MAX_REOPEN_REASON_CHARS,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    next = forms.CharField(required=False, widget=forms.HiddenInput)


@require_GET
@access.admin_required
def progress_index(request: HttpRequest) -> HttpResponse:
    return render(request, "review/admin/progress_index.html", {"datasets": datasets_progress()})


@require_GET
@access.admin_required
def progress_dataset(request: HttpRequest, dataset_id: int) -> HttpResponse:
    dataset = get_object_or_404(Dataset, pk=dataset_id)
    status = request.GET.get("status", "")
    status = status if status in dict(PROGRESS_STATUSES) else ""
    rounds = list(studies_of(dataset))
    raw_round = request.GET.get("round", "")
    study = next((s for s in rounds if raw_round.isdigit() and s.round == int(raw_round)), None)
    detail = dataset_progress_detail(
        dataset, page_number=request.GET.get("page", 1), status=status, study=study
    )
    # The page shows every listed instruction's question (the dataset's content, under the
    # DUA): one audit row per read, naming the instructions, never their text.
    audit_record(
        action=AuditEvent.Action.INSTRUCTION_VIEWED,
        request=request,
        obj=dataset,
        details={
            "view": "progress",
            "page": detail.page.number,
            "status": status,
            "round": study.round if study else None,
            "instructions": [row.instruction_id for row in detail.instructions],
        },
    )
    return render(
        request,
        "review/admin/progress_dataset.html",
        {
            "dataset": dataset,
            "detail": detail,
            "status": status,
            "statuses": PROGRESS_STATUSES,
            "rounds": [(s.round, study_label(s.round, s.name)) for s in rounds],
            "round": study.round if study else None,
            "power": _power(request, dataset),
        },
    )


def _power(request: HttpRequest, dataset: Dataset) -> dict[str, object]:
    """The power calculator: how many more reviews each target needs, with and
    without the predictor; its choices come from the page's GET parameters."""
    try:
        points = float(request.GET.get("margin", "5"))
    except ValueError:
        points = 5.0
    points = min(50.0, max(0.5, points)) if points == points else 5.0
    raw_study = request.GET.get("study", "")
    return study_power(
        study_id=int(raw_study) if raw_study.isdigit() else None,
        dataset=dataset,
        predictor=request.GET.get("predictor", "auto")[:100],
        metric_a=request.GET.get("metric_a") or None,
        metric_b=request.GET.get("metric_b") or None,
        margin=points / 100.0,
    )


@access.admin_required  # outermost: strangers are sent to sign in, whatever the method
@require_POST
def review_reopen(request: HttpRequest, review_id: int) -> HttpResponse:
    review = get_object_or_404(
        Review.objects.select_related("assignment__instruction"), pk=review_id
    )
    fallback = reverse("progress_dataset", args=[review.assignment.instruction.dataset_id])
    form = ReopenForm(request.POST)
    # Back to the page (and filter) the admin came from, never to another site.
    back = request.POST.get("next", "")
    back = back if back.startswith(fallback) else fallback
    if not form.is_valid():
        messages.error(request, "Say why the review is reopened: the clinician will read it.")
        return redirect(back)
    reopened = review_services.review_reopen(
        review=review, actor=request.user, reason=form.cleaned_data["reason"], request=request
    )
    if reopened:
        messages.success(
            request,
            f"Reopened the review of #{review.assignment.instruction.instruction_id}: "
            "the clinician sees your reason in their queue.",
        )
        reason = form.cleaned_data["reason"]
        hits = reopen_reason_hits(reason, review.assignment.instruction.dataset_id)
        if hits:
            messages.warning(
                request,
                f"Your reason names a model ({', '.join(hits)}): the clinician reads it with "
                "those words masked, but the audit log and this page keep it as typed. Say "
                "what to check without naming a model.",
            )
    else:
        messages.info(request, "That review is not submitted, so there was nothing to reopen.")
    return redirect(back)
