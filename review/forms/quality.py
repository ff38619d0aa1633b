"""Forms of the admin's quality page: settings, gold and calibration items, calibrating a
clinician, exclusions, adjudication. Every change is made by review.services.quality or
review.services.adjudications, never by a form."""

from typing import Any

from django import forms

from review.models import GoldItem, User
from review.services.quality import MAX_GOLD_RATE, MAX_REASON_CHARS


class PolicyForm(forms.Form):
    gold_percent = forms.FloatField(
        label="Gold in each queue (%)",
        min_value=0,
        max_value=100 * MAX_GOLD_RATE,
        help_text="The share of each clinician's queue in this round that is gold items, kept "
        "as work is assigned. 0 mixes in none.",
    )
    adjudication_tau = forms.FloatField(
        label="Rankings disagree below tau",
        min_value=-1,
        max_value=1,
        help_text="Two reviews of an instruction whose Kendall's tau-b is below this disagree "
        "on the ranking. A split correctness verdict always is a disagreement.",
    )
    drift_window = forms.IntegerField(label="Drift window (reviews)", min_value=2, max_value=500)


class ReleaseGoldForm(forms.Form):
    use = forms.ChoiceField(choices=GoldItem.Use.choices, label="Use them as")
    instruction_ids = forms.CharField(
        label="Instruction ids",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="The dataset's ids, separated by spaces or commas. Leave empty for every "
        "instruction whose responses all carry the release's verdict.",
    )

    def ids(self) -> list[str]:
        raw = self.cleaned_data.get("instruction_ids", "")
        return [part for part in raw.replace(",", " ").split() if part][:5000]


class SeniorGoldForm(forms.Form):
    """A senior clinician's reference for one instruction: a rank and a verdict per response
    (fields ``rank_<response id>`` and ``correct_<response id>``), a reason and who."""

    use = forms.ChoiceField(choices=GoldItem.Use.choices, label="Use it as")
    senior = forms.ModelChoiceField(queryset=User.objects.none(), label="Senior clinician")
    reason = forms.CharField(
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Why this is the right judgement: a calibrating clinician reads it.",
    )

    def __init__(
        self, *args: Any, response_ids: list[int], seniors: list[User], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fields["senior"].queryset = User.objects.filter(  # type: ignore[attr-defined]
            pk__in=[u.pk for u in seniors]
        )
        n = len(response_ids)
        self.response_ids = response_ids
        for number, rid in enumerate(response_ids, start=1):
            self.fields[f"rank_{rid}"] = forms.TypedChoiceField(
                label=f"Rank of response {number}",
                choices=[("", "–")] + [(str(i), str(i)) for i in range(1, n + 1)],
                coerce=int,
                empty_value=None,
                required=False,
            )
            self.fields[f"correct_{rid}"] = forms.TypedChoiceField(
                label=f"Response {number} is",
                choices=[("true", "Correct"), ("false", "Incorrect")],
                coerce=lambda v: v == "true",
                widget=forms.RadioSelect,
            )

    def judgements(self) -> dict[int, tuple[int | None, bool | None]]:
        data = self.cleaned_data
        return {
            rid: (data.get(f"rank_{rid}"), data.get(f"correct_{rid}")) for rid in self.response_ids
        }


class CalibrateForm(forms.Form):
    clinician = forms.ModelChoiceField(queryset=User.objects.none(), label="Clinician")

    def __init__(self, *args: Any, clinicians: list[User], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["clinician"].queryset = User.objects.filter(  # type: ignore[attr-defined]
            pk__in=[u.pk for u in clinicians]
        ).order_by("email")


class ExcludeForm(forms.Form):
    clinician = forms.IntegerField(widget=forms.HiddenInput)
    reason = forms.CharField(max_length=MAX_REASON_CHARS, widget=forms.Textarea(attrs={"rows": 2}))


class ReadmitForm(forms.Form):
    reason = forms.CharField(max_length=MAX_REASON_CHARS, widget=forms.Textarea(attrs={"rows": 2}))


class AdjudicateForm(forms.Form):
    instructions = forms.TypedMultipleChoiceField(coerce=int, choices=[])
    adjudicator = forms.ModelChoiceField(queryset=User.objects.none(), label="Adjudicator")

    def __init__(
        self, *args: Any, instruction_ids: list[int], adjudicators: list[User], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fields["instructions"].choices = [(i, str(i)) for i in instruction_ids]  # type: ignore[attr-defined]
        self.fields["adjudicator"].queryset = User.objects.filter(  # type: ignore[attr-defined]
            pk__in=[u.pk for u in adjudicators]
        ).order_by("email")
