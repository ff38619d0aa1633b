"""The append-only audit trail."""

from typing import Any, NoReturn

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditQuerySet(models.QuerySet["AuditEvent"]):
    # Append-only: bulk updates and deletes through the ORM are refused outright.
    def update(self, **kwargs: Any) -> NoReturn:
        raise PermissionError("the audit trail is append-only")

    def delete(self) -> NoReturn:
        raise PermissionError("the audit trail is append-only")


class AuditEvent(models.Model):
    """Who did what to which object, when, from where. Never updated or deleted."""

    class Action(models.TextChoices):
        LOGIN = "login", "Signed in"
        LOGIN_FAILED = "login_failed", "Failed sign-in"
        LOGOUT = "logout", "Signed out"
        RECORD_VIEWED = "record_viewed", "Record viewed"
        INSTRUCTION_VIEWED = "instruction_viewed", "Instruction viewed"
        RECORD_SEARCHED = "record_searched", "Record searched"
        REVIEW_SAVED = "review_saved", "Review draft saved"
        REVIEW_SUBMITTED = "review_submitted", "Review submitted"
        REVIEW_REOPENED = "review_reopened", "Review reopened"
        EXPORT = "export", "Export"
        APPLICATION_SUBMITTED = "application_submitted", "Application submitted"
        APPLICATION_DECISION = "application_decision", "Application decision"
        ROLE_CHANGED = "role_changed", "Role changed"
        DUA_SIGNED = "dua_signed", "DUA signed"
        DUA_PUBLISHED = "dua_published", "DUA published"
        CERTIFICATE_VIEWED = "certificate_viewed", "Certificate viewed"
        DATA_IMPORTED = "data_imported", "Data imported"
        ASSIGNMENTS_CREATED = "assignments_created", "Assignments created"
        SCORING_STARTED = "scoring_started", "Scoring run started"
        REPORT_CREATED = "report_created", "Report created"
        AUDIT_EXPORTED = "audit_exported", "Audit log exported"
        MFA_CHANGED = "mfa_changed", "Two-factor authentication changed"
        API_TOKEN_CREATED = "api_token_created", "API token created"
        API_TOKEN_REVOKED = "api_token_revoked", "API token revoked"
        ADMIN_VIEWED = "admin_viewed", "Viewed in the Django admin"
        ADMIN_CHANGED = "admin_changed", "Changed in the Django admin"
        ASSIGNMENT_CHANGED = "assignment_changed", "Assignment changed"
        STUDY_CHANGED = "study_changed", "Study or response set changed"
        LOGIN_LOCKED = "login_locked", "Sign-in locked (too many wrong passwords)"
        MFA_FAILED = "mfa_failed", "Wrong second-factor code"
        MFA_LOCKED = "mfa_locked", "Second factor locked (too many wrong codes)"
        RECOVERY_CODES_VIEWED = "recovery_codes_viewed", "Recovery codes viewed"
        RECOVERY_CODE_USED = "recovery_code_used", "Recovery code used"
        SESSIONS_ENDED = "sessions_ended", "Sessions ended"
        DATASET_DELETED = "dataset_deleted", "Dataset deleted"
        EMAIL_VERIFIED = "email_verified", "Institutional email verified"
        RUBRIC_CHANGED = "rubric_changed", "Rubric written, reviewed or imported"
        GRADING_SAVED = "grading_saved", "Criterion grading draft saved"
        GRADING_SUBMITTED = "grading_submitted", "Criterion grading submitted"
        SSO_LOGIN = "sso_login", "Signed in through an identity provider"
        SSO_REFUSED = "sso_refused", "Identity provider sign-in refused"
        SSO_LINKED = "sso_linked", "Identity provider sign-in joined to an account"
        SSO_LOGOUT = "sso_logout", "Signed out by an identity provider"
        BREAK_GLASS = "break_glass", "Break-glass sign-in link issued or used"
        GOLD_CHANGED = "gold_changed", "Gold or calibration item set"
        QUALITY_POLICY_CHANGED = "quality_policy_changed", "Quality settings changed"
        CLINICIAN_EXCLUDED = "clinician_excluded", "Clinician's reviews left out of reports"
        CLINICIAN_READMITTED = "clinician_readmitted", "Clinician's reviews back in reports"
        ADJUDICATION_ASSIGNED = "adjudication_assigned", "Adjudication assigned"
        ADJUDICATION_SAVED = "adjudication_saved", "Adjudication draft saved"
        ADJUDICATION_SUBMITTED = "adjudication_submitted", "Adjudication submitted"

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    actor_email = models.CharField(max_length=254, blank=True)  # kept for failed sign-ins
    action = models.CharField(max_length=32, choices=Action.choices, db_index=True)
    object_type = models.CharField(max_length=64, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    person_id = models.CharField(max_length=64, blank=True, db_index=True)
    instruction_id = models.CharField(max_length=64, blank=True)
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)
    details = models.JSONField(default=dict, blank=True)

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["actor", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_email} {self.action}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Integrity guard, not business logic: an existing row can never be rewritten.
        if self.pk is not None and not kwargs.get("force_insert"):
            raise PermissionError("the audit trail is append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise PermissionError("the audit trail is append-only")

    @property
    def object_label(self) -> str:
        """The object as people read it: a patient by the pseudonymous ``person_id`` the rest of
        the app shows, never by the database row number ("Patient 9" beside person_id 9000006
        read as two patients)."""
        if self.object_type == "Patient" and self.person_id:
            return f"Patient {self.person_id}"
        return f"{self.object_type} {self.object_id}".strip()
