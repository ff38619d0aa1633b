"""Forms for access applications, the DUA, admin decisions and the audit-log filters."""

import secrets
from datetime import date, timedelta
from typing import Any

from allauth.account.forms import SignupForm as AllauthSignupForm
from django import forms
from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.core.files.uploadedfile import UploadedFile
from django.template.defaultfilters import filesizeformat
from django.utils import timezone

from review.models import AuditEvent, DUAVersion, Role
from review.selectors.accounts import email_domain_is_rejected
from review.services.accounts import (
    CERTIFICATE_UNREADABLE,
    RESEARCH_USE_MAX_CHARS,
    ApplicationDetails,
    certificate_decodes,
    certificate_sniff,
    names_match,
)

_DATE = forms.DateInput(attrs={"type": "date"})
REQUESTABLE_ROLES = [
    (Role.CLINICIAN, "Clinician (review responses)"),
    (Role.RESEARCHER, "Researcher (reports)"),
]


class SignupForm(AllauthSignupForm):  # type: ignore[misc]
    """allauth's sign-up (ACCOUNT_FORMS["signup"]), as slow for a known email as for a new one.

    A new account's password is hashed (hundreds of milliseconds); a sign-up with an email that
    has an account only sent a mail (rate-limited, so mostly nothing), and the answer's timing
    told whether the address had an account. A hash of the same cost is
    made in that case too; both answers are the same redirect.
    """

    def try_save(self, request: Any) -> Any:
        if self.account_already_exists:
            make_password(secrets.token_urlsafe(16))
        return super().try_save(request)


class ApplicationForm(forms.Form):
    """The access application, including the signature of the active DUA version."""

    full_name = forms.CharField(max_length=200, label="Full name")
    institution = forms.CharField(max_length=200)
    institutional_email = forms.EmailField(
        label="Institutional email",
        help_text="An address at your institution. Personal mail providers are not accepted.",
    )
    requested_role = forms.ChoiceField(choices=REQUESTABLE_ROLES, label="Access requested")
    specialty = forms.CharField(max_length=100, required=False, help_text="Clinicians only.")
    research_use = forms.CharField(
        max_length=RESEARCH_USE_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 5}),
        label="Research use",
        help_text="What you will do with the data and why you need it.",
    )
    certificate = forms.FileField(
        label="Human subjects training certificate",
        help_text="PDF, PNG or JPEG.",
        widget=forms.ClearableFileInput(attrs={"accept": ".pdf,.png,.jpg,.jpeg"}),
    )
    certificate_completed_on = forms.DateField(label="Training completed on", widget=_DATE)
    certificate_expires_on = forms.DateField(label="Certificate expires on", widget=_DATE)
    storage_attestation = forms.BooleanField(
        label=(
            "I attest that any copy of the data I handle will be kept on encrypted, "
            "access-controlled storage, and never sent to third-party services."
        )
    )
    typed_name = forms.CharField(
        max_length=200,
        label="Signature: type your full name",
        help_text="Typing your full name signs the data use agreement shown above.",
    )

    def __init__(self, *args: object, certificate_required: bool = True, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # On resubmission the certificate already on file is kept unless a new one is uploaded.
        self.fields["certificate"].required = certificate_required
        self.fields["certificate"].help_text = (
            f"PDF, PNG or JPEG, at most {filesizeformat(settings.MAX_UPLOAD_BYTES)}."
            + ("" if certificate_required else " Leave empty to keep the one on file.")
        )

    def clean_institutional_email(self) -> str:
        email = self.cleaned_data["institutional_email"].strip().lower()
        if email_domain_is_rejected(email):
            raise forms.ValidationError(
                "This looks like a personal email address: use the one your institution gave you."
            )
        return email

    def clean_certificate(self) -> UploadedFile | None:
        file = self.cleaned_data.get("certificate")
        if not file:
            return None
        if file.size > settings.MAX_UPLOAD_BYTES:
            raise forms.ValidationError(
                f"The file is larger than {filesizeformat(settings.MAX_UPLOAD_BYTES)}."
            )
        content_type = certificate_sniff(file)
        if content_type is None:
            raise forms.ValidationError(
                "The file is not a PDF, PNG or JPEG (checked by its content, not its name)."
            )
        if not certificate_decodes(file, content_type):
            raise forms.ValidationError(CERTIFICATE_UNREADABLE)
        return file

    def clean_certificate_completed_on(self) -> date:
        value = self.cleaned_data["certificate_completed_on"]
        if value > timezone.localdate():
            raise forms.ValidationError("The completion date cannot be in the future.")
        return value

    def clean_certificate_expires_on(self) -> date:
        value = self.cleaned_data["certificate_expires_on"]
        if value <= timezone.localdate():
            raise forms.ValidationError("This certificate has expired: renew your training first.")
        return value

    def clean(self) -> dict:
        data = super().clean()
        typed, full = data.get("typed_name"), data.get("full_name")
        if typed and full and not names_match(typed, full):
            self.add_error("typed_name", "Type your full name exactly as entered above.")
        return data

    def details(self) -> ApplicationDetails:
        d = self.cleaned_data
        return ApplicationDetails(
            full_name=d["full_name"],
            institution=d["institution"],
            institutional_email=d["institutional_email"],
            research_use=d["research_use"],
            requested_role=d["requested_role"],
            specialty=d.get("specialty", ""),
            certificate_completed_on=d["certificate_completed_on"],
            certificate_expires_on=d["certificate_expires_on"],
            storage_attestation=d["storage_attestation"],
        )


class DUASignForm(forms.Form):
    typed_name = forms.CharField(max_length=200, label="Signature: type your full name")
    agree = forms.BooleanField(label="I have read and agree to this version of the agreement.")

    def __init__(self, *args: object, full_name: str, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.full_name = full_name

    def clean_typed_name(self) -> str:
        typed = self.cleaned_data["typed_name"]
        if self.full_name and not names_match(typed, self.full_name):
            raise forms.ValidationError("Type your full name as given in your application.")
        return typed


class DecisionForm(forms.Form):
    """An admin's decision on a pending application."""

    APPROVE, REJECT, CHANGES = "approve", "reject", "request_changes"
    decision = forms.ChoiceField(
        choices=[(APPROVE, "Approve"), (REJECT, "Reject"), (CHANGES, "Request changes")],
        widget=forms.RadioSelect,
    )
    roles = forms.MultipleChoiceField(
        choices=Role.choices, required=False, widget=forms.CheckboxSelectMultiple
    )
    expires_on = forms.DateField(required=False, widget=_DATE, label="Access expires on")
    reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Required to reject or request changes; the applicant sees it.",
    )

    def __init__(self, *args: object, requested_role: str = "", **kwargs: object) -> None:
        # The roles start as the applicant asked: an admin who only chooses "Approve" approves
        # what was requested, instead of meeting "Choose at least one role".
        initial: dict[str, object] = {
            "expires_on": timezone.localdate() + timedelta(days=365),
            "roles": [requested_role] if requested_role else [],
        }
        initial.update(kwargs.pop("initial", None) or {})  # type: ignore[call-overload]
        super().__init__(*args, initial=initial, **kwargs)  # type: ignore[arg-type,misc]

    def clean(self) -> dict:
        data = super().clean()
        decision = data.get("decision")
        if decision == self.APPROVE:
            if not data.get("roles"):
                self.add_error("roles", "Choose at least one role.")
            expires_on = data.get("expires_on")
            if not expires_on:
                self.add_error("expires_on", "An approval needs an expiry date.")
            elif expires_on <= timezone.localdate():
                self.add_error("expires_on", "The expiry date must be after today.")
        elif decision in (self.REJECT, self.CHANGES) and not data.get("reason", "").strip():
            self.add_error("reason", "Give a reason: the applicant will see it.")
        return data


class RolesForm(forms.Form):
    """Change the roles or renew the expiry of an approved application."""

    roles = forms.MultipleChoiceField(choices=Role.choices, widget=forms.CheckboxSelectMultiple)
    expires_on = forms.DateField(widget=_DATE, label="Access expires on")

    def clean_expires_on(self) -> date:
        value = self.cleaned_data["expires_on"]
        if value <= timezone.localdate():
            raise forms.ValidationError("The expiry date must be after today.")
        return value


class RevokeForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), help_text="The user sees this reason."
    )


class DUAPublishForm(forms.Form):
    """A new agreement version, in two steps: the admin edits (starting from the current
    text) and previews the difference; publishing needs the confirmation ticked on that
    preview, because it suspends every user until they sign."""

    version = forms.CharField(max_length=32, help_text="For example 1.1 or 2.0.")
    title = forms.CharField(max_length=200, initial="MedAlign Data Use Agreement")
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 16}),
        help_text="Starts from the active version's text: change what changes.",
    )
    confirm = forms.BooleanField(
        required=False,
        label="I understand that every user loses access until they sign this version.",
    )

    def __init__(self, *args: object, current_text: str = "", **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.current_text = current_text

    def clean_version(self) -> str:
        # Said at the preview, not after the admin has confirmed it.
        version = self.cleaned_data["version"].strip()
        if DUAVersion.objects.filter(version=version).exists():
            raise forms.ValidationError(f"Version {version} already exists: choose another label.")
        return version

    def clean_text(self) -> str:
        # Browsers send a textarea's lines ending in CRLF: stored and compared as LF, so that
        # an unchanged text is seen as unchanged.
        text = self.cleaned_data["text"].replace("\r\n", "\n")
        current = self.current_text.replace("\r\n", "\n")
        if current and text.strip() == current.strip():
            raise forms.ValidationError(
                "The text is the same as the active version's: change it, or publish nothing."
            )
        return text


class AuditFilterForm(forms.Form):
    actor = forms.CharField(required=False, label="Actor email contains")
    action = forms.ChoiceField(
        choices=[("", "Any action"), *AuditEvent.Action.choices], required=False
    )
    date_from = forms.DateField(required=False, widget=_DATE, label="From")
    date_to = forms.DateField(required=False, widget=_DATE, label="To")
    person_id = forms.CharField(required=False, max_length=64, label="Patient (person_id)")

    def filters(self) -> dict:
        if not self.is_valid():
            return {}
        return {k: v for k, v in self.cleaned_data.items() if v not in (None, "")}
