"""Forms of the report pages (a separate module: scoring runs need no forms of their own)."""

from typing import Any

from django import forms
from django.db.models import QuerySet

from review.models import Dataset, Study
from scoring.reports.parameters import REPORT_MAX_RESAMPLES
from scoring.reports.statistics.consensus import CONSENSUS_LABELS, CONSENSUS_METHODS


class ReportForm(forms.Form):
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(), empty_label=None)
    title = forms.CharField(max_length=200, required=False)
    n_resamples = forms.IntegerField(
        label="Bootstrap resamples",
        initial=10_000,
        min_value=100,
        max_value=REPORT_MAX_RESAMPLES,
    )
    seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=2**32 - 1,
        help_text="Leave empty for a random seed; it is recorded with the report either way.",
    )
    confidence = forms.FloatField(initial=0.95, min_value=0.5, max_value=0.999)
    exclude_truncated = forms.BooleanField(
        required=False,
        label="Exclude truncated pairs",
        help_text="Leave out every score whose metric model had to cut the response, source or "
        "reference to fit its input length (the score judged only part of the text).",
    )
    learned_metric = forms.BooleanField(
        required=False,
        label="Add a metric learned from the clinicians",
        help_text="A pairwise ranking model over the metric scores, response length and MiniLM "
        "embeddings, evaluated by cross-validation with folds by patient, so no patient is "
        "both learned from and tested on (adds seconds to "
        "minutes: every text is embedded).",
    )

    study = forms.ModelChoiceField(
        queryset=Study.objects.none(),
        required=False,
        empty_label="The latest round with submitted reviews",
        help_text="Whose reviews to analyse: each study (round) has its own response set.",
    )
    source = forms.ChoiceField(
        label="Whose judgements",
        choices=[
            ("app", "Reviews made in this app"),
            ("release", "The release's own clinician judgements (binary_correct, model_rank)"),
        ],
        initial="app",
        required=False,
        help_text="Never mixed: a report analyses one source. A report of the app's reviews "
        "also sets them beside the release's judgements of the same responses, where the "
        "release has them.",
    )
    cluster = forms.ChoiceField(
        label="Resample by",
        choices=[
            ("auto", "Patient when instructions share records, else instruction"),
            ("patient", "Patient"),
            ("instruction", "Instruction"),
        ],
        initial="auto",
        required=False,
        help_text="The unit every interval and test resamples: instructions grounded in one "
        "patient's record are not independent.",
    )
    min_clusters = forms.IntegerField(
        label="Fewest clusters for an interval",
        initial=10,
        required=False,
        min_value=2,
        max_value=1000,
        help_text="Below this many clusters no interval or p-value is shown.",
    )
    ppi_predictor = forms.CharField(
        label="Predictor for prediction-powered estimates",
        initial="auto",
        required=False,
        max_length=100,
        help_text="Which scores stand in for the clinicians on instructions nobody reviewed: "
        "“auto” (the LLM jury, else the learned metric, else COMET, BERTScore…, in that "
        "fixed order), “none”, “learned”, or a metric's key as in the exports (e.g. comet).",
    )
    consensus = forms.ChoiceField(
        label="Score metrics against",
        choices=[(m, CONSENSUS_LABELS[m].capitalize()) for m in CONSENSUS_METHODS],
        initial="reviews",
        required=False,
        help_text="The truth the correlation table uses. Every report also sets each metric "
        "against every consensus side by side and says where the conclusions change.",
    )
    include_gold = forms.BooleanField(
        required=False,
        label="Include the reviews of gold items",
        help_text="Gold items are quality checks shown blind among the clinicians' work; "
        "they are left out of the analysis unless included here.",
    )
    include_unblindable = forms.BooleanField(
        required=False,
        label="Include reviews by accounts that can read model names (researcher, admin, staff)",
        help_text="Such an account can map responses to models (exports, the studies pages, "
        "the Django admin), so its reviews are left out unless you include them knowingly.",
    )

    def __init__(self, *args: Any, datasets: QuerySet[Dataset], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["dataset"].queryset = datasets  # type: ignore[attr-defined]
        self.fields["study"].queryset = Study.objects.filter(  # type: ignore[attr-defined]
            dataset__in=datasets
        ).select_related("dataset")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        study, dataset = data.get("study"), data.get("dataset")
        if study is not None and dataset is not None and study.dataset_id != dataset.pk:
            self.add_error("study", f"{study} is not a study of {dataset}.")
        return data


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="What the token is for, e.g. “analysis notebook”."
    )
