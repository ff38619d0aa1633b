"""Forms of the clinician-review area: bulk assignment (admins)."""

from typing import Any

from django import forms

from review.access import unblinding_roles
from review.models import Dataset, Study, User
from review.selectors.assignments import assignment_choices, clinicians_approved
from review.selectors.studies import study_label
from review.services.assignments import MAX_OVERLAP


class _ClinicianChoice(forms.ModelMultipleChoiceField):
    """Clinicians by email; one who can read model names or shown orders (researcher, admin
    or staff access) is marked: their reviews are flagged and left out of reports unless a
    researcher includes them."""

    def label_from_instance(self, obj: Any) -> str:
        roles = unblinding_roles(obj)
        if roles:
            named = " and ".join(_ARTICLES.get(role, role) for role in roles)
            return f"{obj.email} (also {named}: can see model names; reviews left out of reports)"
        return str(obj.email)


_ARTICLES = {"researcher": "a researcher", "admin": "an admin"}


class _StudyChoice(forms.ModelChoiceField):
    """The chosen dataset's rounds, each named once ("Round 2: with the new model"); every
    option carries its dataset, so the page (assign.js) shows only the chosen dataset's."""

    def label_from_instance(self, obj: Any) -> str:
        return study_label(obj.round, obj.name)


class _StudySelect(forms.Select):
    def create_option(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(*args, **kwargs)
        study = getattr(option["value"], "instance", None)
        if study is not None:
            option["attrs"]["data-dataset"] = str(study.dataset_id)
            if self.dataset_id is not None and study.dataset_id != self.dataset_id:
                # Another dataset's round: never offered until that dataset is chosen.
                option["attrs"]["hidden"] = True
                option["attrs"]["disabled"] = True
        return option

    dataset_id: int | None = None


class AssignForm(forms.Form):
    """Which instructions (dataset, specialty, category), in which study, to whom, with what
    overlap."""

    dataset = forms.ModelChoiceField(queryset=Dataset.objects.all(), empty_label=None)
    study = _StudyChoice(
        queryset=Study.objects.none(),
        widget=_StudySelect,
        required=False,
        empty_label="The dataset's round, where it has only one (Round 1 is made if none)",
        help_text="The round the new assignments join. Required once a dataset has several.",
    )
    specialty = forms.ChoiceField(required=False, help_text="Specialty of the author.")
    category = forms.ChoiceField(required=False)
    overlap = forms.IntegerField(
        min_value=1,
        max_value=MAX_OVERLAP,
        initial=2,
        help_text="Clinicians per instruction in that round. Its existing assignments count.",
    )
    repeat_reviewers = forms.BooleanField(
        required=False,
        label="Also assign clinicians who hold an instruction in another round with the same "
        "responses",
        help_text="Off by default: in a copied round they would meet responses they ranked "
        "before, and whatever is new beside them would stand out as the new model's.",
    )
    clinicians = _ClinicianChoice(
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
        self.fields["study"].queryset = Study.objects.select_related("dataset").order_by(
            "dataset__name", "round"
        )
        # The dataset the form is for: the one posted, else the first offered (the select's
        # default), so the rounds listed are that dataset's.
        widget = self.fields["study"].widget
        assert isinstance(widget, _StudySelect)
        widget.dataset_id = self._chosen_dataset_id()

    def _chosen_dataset_id(self) -> int | None:
        raw = self.data.get("dataset") if self.is_bound else None
        if raw is not None and str(raw).isdigit():
            return int(raw)
        first = Dataset.objects.order_by("name").values_list("pk", flat=True).first()
        return int(first) if first is not None else None

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        dataset, study = data.get("dataset"), data.get("study")
        if dataset is None:
            return data
        if study is not None and study.dataset_id != dataset.pk:
            self.add_error("study", f"That round is not of {dataset.name}.")
        elif study is None:
            # Never a silent choice between rounds: work meant to top up Round 1 would fill
            # the newest one.
            n = Study.objects.filter(dataset=dataset).count()
            if n > 1:
                self.add_error(
                    "study", f"{dataset.name} has {n} rounds: choose the one to assign in."
                )
            study = Study.objects.filter(dataset=dataset).first()
        if study is not None and study.assignment_mode == Study.AssignmentMode.ADAPTIVE:
            # Said at preview, not only on Create: its instructions go out in waves, each with
            # a recorded probability, from the studies page.
            self.add_error(
                "study",
                f"Round {study.round} is assigned adaptively, in waves: assign it from its "
                "studies page.",
            )
        return data
