"""Forms of the clinician-review area: bulk assignment (admins)."""

from django import forms

from review.models import Dataset, User
from review.selectors.assignments import assignment_choices, clinicians_approved
from review.services.assignments import MAX_OVERLAP


class AssignForm(forms.Form):
    """Which instructions (dataset, specialty, category), to whom, with what overlap."""

    dataset = forms.ModelChoiceField(queryset=Dataset.objects.all(), empty_label=None)
    specialty = forms.ChoiceField(required=False, help_text="Specialty of the author.")
    category = forms.ChoiceField(required=False)
    overlap = forms.IntegerField(
        min_value=1,
        max_value=MAX_OVERLAP,
        initial=2,
        help_text="Clinicians per instruction. Existing assignments count towards it.",
    )
    clinicians = forms.ModelMultipleChoiceField(
        queryset=User.objects.none(),
        widget=forms.CheckboxSelectMultiple,
        help_text="Only clinicians with approved, current access are listed.",
    )

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        specialties, categories = assignment_choices()
        self.fields["specialty"].choices = [("", "Any specialty")] + [(s, s) for s in specialties]
        self.fields["category"].choices = [("", "Any category")] + [(c, c) for c in categories]
        approved = [u.pk for u in clinicians_approved()]
        self.fields["clinicians"].queryset = User.objects.filter(pk__in=approved).order_by("email")
