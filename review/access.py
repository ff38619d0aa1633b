"""Who may see what. Views reach protected objects only through these helpers.

Rules:
- anonymous → the sign-in page;
- signed in, not approved (no application, pending, rejected, revoked, expired approval or
  training certificate, or the active DUA version not signed) → only the application pages;
- clinicians, admins and researchers must have TOTP set up, and must have passed it *in this
  session* (allauth records the methods a session authenticated with): a session signed in with
  the password alone never reaches records, reports or the admin, even once the account has
  TOTP. API bearer tokens (scoring/reports/api.py) are their own factor and skip this;
- clinician → only the instructions assigned to them; anything else is 404, never 403, so the
  existence of an object never leaks;
- researcher → reports and exports, no raw records unless also granted clinician access;
- admin → everything.
Objects a user may not see raise Http404, exactly as missing ones do. A page the user's roles
may not open at all (a researcher on the clinician queue) answers 403 "not available to your
role" (``role_refused``), before any object is looked up.
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from functools import cache as cache_result
from functools import wraps
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, transaction
from django.db.models import Exists, OuterRef, Q
from django.db.models.fields.files import FieldFile
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.http import urlencode

from medalign_site.errors import wants_json
from medalign_site.prepared import PreparedQuery
from review.models import (
    AccessApplication,
    Adjudication,
    Assignment,
    CriterionGrading,
    DUASignature,
    DUAVersion,
    Instruction,
    Patient,
    Review,
    Role,
    Rubric,
    User,
)

APPLICATION_URL_NAME = "application_status"
MFA_SETUP_URL_NAME = "mfa_activate_totp"
MFA_REAUTHENTICATE_URL_NAME = "mfa_reauthenticate"
MFA_ROLES = frozenset({Role.CLINICIAN, Role.ADMIN, Role.RESEARCHER, Role.ADJUDICATOR})
# The session record of a second factor asserted by an identity provider trusted for it
# (review.sso): it stands for TOTP in this session, and for no other.
IDP_SECOND_FACTOR = "idp"
SECOND_FACTOR_TYPES = frozenset({"totp", "recovery_codes", IDP_SECOND_FACTOR})


@dataclass(frozen=True)
class UserAccess:
    roles: frozenset[str] = field(default_factory=frozenset)
    application: AccessApplication | None = None
    reason: str = ""
    needs_mfa: bool = False

    @property
    def is_approved(self) -> bool:
        return bool(self.roles)

    @property
    def is_clinician(self) -> bool:
        return Role.CLINICIAN in self.roles

    @property
    def is_researcher(self) -> bool:
        return Role.RESEARCHER in self.roles

    @property
    def is_admin(self) -> bool:
        return Role.ADMIN in self.roles

    @property
    def is_adjudicator(self) -> bool:
        return Role.ADJUDICATOR in self.roles

    def has(self, *roles: str) -> bool:
        return bool(self.roles & set(roles))


def user_access(user: User | Any, *, today: date | None = None) -> UserAccess:
    """The roles a user holds right now: approved, unexpired, certificate valid, DUA signed.

    Cached on the user object for one request (``request.user`` is rebuilt per request) and in
    the shared cache for ACCESS_CACHE_SECONDS, keyed by user and date (an approval or
    certificate that expires at midnight is re-evaluated then). Every change that can alter the
    result clears the shared entry at once (``clear_cached_access``, called by the services and
    by the receivers in review.receivers); a new DUA version clears every user's entry.
    """
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return UserAccess(reason="not signed in")
    if today is not None:
        return _evaluate(user, today)
    cached = getattr(user, "_access_cache", None)
    if cached is not None:
        return cached
    result = _shared_cached(user, timezone.localdate())
    user._access_cache = result
    return result


_ACCESS_EPOCH_KEY = "review:access:epoch"
_UNSEEN = object()


def _access_key(user_id: int) -> str:
    return f"review:access:user:{user_id}"


def _generation_key(user_id: int) -> str:
    return f"review:access:generation:{user_id}"


def _current_entry(user_id: int, today: date) -> tuple[list[Any] | None, Any, Any]:
    """The user's shared entry if it is current (else None), the DUA epoch and the user's
    generation.

    An entry is [date, epoch, access, user row or None, generation] (JSON: the shared cache
    stores signed JSON, never pickles, medalign_site/cache_codec.py): one cache read gives the
    request its user and its access evaluation. It is current when it is today's, of the
    current DUA epoch, and of the user's current generation: every clear
    (``clear_cached_access``) gives the user a new generation, so an entry written by a request
    that read the database before the clear is never used, even if that request writes it
    after the clear.
    """
    key, generation_key = _access_key(user_id), _generation_key(user_id)
    found = cache.get_many([key, _ACCESS_EPOCH_KEY, generation_key])
    epoch = found.get(_ACCESS_EPOCH_KEY, 0)
    generation = found.get(generation_key, 0)
    entry = found.get(key)
    if (
        not isinstance(entry, list)
        or len(entry) != 5
        or entry[0] != today.isoformat()
        or entry[1] != epoch
        or entry[4] != generation
    ):
        return None, epoch, generation
    return entry, epoch, generation


def _shared_cached(user: User, today: date) -> UserAccess:
    seconds = settings.ACCESS_CACHE_SECONDS
    if not seconds:
        return _evaluate(user, today)
    # The generation is read before the access rows are: a change committed after this read
    # gives the user a new one, and the entry written below is then ignored.
    entry, epoch, generation = _current_entry(user.pk, today)
    if entry is not None:
        access = _access_from_json(entry[2])
        if access is not None:
            return access
    result = _evaluate(user, today)
    # The user row goes in only when it was read from the database in this generation
    # (review.auth_backends notes the generation it saw before reading it); otherwise the entry
    # carries the access alone, and the next request reads the user from the database.
    seen = getattr(user, "_access_generation", _UNSEEN)
    row = _user_row(user) if seen == generation else None
    cache.set(
        _access_key(user.pk),
        [today.isoformat(), epoch, _access_to_json(result), row, generation],
        seconds,
    )
    return result


# --- rows in the entry: a model instance as [column names, values] -------------------------------
def _row(obj: Any, names: tuple[str, ...]) -> list[Any]:
    values = []
    for name in names:
        value = obj.__dict__.get(name) if name in obj.__dict__ else getattr(obj, name)
        if isinstance(value, FieldFile):
            value = value.name  # a FileField's column is the file's name
        values.append(value)
    return [list(names), values]


def _from_row(model: type[Any], names: tuple[str, ...], row: Any) -> Any:
    """The instance a row describes, or None if the row is not one of ``model``'s current
    columns (written by another version of the model)."""
    if not isinstance(row, list) or len(row) != 2 or tuple(row[0]) != names:
        return None
    values = row[1]
    if not isinstance(values, list) or len(values) != len(names):
        return None
    return model.from_db(DEFAULT_DB_ALIAS, list(names), values)


@cache_result
def _application_fields() -> tuple[str, ...]:
    return tuple(f.attname for f in AccessApplication._meta.concrete_fields)


def _access_to_json(access: UserAccess) -> dict[str, Any]:
    application = access.application
    return {
        "roles": sorted(access.roles),
        "reason": access.reason,
        "needs_mfa": access.needs_mfa,
        "application": None if application is None else _row(application, _application_fields()),
    }


def _access_from_json(data: Any) -> UserAccess | None:
    try:
        roles = frozenset(str(role) for role in data["roles"])
        application = None
        if data["application"] is not None:
            application = _from_row(AccessApplication, _application_fields(), data["application"])
            if application is None:
                return None
        return UserAccess(
            roles=roles,
            application=application,
            reason=str(data["reason"]),
            needs_mfa=bool(data["needs_mfa"]),
        )
    except (KeyError, TypeError):
        return None


# --- the signed-in user from the same entry (review.auth_backends) ------------------------------
@cache_result
def _user_fields() -> tuple[str, ...]:
    # Every column but the password hash, which never goes into the cache: the entry carries the
    # session's check value (an HMAC of it, as the session itself does) instead.
    return tuple(f.attname for f in User._meta.concrete_fields if f.attname != "password")


def _user_row(user: User) -> list[Any]:
    return [*_row(user, _user_fields()), user.get_session_auth_hash()]


def cached_user(user_id: Any) -> tuple[User | None, Any]:
    """The user as the shared access entry holds them (with their access), or None to read the
    database (no entry, yesterday's, a previous DUA epoch or generation, no row in it, caching
    off); and the user's generation, which the caller notes on a user it reads from the
    database (``_access_generation``) so that its row may go into the next entry.

    The entry is cleared, and the generation renewed, whenever the user row changes (a save, a
    deletion: review.receivers) as when their access does, so a deactivated account or a changed
    password is seen by the next request; the password itself stays deferred
    (``User.get_session_auth_hash``).
    """
    if not settings.ACCESS_CACHE_SECONDS:
        return None, _UNSEEN
    try:
        pk = int(user_id)
    except (TypeError, ValueError):
        return None, _UNSEEN
    entry, _epoch, generation = _current_entry(pk, timezone.localdate())
    if entry is None or not isinstance(entry[3], list) or len(entry[3]) != 3:
        return None, generation
    names = _user_fields()
    user = _from_row(User, names, entry[3][:2])
    access = _access_from_json(entry[2])
    if user is None or access is None or user.pk != pk:
        return None, generation  # written by another version of the model
    user._session_auth_hash = str(entry[3][2])
    user._access_cache = access
    return user, generation


def _evaluate(user: User, today: date) -> UserAccess:
    application = (
        AccessApplication.objects.filter(user=user, status=AccessApplication.Status.APPROVED)
        .order_by("-decided_at", "-id")
        .first()
    )
    if application is None:
        return UserAccess(reason="no approved application")
    if application.expires_on is not None and application.expires_on < today:
        return UserAccess(application=application, reason="approval expired")
    if application.certificate_expires_on < today:
        return UserAccess(application=application, reason="training certificate expired")
    active = DUAVersion.objects.filter(is_active=True).values_list("id", flat=True).first()
    if (
        active is not None
        and not DUASignature.objects.filter(user=user, dua_version_id=active).exists()
    ):
        return UserAccess(application=application, reason="new DUA version not signed")
    roles = frozenset(application.roles)
    if (
        settings.FORBID_CLINICIAN_RESEARCHER
        and roles & BLIND_ROLES
        and (roles & UNBLINDING_ROLES or user.is_staff or user.is_superuser)
    ):
        # An account approved before the installation forbade the combination: it keeps the
        # side that cannot bias a study.
        roles = roles - BLIND_ROLES
    needs_mfa = bool(roles & MFA_ROLES) and not _has_totp(user)
    return UserAccess(roles=roles, application=application, needs_mfa=needs_mfa)


# Roles that can read which model wrote a response, or the order a review showed them in:
# researchers (reports and the responses export name models), admins (the studies pages, the
# Django admin's responses and reviews).
UNBLINDING_ROLES = frozenset({Role.RESEARCHER, Role.ADMIN})
# Roles that judge responses and must stay blind to which model wrote them.
BLIND_ROLES = frozenset({Role.CLINICIAN, Role.ADJUDICATOR})


def unblinding_roles(user: User | Any) -> list[str]:
    """What lets the account tell which model wrote a response: "researcher", "admin",
    "staff" (Django's admin flags, which open the reviews' shown orders and the responses'
    model names); empty for an account that cannot. A review by such an account is flagged
    (``Review.reviewer_could_unblind``) and left out of reports unless asked for."""
    access = user_access(user)
    found = [role for role in (Role.RESEARCHER, Role.ADMIN) if role in access.roles]
    if getattr(user, "is_staff", False) or getattr(user, "is_superuser", False):
        found.append("staff")
    return [str(role) for role in found]


def can_unblind(user: User | Any) -> bool:
    return bool(unblinding_roles(user))


def unblinding_forbidden(user: User | Any) -> bool:
    """``FORBID_CLINICIAN_RESEARCHER``: an account that can unblind never reviews, even
    through an assignment made before the setting (or before it gained that access)."""
    return bool(settings.FORBID_CLINICIAN_RESEARCHER) and can_unblind(user)


def _has_totp(user: User) -> bool:
    from allauth.mfa.models import Authenticator

    return Authenticator.objects.filter(user=user, type=Authenticator.Type.TOTP).exists()


def clear_cached_access(user: User | None = None, *, user_id: int | None = None) -> None:
    """Forget a user's access evaluation (and cached row) now and again when the transaction
    commits, each time with a new generation.

    Cleared twice: at once, so this request sees the change, and after commit, so a request
    that re-evaluated from the old rows meanwhile cannot keep a stale answer in the cache; the
    new generation makes any entry such a request writes later unusable (``_current_entry``).
    """
    if user is not None:
        user_id = user.pk
        if hasattr(user, "_access_cache"):
            del user._access_cache
    if user_id is None:
        return
    key, generation_key = _access_key(user_id), _generation_key(user_id)
    # Kept well beyond any entry written before it (entries live ACCESS_CACHE_SECONDS).
    keep = max(2 * settings.ACCESS_CACHE_SECONDS, 300)

    def clear() -> None:
        cache.delete(key)
        cache.set(generation_key, uuid.uuid4().hex, keep)

    clear()
    transaction.on_commit(clear)


def clear_all_cached_access() -> None:
    """A new DUA version changes everyone's access: every cached evaluation is stale."""
    cache.set(_ACCESS_EPOCH_KEY, uuid.uuid4().hex, None)
    transaction.on_commit(lambda: cache.set(_ACCESS_EPOCH_KEY, uuid.uuid4().hex, None))


def second_factor_passed(
    request: HttpRequest, *, types: frozenset[str] = SECOND_FACTOR_TYPES
) -> bool:
    """Whether *this session* completed a second factor (TOTP, a recovery code, or the
    multi-factor sign-in of an identity provider trusted for it).

    allauth records every authentication step of a session (password, mfa, reauthentication);
    a session that signed in with the password alone has no "mfa" record, whatever factors the
    account has since enrolled.
    """
    from allauth.account.authentication import get_authentication_records

    return any(
        record.get("method") == "mfa" and record.get("type") in types
        for record in get_authentication_records(request, request.user)
    )


def second_factor_satisfied(request: HttpRequest, access: UserAccess) -> bool:
    """Whether this session may reach protected pages as far as the second factor goes: a
    trusted provider's multi-factor sign-in (TOTP need not be set up then), or TOTP set up and
    passed in this session."""
    if second_factor_passed(request, types=frozenset({IDP_SECOND_FACTOR})):
        return True
    return not access.needs_mfa and second_factor_passed(request)


def second_factor_redirect(request: HttpRequest, access: UserAccess) -> HttpResponse | None:
    """Where an approved user must go before protected pages: TOTP set-up, or the TOTP step.

    None when this session may proceed.
    """
    if not (access.roles & MFA_ROLES):
        return None
    if second_factor_passed(request, types=frozenset({IDP_SECOND_FACTOR})):
        return None
    if access.needs_mfa:
        return redirect(MFA_SETUP_URL_NAME)
    if not second_factor_passed(request):
        url = reverse(MFA_REAUTHENTICATE_URL_NAME)
        return redirect(f"{url}?{urlencode({'next': request.get_full_path()})}")
    return None


# --- view decorators ----------------------------------------------------------------------------
View = TypeVar("View", bound=Callable[..., HttpResponse])


def page_owner(user: User | Any) -> str:
    """Which account a page was opened by, as its script knows it: keys the tab's unsent edits
    (sessionStorage), so another account signed in later in the same tab never sends them, and
    lets the page tell "not yours" from "not found" once the browser's account has changed
    (``X-Account`` on a refusal, review.json_auth). Not the user id: nothing on the page may
    identify the clinician's place in any ordering."""
    return salted_hmac("review-storage-owner", str(user.pk)).hexdigest()[:16]


def role_required(*roles: str, mfa: bool = True) -> Callable[[View], View]:
    """Let through users holding one of ``roles`` (admins always), else 403 saying the page is
    not for their role (``role_refused``).

    Anonymous users go to sign-in; signed-in users without approved access go to their
    application page; users without TOTP go to the TOTP set-up page, and sessions that have not
    passed TOTP to the TOTP step.
    """

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                from django.contrib.auth.views import redirect_to_login

                return redirect_to_login(request.get_full_path())
            access = user_access(request.user)
            if not access.is_approved:
                return redirect(APPLICATION_URL_NAME)
            if mfa and (to_second_factor := second_factor_redirect(request, access)):
                return to_second_factor
            if not (access.is_admin or access.has(*roles)):
                return role_refused(request, access, roles)
            request.access = access  # type: ignore[attr-defined]
            return view(request, *args, **kwargs)

        return wrapped  # type: ignore[return-value]

    return decorator


ROLE_PLURALS = {
    Role.CLINICIAN: "clinicians",
    Role.RESEARCHER: "researchers",
    Role.ADMIN: "admins",
    Role.ADJUDICATOR: "adjudicators",
}


def role_refused(request: HttpRequest, access: UserAccess, roles: tuple[str, ...]) -> HttpResponse:
    """A page this user's roles may not open: 403 saying so, naming whom it is for.

    Refused before any object is looked up, so the answer is the same whether the id in the
    address exists or not; objects a role may open but the user may not see stay 404.
    """
    wanted = [*roles, Role.ADMIN] if Role.ADMIN not in roles else list(roles)
    meant_for = " and ".join(ROLE_PLURALS.get(r, r) for r in dict.fromkeys(wanted))
    held = ", ".join(sorted(access.roles))
    message = f"This page is for {meant_for}: it is not available to your role ({held})."
    if wants_json(request):
        return JsonResponse({"error": "role", "message": message}, status=403)
    return render(request, "role_refused.html", {"meant_for": meant_for, "held": held}, status=403)


clinician_required = role_required(Role.CLINICIAN)
researcher_required = role_required(Role.RESEARCHER)
admin_required = role_required(Role.ADMIN)
adjudicator_required = role_required(Role.ADJUDICATOR)
# The record endpoints: clinicians reach the records of their assignments, adjudicators those of
# their adjudications (``instruction_get_for_clinician``).
record_reader_required = role_required(Role.CLINICIAN, Role.ADJUDICATOR)


# --- scoped object access -------------------------------------------------------------------------
def assignment_get_for_clinician(user: User, *, assignment_id: int) -> Assignment:
    """The clinician's own assignment, or 404 (missing and not-yours look the same)."""
    try:
        return Assignment.objects.select_related(
            "instruction__dataset", "instruction__patient"
        ).get(pk=assignment_id, clinician=user)
    except Assignment.DoesNotExist:
        raise Http404 from None


def instruction_get_for_clinician(user: User, *, instruction_id: int) -> Instruction:
    """An instruction the clinician is assigned to, holds rubric work on (writing, reviewing
    or grading its rubric) or adjudicates; admins: any. Else 404."""
    qs = Instruction.objects.select_related("dataset", "patient")
    if not user_access(user).is_admin:
        # EXISTS, not a join: a clinician asked the instruction in two rounds holds two
        # assignments to it, and a join would return the instruction twice.
        qs = qs.filter(
            Exists(Assignment.objects.filter(instruction_id=OuterRef("pk"), clinician=user))
        )
    try:
        return qs.get(pk=instruction_id)
    except Instruction.DoesNotExist:
        pass
    # Rubric work is the rarer path: asked only once the ranking assignment is not there.
    rubric_work = Q(rubrics__author=user) | Q(rubrics__reviewer=user) | Q(gradings__clinician=user)
    found = (
        Instruction.objects.select_related("dataset", "patient")
        .filter(rubric_work, pk=instruction_id)
        .distinct()
        .first()
    )
    if (
        found is None
        and Adjudication.objects.filter(adjudicator=user, instruction_id=instruction_id).exists()
    ):
        # An adjudicator reads the record of the instruction they adjudicate.
        found = Instruction.objects.select_related("dataset", "patient").get(pk=instruction_id)
    if found is None:
        raise Http404
    return found


def rubric_get_for_author(user: User, *, rubric_id: int) -> Rubric:
    """A rubric version the clinician was asked to write, or 404."""
    rubric = (
        Rubric.objects.select_related("instruction__dataset", "instruction__patient")
        .filter(pk=rubric_id, author=user)
        .first()
    )
    if rubric is None:
        raise Http404
    return rubric


def rubric_get_for_reviewer(user: User, *, rubric_id: int) -> Rubric:
    """A rubric version the clinician was asked to review (never their own), or 404."""
    rubric = (
        Rubric.objects.select_related("instruction__dataset", "instruction__patient")
        .filter(pk=rubric_id, reviewer=user)
        .exclude(author=user)
        .first()
    )
    if rubric is None:
        raise Http404
    return rubric


def grading_get_for_clinician(user: User, *, grading_id: int) -> CriterionGrading:
    """The clinician's own grading assignment, or 404."""
    grading = (
        CriterionGrading.objects.select_related(
            "instruction__dataset", "instruction__patient", "rubric"
        )
        .filter(pk=grading_id, clinician=user)
        .first()
    )
    if grading is None:
        raise Http404
    return grading


def patient_get_for_user(user: User, *, patient_id: int) -> Patient:
    """A patient whose record the user may read: via an assignment, or as admin. Else 404."""
    qs = Patient.objects.select_related("dataset")
    if not user_access(user).is_admin:
        qs = qs.filter(instructions__assignments__clinician=user).distinct()
    try:
        return qs.get(pk=patient_id)
    except Patient.DoesNotExist:
        raise Http404 from None


# The annotation path's scoped reads, compiled once per process (medalign_site.prepared): the
# same rules as a queryset per request, at a fraction of the CPU.
_CLINICIAN_REVIEW: PreparedQuery[Review] = PreparedQuery(
    lambda p: Review.objects.select_related("assignment__instruction").filter(
        pk=p.review_id, assignment__clinician_id=p.clinician_id
    ),
    params=("review_id", "clinician_id"),
)
# A clinician may hold one assignment per study for an instruction (a later round asks again,
# with another response set): the latest round's, unless the page names the study.
_CLINICIAN_ASSIGNMENT: PreparedQuery[Assignment] = PreparedQuery(
    lambda p: (
        Assignment.objects.select_related("instruction__dataset", "instruction__patient", "review")
        .filter(instruction_id=p.instruction_id, clinician_id=p.clinician_id)
        .order_by("-study_id")
    ),
    params=("instruction_id", "clinician_id"),
)
_CLINICIAN_ASSIGNMENT_IN_STUDY: PreparedQuery[Assignment] = PreparedQuery(
    lambda p: Assignment.objects.select_related(
        "instruction__dataset", "instruction__patient", "review"
    ).filter(instruction_id=p.instruction_id, clinician_id=p.clinician_id, study_id=p.study_id),
    params=("instruction_id", "clinician_id", "study_id"),
)


def review_get_for_clinician(user: User, *, review_id: int) -> Review:
    """The clinician's own review, or 404."""
    review = review_find_for_clinician(user, review_id=review_id)
    if review is None:
        raise Http404
    return review


def review_find_for_clinician(user: User, *, review_id: int) -> Review | None:
    """The clinician's own review (with its assignment and instruction), or None: for a service,
    which answers a missing review its own way."""
    return _CLINICIAN_REVIEW.first(review_id=review_id, clinician_id=user.pk)


def assignment_get_for_instruction(
    user: User, *, instruction_id: int, study_id: int | None = None
) -> Assignment:
    """The clinician's own assignment to an instruction (by instruction pk), or 404: in
    ``study_id`` if given, else in the latest study that asks them.

    Admins get no exception here: reviewing is done by the assigned clinician only.
    """
    # With its review (if started): the review page needs both, in one query.
    if study_id is None:
        assignment = _CLINICIAN_ASSIGNMENT.first(
            instruction_id=instruction_id, clinician_id=user.pk
        )
    else:
        assignment = _CLINICIAN_ASSIGNMENT_IN_STUDY.first(
            instruction_id=instruction_id, clinician_id=user.pk, study_id=study_id
        )
    if assignment is None:
        raise Http404
    return assignment


def adjudication_get_for_adjudicator(user: User, *, adjudication_id: int) -> Adjudication:
    """The adjudicator's own adjudication, or 404: missing, someone else's, and one of an
    instruction they were ever asked to review (their own review may be among those it
    resolves) all look the same."""
    adjudication = (
        Adjudication.objects.select_related("instruction__dataset", "instruction__patient")
        .filter(pk=adjudication_id, adjudicator=user)
        .first()
    )
    if (
        adjudication is None
        or Assignment.objects.filter(
            clinician=user, instruction_id=adjudication.instruction_id
        ).exists()
    ):
        raise Http404
    return adjudication
