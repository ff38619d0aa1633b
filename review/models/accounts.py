"""Accounts, roles and the DUA workflow (modelled on PhysioNet's credentialed access)."""

import secrets
from datetime import date
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, BaseUserManager, PermissionsMixin
from django.db import models
from django.utils import timezone
from django.utils.crypto import salted_hmac


def _pseudonym() -> str:
    # Stable, random, meaningless id used in exports instead of names or emails.
    return "C" + secrets.token_hex(5).upper()


class UserManager(BaseUserManager["User"]):
    use_in_migrations = True

    def _create_user(self, email: str, password: str | None, **extra: object) -> "User":
        if not email:
            raise ValueError("An email address is required")
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_user(self, email: str, password: str | None = None, **extra: object) -> "User":
        extra.setdefault("is_staff", False)
        extra.setdefault("is_superuser", False)
        return self._create_user(email, password, **extra)

    def create_superuser(self, email: str, password: str | None = None, **extra: object) -> "User":
        extra.setdefault("is_staff", True)
        extra.setdefault("is_superuser", True)
        return self._create_user(email, password, **extra)


class User(AbstractBaseUser, PermissionsMixin):
    """A person who signs in with an email address (no usernames).

    Roles are not stored here: they come from the user's approved, unexpired AccessApplication,
    so that expiry and revocation end access without any second place to update.
    """

    email = models.EmailField(unique=True)
    full_name = models.CharField(max_length=200, blank=True)
    pseudonym = models.CharField(max_length=16, unique=True, default=_pseudonym, editable=False)
    is_staff = models.BooleanField(default=False, help_text="May sign in to Django's admin.")
    is_active = models.BooleanField(default=True)
    date_joined = models.DateTimeField(default=timezone.now)
    # Part of every session's check value (get_session_auth_hash): a new one ends every session
    # of the account at its next request (review.services.accounts.user_sessions_end). Empty
    # for accounts that never had their sessions ended, so existing sessions stay valid.
    session_epoch = models.CharField(max_length=32, blank=True, default="", editable=False)
    # The demo's simulated clinicians: accounts nobody signs in as, whose reviews come from a
    # generator. Reports count their reviews apart and assignment gives them no new work.
    is_simulated = models.BooleanField(default=False, editable=False)

    objects = UserManager()

    # Set on instances by review.access / review.auth_backends (not columns): the session's check
    # value carried by a user read from the shared access entry, and the access generation seen
    # before a user was read from the database.
    _session_auth_hash: str
    _access_generation: Any

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: list[str] = []

    class Meta:
        ordering = ["email"]

    def __str__(self) -> str:
        return self.email

    def get_session_auth_hash(self) -> str:
        # A user read from the shared access entry (review.access.cached_user) has its password
        # hash deferred and carries this value instead; once the password is loaded or set on
        # the instance, the hash is computed from it as usual.
        cached = self.__dict__.get("_session_auth_hash")
        if cached is not None and "password" not in self.__dict__:
            return str(cached)
        return super().get_session_auth_hash()

    def _get_session_auth_hash(self, secret: str | None = None) -> str:
        # Django's HMAC of the password hash, with the session epoch added once there is one.
        if not self.session_epoch:
            return super()._get_session_auth_hash(secret=secret)  # type: ignore[misc]
        key_salt = "review.User.get_session_auth_hash"
        value = f"{self.password}:{self.session_epoch}"
        return salted_hmac(key_salt, value, secret=secret, algorithm="sha256").hexdigest()


class Role(models.TextChoices):
    CLINICIAN = "clinician", "Clinician"
    RESEARCHER = "researcher", "Researcher"
    ADMIN = "admin", "Admin"
    # Resolves clinicians' disagreements (review.models.quality.Adjudication): reads the
    # instruction, the record, the responses (blinded) and the other clinicians' judgements,
    # never their own reviews'.
    ADJUDICATOR = "adjudicator", "Adjudicator"


class DUAVersion(models.Model):
    """A version of the data use agreement. Publishing a new one requires every user to re-sign."""

    version = models.CharField(max_length=32, unique=True)
    title = models.CharField(max_length=200, default="MedAlign Data Use Agreement")
    text = models.TextField()
    is_active = models.BooleanField(default=False, db_index=True)
    published_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-published_at", "-id"]
        verbose_name = "DUA version"
        constraints = [
            models.UniqueConstraint(
                fields=["is_active"], condition=models.Q(is_active=True), name="one_active_dua"
            )
        ]

    def __str__(self) -> str:
        return f"DUA {self.version}"


class DUASignature(models.Model):
    """A user's signature of one DUA version: typed full name and time."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    dua_version = models.ForeignKey(DUAVersion, on_delete=models.PROTECT, related_name="signatures")
    typed_name = models.CharField(max_length=200)
    signed_at = models.DateTimeField(default=timezone.now)
    ip_address = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "dua_version"], name="one_signature_per_dua")
        ]

    def __str__(self) -> str:
        return f"{self.user} signed {self.dua_version}"


class RejectedEmailDomain(models.Model):
    """Email domains whose addresses are not accepted as institutional (personal mail)."""

    domain = models.CharField(max_length=253, unique=True)
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["domain"]

    def __str__(self) -> str:
        return self.domain


def certificate_upload_to(instance: "AccessApplication", filename: str) -> str:
    # The original file name is not kept in the path: it may carry personal data.
    return f"certificates/{instance.user_id}/{secrets.token_hex(16)}"


class AccessApplication(models.Model):
    """An application for access to the protected data.

    Status and allowed transitions (all made in review.services.accounts, never in forms):
      pending            -> approved (admin, with roles and an expiry date)
      pending            -> rejected (admin, with a reason the applicant sees)
      pending            -> changes_requested (admin, with a reason)
      changes_requested  -> pending (the applicant resubmits)
      approved           -> revoked (admin, any time, with a reason)
    Expiry is not a stored transition: an approved application grants access only while
    ``expires_on`` and the training certificate's expiry are in the future and the user has
    signed the active DUA version (see review.access.user_access).
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending review"
        CHANGES_REQUESTED = "changes_requested", "Changes requested"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        REVOKED = "revoked", "Revoked"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="applications"
    )
    status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    full_name = models.CharField(max_length=200)
    institution = models.CharField(max_length=200)
    institutional_email = models.EmailField()
    # Set when the applicant opened the link sent to that address: approval waits
    # for it, unless an operator approves on the server (bootstrap_admin, the demo).
    institutional_email_verified_at = models.DateTimeField(null=True, blank=True)
    research_use = models.TextField()
    requested_role = models.CharField(max_length=20, choices=Role.choices, default=Role.CLINICIAN)
    specialty = models.CharField(max_length=100, blank=True)
    certificate = models.FileField(upload_to=certificate_upload_to, max_length=300)
    certificate_content_type = models.CharField(max_length=50)
    # The file's sha256 and when it came: approval needs a view of these bytes after that time.
    certificate_sha256 = models.CharField(max_length=64, blank=True)
    certificate_uploaded_at = models.DateTimeField(null=True, blank=True)
    certificate_completed_on = models.DateField()
    certificate_expires_on = models.DateField()
    storage_attestation = models.BooleanField(default=False)
    dua_signature = models.ForeignKey(DUASignature, on_delete=models.PROTECT, related_name="+")
    submitted_at = models.DateTimeField(default=timezone.now)
    # Decision
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="reviewed_applications",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    is_clinician = models.BooleanField(default=False)
    is_researcher = models.BooleanField(default=False)
    is_admin = models.BooleanField(default=False)
    is_adjudicator = models.BooleanField(default=False)
    expires_on = models.DateField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-submitted_at"]
        indexes = [models.Index(fields=["user", "status"])]

    def __str__(self) -> str:
        return f"Application #{self.pk} by {self.user} ({self.status})"

    @property
    def roles(self) -> list[str]:
        return [
            role
            for role, flag in (
                (Role.CLINICIAN, self.is_clinician),
                (Role.RESEARCHER, self.is_researcher),
                (Role.ADMIN, self.is_admin),
                (Role.ADJUDICATOR, self.is_adjudicator),
            )
            if flag
        ]

    def access_ends_on(self) -> date | None:
        if self.expires_on is None:
            return None
        return min(self.expires_on, self.certificate_expires_on)
