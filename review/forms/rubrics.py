"""Forms for rubric work: the criteria an author or reviewer edits, and the admin's
assignments (authoring, review, grading) and JSONL upload."""

from typing import Any

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.http import QueryDict
from django.template.defaultfilters import filesizeformat

from review.models import Rubric, Study, User
from review.selectors.assignments import clinicians_approved
from review.services.rubrics import MAX_CRITERIA, CriterionInput, criteria_inputs

BLANK_ROWS = 3  # empty rows under the criteria, for new ones (no script needed to add one)


def criteria_from_post(data: QueryDict) -> list[CriterionInput]:
    """The criteria rows of the page (parallel ``text``/``points``/``tags`` lists), blank rows
    left out; RubricError naming the first bad row."""
    texts, points, tags = data.getlist("text"), data.getlist("points"), data.getlist("tags")
    rows: list[dict[str, Any]] = []
    for i, text in enumerate(texts[: MAX_CRITERIA + BLANK_ROWS]):
        raw_points = points[i].strip() if i < len(points) else ""
        raw_tags = tags[i] if i < len(tags) else ""
        if not text.strip() and not raw_points and not raw_tags.strip():
            continue
        try:
            value: object = int(raw_points)
        except ValueError:
            value = raw_points
        rows.append({"text": text, "points": value, "tags": raw_tags})
    return criteria_inputs(rows)


def _clinicians() -> forms.ModelChoiceField:  # type: ignore[type-arg]
    approved = [u.pk for u in clinicians_approved()]
    return forms.ModelChoiceField(
        queryset=User.objects.filter(pk__in=approved).order_by("email"), required=False
    )


class AuthorAssignForm(forms.Form):
    """Ask a clinician to write an instruction's next rubric version; name its reviewer."""

    instruction_id = forms.CharField(max_length=64, label="Instruction id")
    author = forms.ModelChoiceField(queryset=User.objects.none())
    reviewer = forms.ModelChoiceField(queryset=User.objects.none(), required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["author"] = _clinicians()
        self.fields["author"].required = True
        self.fields["reviewer"] = _clinicians()
        self.fields["reviewer"].help_text = "A second clinician, never the author."


class ReviewerForm(forms.Form):
    rubric = forms.ModelChoiceField(queryset=Rubric.objects.none())
    reviewer = forms.ModelChoiceField(queryset=User.objects.none())

    def __init__(self, *args: Any, dataset_id: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        rubric_field: Any = self.fields["rubric"]
        rubric_field.queryset = (
            Rubric.objects.filter(instruction__dataset_id=dataset_id)
            .exclude(status=Rubric.Status.ACCEPTED)
            .select_related("instruction")
        )
        self.fields["reviewer"] = _clinicians()
        self.fields["reviewer"].required = True


class GradingAssignForm(forms.Form):
    """Ask clinicians to grade a study's responses against an accepted rubric version."""

    rubric = forms.ModelChoiceField(queryset=Rubric.objects.none())
    study = forms.ModelChoiceField(queryset=Study.objects.none())
    clinicians = forms.ModelMultipleChoiceField(
        queryset=User.objects.none(), widget=forms.CheckboxSelectMultiple
    )

    def __init__(self, *args: Any, dataset_id: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        rubric_field: Any = self.fields["rubric"]
        rubric_field.queryset = Rubric.objects.filter(
            instruction__dataset_id=dataset_id, status=Rubric.Status.ACCEPTED
        ).select_related("instruction")
        study_field: Any = self.fields["study"]
        study_field.queryset = Study.objects.filter(dataset_id=dataset_id)
        approved = [u.pk for u in clinicians_approved()]
        clinicians_field: Any = self.fields["clinicians"]
        clinicians_field.queryset = User.objects.filter(pk__in=approved).order_by("email")


class RubricUploadForm(forms.Form):
    file = forms.FileField(help_text="HealthBench JSONL: {prompt_id, rubrics: [...]} a line.")

    def clean_file(self) -> UploadedFile:
        # Nothing past the limit was kept (medalign_site/uploads.py): the size is what arrived.
        file: UploadedFile = self.cleaned_data["file"]
        if file.size is not None and file.size > settings.RUBRIC_UPLOAD_MAX_BYTES:
            raise forms.ValidationError(
                f"The file is larger than {filesizeformat(settings.RUBRIC_UPLOAD_MAX_BYTES)}, "
                "the most this page takes (RUBRIC_UPLOAD_MAX_BYTES)."
            )
        return file
