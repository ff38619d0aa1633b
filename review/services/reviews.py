"""Starting, autosaving, submitting and reopening reviews.

Every state change of a Review happens here (see the transitions in ``Review``'s docstring).

The save protocol (one design for the review page, blinding and load):
- The browser addresses responses by per-review random handles (``Review.handles``), never by
  database ids.
- It sends *edits*, not whole forms: ``{"handle", "field", "value", "at"}`` where ``at`` is when
  the clinician made the edit (ms since the epoch; clamped to the server's clock). Edits merge
  into ``Review.draft`` per response and field, and the later edit wins. Applying an edit twice
  changes nothing, so the browser may resend anything it is not sure arrived (a reload, a lost
  answer, a second tab) without a version check to refuse it.
- Time spent is not idempotent, so each request carries its tab id and a sequence number; the
  seconds of a sequence number already counted are not counted again.
- A draft save is one read (the access check) and one conditional UPDATE; judgement rows are
  written only at submit, which carries the final edits itself.
- A submitted review takes no edits: they are answered ``read_only`` with the edits that were
  not applied, so the page can say exactly what happened to them.
Payloads are validated completely before anything is written. The one exception is text the
database cannot store (``review.storable``: a NUL, a lone surrogate) in an edit's value: that edit
is refused by name (``edits[i]``, all of them in ``refused``) and the rest of its batch is saved,
so a pasted character never costs the clinician the other edits.
"""

import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from medalign_site.prepared import (
    Linked,
    PreparedQuery,
    insert_if,
    insert_rows,
    update_rows,
    update_then_insert,
)
from review.access import (
    can_unblind,
    review_find_for_clinician,
    unblinding_forbidden,
    unblinding_roles,
)
from review.models import (
    Assignment,
    AuditEvent,
    ResponseJudgement,
    Review,
    StudyResponse,
    User,
)
from review.models.reviews import new_handle
from review.selectors.drafts import (
    JUDGEMENT_FIELDS,
    Judged,
    draft_values,
    review_judgements,
    review_values,
)
from review.selectors.reviews import active_error_tags, error_tags
from review.site import site_url
from review.storable import UNSTORABLE, storable

from .audit import audit_event, audit_record

MAX_COMMENT_CHARS = 5000
MAX_NOTE_CHARS = 2000
MAX_EDITS = 500  # per request; a page sends a few dozen at most
MAX_TABS = 20  # sequence numbers kept per review, newest tabs first
# Time spent: the client reports active seconds since its last acknowledged save. One save may
# add at most this much, and never more than the wall-clock time since the previous save (plus
# slack), so a buggy or hostile client cannot inflate the figure.
MAX_SECONDS_PER_SAVE = 300
SECONDS_SLACK = 5
# The audit trail gets one REVIEW_SAVED per review per minute at most: autosave fires every few
# seconds while someone types, and a row per keystroke pause would bury the events that matter.
SAVE_AUDIT_INTERVAL = timedelta(minutes=1)

PAYLOAD_KEYS = {"edits", "tab", "seq", "active_seconds"}
EDIT_KEYS = {"handle", "field", "value", "at"}
REVIEW_FIELDS = ("cannot_assess", "cannot_assess_note")
# An adjudication's review-level field (review.services.adjudications): why it resolves so.
MAX_REASON_CHARS = 5000


class ReviewError(Exception):
    """A request the review cannot take; ``status`` is the HTTP status the view answers with."""

    status = 400
    code = "invalid"

    def __init__(self, message: str, *, field: str = "", extra: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.extra = extra or {}

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.field:
            data["field"] = self.field
        return data | self.extra


class InvalidReview(ReviewError):
    status = 400
    code = "invalid"


class IncompleteReview(ReviewError):
    status = 400
    code = "incomplete"


class ReviewReadOnly(ReviewError):
    status = 409
    code = "read_only"


class ReviewForbidden(ReviewError):
    status = 403
    code = "forbidden"


FORBIDDEN_MESSAGE = (
    "This installation forbids reviewing by an account that can read model names "
    "(FORBID_CLINICIAN_RESEARCHER): yours holds {roles} access. Nothing was saved; an admin "
    "can give the assignment to a clinician without it."
)


def review_check_allowed(clinician: User) -> None:
    """Refuse an account that can unblind where the installation forbids it, whatever
    assignment it holds (one made before the setting, or before it gained that access)."""
    if unblinding_forbidden(clinician):
        roles = " and ".join(unblinding_roles(clinician))
        raise ReviewForbidden(FORBIDDEN_MESSAGE.format(roles=roles))


# --- starting ------------------------------------------------------------------------------------
def shown_order_for(response_ids: list[int]) -> list[int]:
    """The response ids in an order drawn by the operating system's CSPRNG.

    Drawn once, when the review first shows its responses, and stored (``Review.shown_order``):
    reloading shows the same order, two clinicians see independent orders (which spreads
    position bias), and nothing a clinician can see (their id, the instruction's, the response
    ids, the other reviews they hold) predicts it. A seeded generator would: one self-naming
    response would then unblind its model on every instruction.
    """
    order = sorted(response_ids)
    _CSPRNG.shuffle(order)
    return order


_CSPRNG = secrets.SystemRandom()


def review_get_or_start(
    *,
    assignment: Assignment,
    response_ids: list[int] | None = None,
    could_unblind: bool = False,
    events: list[AuditEvent] | None = None,
) -> Review:
    """The assignment's review, started (as a draft with a shown order) on first open.

    The order is drawn from the study's response set for the instruction
    (``review.selectors.studies``); starting freezes that set (``review.services.studies``
    refuses to change it from then on). ``response_ids``, the set's ids when the caller has read
    them already, saves reading them again on SQLite; on PostgreSQL the set is read again under
    a shared lock on the study, so an admin's change to the set cannot slip in between the read
    and the review's INSERT. A draft opened while the set was still empty has shown nothing and
    draws its order the first time it is opened after responses join. ``could_unblind``: the
    reviewer can read model names or shown orders (``review.access.can_unblind``:
    researcher, admin or staff; ``Review.reviewer_could_unblind``).
    ``assignment.review`` is used when the caller fetched it with the assignment
    (``select_related("review")``), saving a query. ``events``: unsaved audit rows about the
    review (``review_open``), written with its start when the start can take them (PostgreSQL:
    one statement) and marked saved; the caller writes those left unsaved.
    """
    events = events or []
    try:
        review: Review | None = assignment.review
    except Review.DoesNotExist:
        review = None
    if review is not None:
        if len(review.handles) != len(review.shown_order):
            # A review written without handles (by hand, or an older script): give it some
            # before the page addresses its responses.
            with transaction.atomic():
                review = Review.objects.select_for_update().get(pk=review.pk)
                if len(review.handles) != len(review.shown_order):
                    review.handles = [new_handle() for _ in review.shown_order]
                    review.save(update_fields=["handles"])
        if review.status == Review.Status.DRAFT and not review.shown_order:
            with transaction.atomic():
                review = Review.objects.select_for_update().get(pk=review.pk)
                if not review.shown_order:
                    order = shown_order_for(_set_ids(assignment, None))
                    review.shown_order = order
                    review.handles = [new_handle() for _ in order]
                    review.save(update_fields=["shown_order", "handles"])
        if could_unblind and not review.reviewer_could_unblind:
            Review.objects.filter(pk=review.pk).update(reviewer_could_unblind=True)
            review.reviewer_could_unblind = True
        return review
    try:
        review = _start_in_one_statement(assignment, response_ids, could_unblind, events)
        if review is None:
            with transaction.atomic():
                order = shown_order_for(_set_ids(assignment, response_ids))
                review = Review(
                    assignment=assignment,
                    shown_order=order,
                    handles=[new_handle() for _ in order],
                    reviewer_could_unblind=could_unblind,
                )
                insert_rows([review], return_pk=True)
    except IntegrityError:
        # Two tabs opened the page at once: the other request started it first.
        return Review.objects.get(assignment=assignment)
    assignment.review = review
    return review


def review_open(
    *,
    assignment: Assignment,
    response_ids: list[int],
    could_unblind: bool,
    request: HttpRequest,
) -> Review:
    """The review page's review (``review_get_or_start``), the view audited: the instruction and
    the record viewed, two rows about the review. A first open writes them with the review's
    start (one statement on PostgreSQL); a later one writes them by themselves."""
    instruction = assignment.instruction
    events = [
        audit_event(
            action=action,
            actor=None,
            request=request,
            obj=None,
            person_id=instruction.person_id,
            instruction_id=instruction.instruction_id,
        )
        for action in (AuditEvent.Action.INSTRUCTION_VIEWED, AuditEvent.Action.RECORD_VIEWED)
    ]
    for event in events:
        event.object_type = Review.__name__
    review = review_get_or_start(
        assignment=assignment,
        response_ids=response_ids,
        could_unblind=could_unblind,
        events=events,
    )
    unsaved = [event for event in events if event._state.adding]
    for event in unsaved:
        event.object_id = str(review.pk)
    insert_rows(unsaved, return_pk=True)
    return review


# The study locked FOR SHARE and its response set for the instruction compared with the one the
# order was drawn from: the review (and the rows that go with it) is INSERTed only if they are
# the same. The set is read in the statement's snapshot, taken before any wait for the lock; a
# change to the set that held the lock meanwhile left a new version of the study's row
# (``studies._lock_for_set_change``), which the locked row then is, and the snapshot's is not:
# such a start writes nothing and the caller reads the set again, after the lock.
_START_CONDITION = (
    "s AS (SELECT id, xmin FROM review_study WHERE id = %s FOR SHARE),"
    " cur AS (SELECT array_agg(response_id::bigint ORDER BY response_id) AS ids"
    " FROM review_studyresponse WHERE study_id = %s AND instruction_id = %s),"
    " won AS (SELECT 1 FROM s, cur WHERE cur.ids = %s::bigint[]"
    " AND s.xmin = (SELECT xmin FROM review_study WHERE id = %s))"
)


def _start_in_one_statement(
    assignment: Assignment,
    response_ids: list[int] | None,
    could_unblind: bool,
    events: list[AuditEvent],
) -> Review | None:
    """PostgreSQL, with the set already read (``response_ids``, not empty): the review started
    and ``events`` (rows about it: their object is the review) written in one statement; None
    when the set changed since it was read, or elsewhere, for the caller's transaction."""
    if not response_ids or transaction.get_connection().vendor != "postgresql":
        return None
    order = shown_order_for(response_ids)
    review = Review(
        assignment=assignment,
        shown_order=order,
        handles=[new_handle() for _ in order],
        reviewer_could_unblind=could_unblind,
    )
    params = [
        assignment.study_id,
        assignment.study_id,
        assignment.instruction_id,
        sorted(order),
        assignment.study_id,
    ]
    linked = [Linked(event, parent=0, attname="object_id") for event in events]
    if transaction.get_connection().in_atomic_block:
        # A savepoint, so that a second start's IntegrityError leaves the caller's transaction
        # usable (in a request's autocommit the statement is atomic by itself).
        with transaction.atomic():
            written = insert_if(_START_CONDITION, params, rows=[review], linked=linked)
    else:
        written = insert_if(_START_CONDITION, params, rows=[review], linked=linked)
    if not written:
        return None
    for event in events:
        event.object_id = str(review.pk)
    return review


_SET_IDS: PreparedQuery[int] = PreparedQuery(
    lambda p: StudyResponse.objects.filter(
        study_id=p.study_id, instruction_id=p.instruction_id
    ).values_list("response_id", flat=True),
    params=("study_id", "instruction_id"),
)


def _set_ids(assignment: Assignment, response_ids: list[int] | None) -> list[int]:
    """The study's response ids for the assignment's instruction; call inside a transaction."""
    connection = transaction.get_connection()
    if connection.vendor == "postgresql":
        # FOR SHARE of the study: starting reviews never wait for each other, only for a change to
        # the set (``studies._lock_for_set_change`` locks the row). The ids are read in a statement
        # of their own once the lock is held: a statement's snapshot is taken when it begins, so
        # read in the locking statement they could predate a change it waited for.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM review_study WHERE id = %s FOR SHARE", [assignment.study_id]
            )
            cursor.execute(
                "SELECT response_id FROM review_studyresponse"
                " WHERE study_id = %s AND instruction_id = %s",
                [assignment.study_id, assignment.instruction_id],
            )
            return [row[0] for row in cursor.fetchall()]
    if response_ids is None:
        response_ids = _SET_IDS.all(
            study_id=assignment.study_id, instruction_id=assignment.instruction_id
        )
    return response_ids


# --- validating --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Edit:
    key: str  # "<handle>.<field>" for a response, "<field>" for the review
    value: Any
    at: int  # ms since the epoch, when the clinician made the edit


@dataclass(frozen=True)
class EditBatch:
    edits: list[Edit]
    tab: str
    seq: int
    active_seconds: int
    # Edits whose text cannot be stored: (their index in the request, their key), left out.
    refused: tuple[tuple[int, str], ...] = ()


def _active_tag_slugs() -> frozenset[str]:
    return frozenset(t.slug for t in active_error_tags())


def _int(value: Any, field: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    # bool is an int in Python; a JSON true must not pass for 1.
    if type(value) is not int or value < minimum or (maximum is not None and value > maximum):
        bounds = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise InvalidReview(f"{field} must be a whole number {bounds}", field=field)
    return value


def _str(value: Any, field: str, *, max_chars: int) -> str:
    if not isinstance(value, str):
        raise InvalidReview(f"{field} must be text", field=field)
    if len(value) > max_chars:
        raise InvalidReview(f"{field} is longer than {max_chars} characters", field=field)
    return value


def _value(field: str, value: Any, where: str, *, n: int) -> Any:
    """The edit's value checked for its field; InvalidReview naming it otherwise."""
    if field == "rank":
        return None if value is None else _int(value, where, minimum=1, maximum=n)
    if field == "is_correct":
        if value is not None and type(value) is not bool:
            raise InvalidReview(f"{where} must be true, false or null", field=where)
        return value
    if field == "tags":
        if (
            not isinstance(value, list)
            or not all(isinstance(s, str) for s in value)
            or len(set(value)) != len(value)
        ):
            raise InvalidReview(f"{where} must be a list of tags without repeats", field=where)
        if any(slug not in _active_tag_slugs() for slug in value):
            raise InvalidReview(f"{where} holds an unknown tag", field=where)
        return sorted(value)
    if field == "comment":
        return _str(value, where, max_chars=MAX_COMMENT_CHARS)
    if field == "cannot_assess":
        if value not in Review.CannotAssess.values:
            raise InvalidReview(f"{where} is not a known reason", field=where)
        return value
    if field == "reason":
        return _str(value, where, max_chars=MAX_REASON_CHARS)
    return _str(value, where, max_chars=MAX_NOTE_CHARS)  # cannot_assess_note


@dataclass(frozen=True)
class BatchEnvelope:
    """An edit batch's outer fields, checked; its edits still raw (each page checks its own)."""

    items: list[Any]
    tab: str
    seq: int
    active_seconds: int


def batch_envelope(payload: Any) -> BatchEnvelope:
    """The outer shape every autosave body shares (the review page's and the grading page's);
    InvalidReview naming the first problem."""
    if not isinstance(payload, dict):
        raise InvalidReview("the body must be a JSON object")
    unknown = set(payload) - PAYLOAD_KEYS
    if unknown:
        raise InvalidReview(f"unknown field(s): {', '.join(sorted(unknown))}")
    items = payload.get("edits", [])
    if not isinstance(items, list) or len(items) > MAX_EDITS:
        raise InvalidReview(f"edits must be a list of at most {MAX_EDITS}", field="edits")
    tab = _str(payload.get("tab", ""), "tab", max_chars=40)
    if not storable(tab):
        raise InvalidReview(f"tab {UNSTORABLE}", field="tab")
    return BatchEnvelope(
        items=items,
        tab=tab,
        seq=_int(payload.get("seq", 0), "seq", maximum=2**53),
        active_seconds=_int(payload.get("active_seconds", 0), "active_seconds", maximum=86_400),
    )


def review_validate(review: Review, payload: Any) -> EditBatch:
    """Check an edit batch against the review; InvalidReview naming the first problem."""
    return edits_validate(handles=review.handles, payload=payload)


def edits_validate(
    *, handles: list[str], payload: Any, fields: tuple[str, ...] = REVIEW_FIELDS
) -> EditBatch:
    """Check an edit batch of a page that judges the responses ``handles`` (the review page,
    the adjudication page), with ``fields`` as the page's own fields beside the responses'."""
    envelope = batch_envelope(payload)
    items, tab, seq, active = envelope.items, envelope.tab, envelope.seq, envelope.active_seconds
    n = len(handles)
    known = set(handles)
    now_ms = int(time.time() * 1000)
    edits = []
    refused: list[tuple[int, str]] = []
    for i, item in enumerate(items):
        where = f"edits[{i}]"
        if not isinstance(item, dict) or set(item) - EDIT_KEYS:
            raise InvalidReview(f"{where} has unknown fields", field=where)
        field = item.get("field")
        handle = item.get("handle")
        if field in JUDGEMENT_FIELDS:
            if not isinstance(handle, str) or handle not in known:  # a list is unhashable
                raise InvalidReview(f"{where}.handle is not a response of this review", field=where)
            key = f"{handle}.{field}"
        elif field in fields and handle is None:
            key = str(field)
        else:
            raise InvalidReview(f"{where}.field is not something a review has", field=where)
        if "value" not in item:
            raise InvalidReview(f"{where}.value is missing", field=where)
        value = _value(str(field), item["value"], f"{where}.value", n=n)
        # A clock ahead of the server's would make an edit win over every later one.
        at = min(_int(item.get("at"), f"{where}.at"), now_ms)
        if isinstance(value, str) and not storable(value):
            refused.append((i, key))
            continue
        edits.append(Edit(key=key, value=value, at=at))
    return EditBatch(edits=edits, tab=tab, seq=seq, active_seconds=active, refused=tuple(refused))


def unstorable_refusal(batch: EditBatch, state: dict[str, Any]) -> InvalidReview:
    """The answer to a batch with edits whose text cannot be stored, once the rest is saved:
    400 naming the first (``field``) and all of them (``refused``), with the saved state."""
    names = [f"edits[{i}]" for i, _ in batch.refused]
    return InvalidReview(
        f"{names[0]}.value {UNSTORABLE}: change that text; "
        + ("the other changes were saved" if batch.edits else "nothing else was sent"),
        field=names[0],
        extra={"refused": names, "state": state},
    )


# --- merging ----------------------------------------------------------------------------------
def draft_merge(draft: dict[str, Any], batch: EditBatch) -> tuple[dict[str, Any], bool, bool]:
    """The draft with the batch's edits applied; (draft, anything changed, count its time).

    Per response and field the later edit wins; on equal times, the one that arrived later.
    """
    fields: dict[str, list[Any]] = dict(draft.get("fields", {}))
    changed = False
    for edit in batch.edits:
        current = fields.get(edit.key)
        if current is None or edit.at >= current[1]:
            if current is None or current != [edit.value, edit.at]:
                changed = True
            fields[edit.key] = [edit.value, edit.at]
    tabs: dict[str, int] = dict(draft.get("tabs", {}))
    count_time = bool(batch.tab) and batch.seq > tabs.get(batch.tab, -1)
    if count_time:
        tabs.pop(batch.tab, None)
        tabs[batch.tab] = batch.seq  # re-inserted: newest last
        while len(tabs) > MAX_TABS:
            tabs.pop(next(iter(tabs)))
    return {"fields": fields, "tabs": tabs}, changed, count_time


def _check_complete(values: dict[str, Judged], reason: str, note: str) -> None:
    if reason:
        if reason == Review.CannotAssess.OTHER and not note.strip():
            raise IncompleteReview("say why the review cannot be assessed", field="cannot_assess")
        return
    if not values:
        raise IncompleteReview("there are no responses to judge yet", field="edits")
    unranked = [j for j in values.values() if j.rank is None]
    unmarked = [j for j in values.values() if j.is_correct is None]
    if unranked:
        raise IncompleteReview(f"{len(unranked)} response(s) not ranked yet", field="rank")
    if unmarked:
        raise IncompleteReview(
            f"{len(unmarked)} response(s) not marked correct or incorrect", field="is_correct"
        )


def review_state(review: Review) -> dict[str, Any]:
    """What save and submit answer with: the status and the draft's current values."""
    return {
        "review": review.pk,
        "status": review.status,
        "version": review.version,
        "submitted_at": review.submitted_at.isoformat() if review.submitted_at else None,
        "time_spent_seconds": review.time_spent_seconds,
        "draft": draft_values(review),
    }


def time_increment(review: Review | Any, batch: EditBatch, now: Any) -> int:
    """The seconds a batch adds to a review's (or an adjudication's) time spent."""
    elapsed = (now - review.updated_at).total_seconds() + SECONDS_SLACK
    # The slack forgives clock and latency jitter per save, but summed over many quick requests
    # (a new tab or sequence number each) it would grow without bound: the total never exceeds
    # the wall-clock time since the review was started.
    left = int((now - review.started_at).total_seconds()) - int(review.time_spent_seconds)
    return max(0, min(batch.active_seconds, MAX_SECONDS_PER_SAVE, int(elapsed), left))


def draft_save_updates(
    row: Review | Any, batch: EditBatch, now: Any
) -> tuple[dict[str, Any], bool]:
    """The columns one draft save writes on a review (or an adjudication), and whether the save
    is audited: a changed draft, at most once per ``SAVE_AUDIT_INTERVAL``."""
    draft, changed, count_time = draft_merge(row.draft, batch)
    increment = time_increment(row, batch, now) if count_time else 0
    audit = changed and (
        row.save_audited_at is None or now - row.save_audited_at >= SAVE_AUDIT_INTERVAL
    )
    updates: dict[str, Any] = {
        "draft": draft,
        "version": row.version + 1,
        "updated_at": now,
        "time_spent_seconds": row.time_spent_seconds + increment,
    }
    if changed and row.edited_at is None:
        updates["edited_at"] = now
    if audit:
        updates["save_audited_at"] = now
    return updates, audit


def _read_only(review: Review, batch: EditBatch) -> ReviewReadOnly:
    """The refusal for edits to a submitted review, naming the edits it did not take."""
    values, reason, note = review_values(review)
    current: dict[str, Any] = {"cannot_assess": reason, "cannot_assess_note": note}
    for handle, judged in values.items():
        for field in JUDGEMENT_FIELDS:
            current[f"{handle}.{field}"] = getattr(judged, field)
    unapplied = sorted(
        {e.key for e in batch.edits if current.get(e.key) != e.value}
        | {key for _, key in batch.refused}
    )
    when = timezone.localtime(review.submitted_at).strftime("%-d %b %Y, %H:%M")
    return ReviewReadOnly(
        f"This review was submitted on {when}, so it takes no more changes",
        extra={"unapplied": unapplied, "state": review_state(review)},
    )


# --- writing ----------------------------------------------------------------------------------
def _save_event(
    review: Review, version: int, clinician: User, request: HttpRequest | None
) -> AuditEvent:
    instruction = review.assignment.instruction
    return audit_event(
        action=AuditEvent.Action.REVIEW_SAVED,
        actor=clinician,
        request=request,
        obj=review,
        person_id=instruction.person_id,
        instruction_id=instruction.instruction_id,
        details={"version": version},
    )


def review_save_draft(
    *, review: Review, clinician: User, payload: Any, request: HttpRequest | None = None
) -> dict[str, Any]:
    """Merge an edit batch into the review's draft: one conditional UPDATE, retried if another
    request changed the review in between (optimistic, so saves never wait on a lock)."""
    review_check_allowed(clinician)
    # The handles a batch is checked against never change, so one validation serves every try.
    batch = review_validate(review, payload)
    state = _save_batch(review, clinician, batch, request)
    if batch.refused:
        raise unstorable_refusal(batch, state)
    return state


def _save_batch(
    review: Review, clinician: User, batch: EditBatch, request: HttpRequest | None
) -> dict[str, Any]:
    """Merge a checked batch into the draft (``review_save_draft``); the review's state."""
    for _attempt in range(20):
        if not review.is_editable:
            raise _read_only(review, batch)
        if not batch.edits and not batch.active_seconds:
            return review_state(review)  # a tab catching up with the others: nothing to write
        updates, audit = draft_save_updates(review, batch, timezone.now())
        # The UPDATE and its audit row in one statement (PostgreSQL): the save and its record
        # stand or fall together, and a lost race writes neither.
        events = [_save_event(review, updates["version"], clinician, request)] if audit else []
        won = update_then_insert(
            Review,
            where={"pk": review.pk, "version": review.version, "status": review.status},
            values=updates,
            rows=events,
        )
        if won:
            for name, value in updates.items():
                setattr(review, name, value)
            return review_state(review)
        review = (
            Review.objects.select_related("assignment__instruction")
            .filter(pk=review.pk, assignment__clinician=clinician)
            .get()
        )
    raise ReviewError("the review is too busy to save; try again")  # pragma: no cover


_LOCKED_REVIEW: PreparedQuery[Review] = PreparedQuery(
    lambda p: (
        Review.objects.select_for_update(of=("self",))
        .select_related("assignment__instruction")
        .filter(pk=p.review_id, assignment__clinician_id=p.clinician_id)
    ),
    params=("review_id", "clinician_id"),
)


def review_submit(
    *, review_id: int, clinician: User, payload: Any, request: HttpRequest | None = None
) -> dict[str, Any]:
    """Apply the final edits and submit: the judgement rows get the merged values.

    Submitting again (a double click, a retry after a lost answer) returns the submitted review
    when the edits it carries are already in it, and ``read_only`` naming them otherwise. A
    batch with text that cannot be stored is not submitted: its other edits are saved to the
    draft, and the answer names the refused ones.

    A draft is submitted as its saves are, optimistically: its rows, its new state and the audit
    row are written together only if the review is still the version read (one statement on
    PostgreSQL), and a submit that lost a race with another tab reads the review again. A
    reopened review (its rows exist and are updated) is submitted under a lock.
    """
    for _attempt in range(20):
        review, batch = _checked(
            review_find_for_clinician(clinician, review_id=review_id), clinician, payload
        )
        if review.status == Review.Status.SUBMITTED:
            return _submitted_again(review, batch)
        if review.status != Review.Status.DRAFT or batch.refused:
            return _review_submit_locked(review_id, clinician, payload, request)
        state = _submit(review, clinician, batch, request)
        if state is not None:
            return state
    raise ReviewError("the review is too busy to submit; try again")  # pragma: no cover


def _review_submit_locked(
    review_id: int, clinician: User, payload: Any, request: HttpRequest | None
) -> dict[str, Any]:
    with transaction.atomic():
        review, batch = _checked(
            _LOCKED_REVIEW.first(review_id=review_id, clinician_id=clinician.pk), clinician, payload
        )
        if review.status == Review.Status.SUBMITTED:
            return _submitted_again(review, batch)
        if not batch.refused:
            state = _submit(review, clinician, batch, request)
            assert state is not None  # the row is locked: its version cannot have moved
            return state
        state = _save_batch(review, clinician, batch, request)  # the row is locked: one try
    raise unstorable_refusal(batch, state)


def _checked(review: Review | None, clinician: User, payload: Any) -> tuple[Review, EditBatch]:
    """A review read for a submit, with its clinician still allowed to review and the batch
    checked against it."""
    if review is None:
        raise Review.DoesNotExist
    review_check_allowed(clinician)
    return review, review_validate(review, payload)


def _submitted_again(review: Review, batch: EditBatch) -> dict[str, Any]:
    refusal = _read_only(review, batch)
    if refusal.extra["unapplied"]:
        raise refusal
    return review_state(review)


def _submit(
    review: Review, clinician: User, batch: EditBatch, request: HttpRequest | None
) -> dict[str, Any] | None:
    """Submit a draft or a reopened review; None if the review is no longer the version read
    (another request changed it: only possible without the lock)."""
    read = {"pk": review.pk, "version": review.version, "status": review.status}
    draft, changed, count_time = draft_merge(review.draft, batch)
    review.draft = draft
    # Rows are written at submit, so a draft (never submitted: a reopened review keeps its
    # rows and its own status) has none to read.
    judgements = review_judgements(review) if review.status != Review.Status.DRAFT else []
    values, reason, note = review_values(review, judgements)
    _check_complete(values, reason, note)
    now = timezone.now()
    if count_time:
        review.time_spent_seconds += time_increment(review, batch, now)
    review.cannot_assess, review.cannot_assess_note = reason, note
    review.draft = {}
    review.edited_at = review.edited_at or now
    review.version += 1
    review.updated_at = now
    review.status = Review.Status.SUBMITTED
    review.submitted_at = now
    # Access is re-read at submit: a clinician granted researcher or admin access mid-review
    # could already map responses to models.
    review.reviewer_could_unblind = review.reviewer_could_unblind or can_unblind(clinician)
    instruction = review.assignment.instruction
    event = audit_event(
        action=AuditEvent.Action.REVIEW_SUBMITTED,
        actor=clinician,
        request=request,
        obj=review,
        person_id=instruction.person_id,
        instruction_id=instruction.instruction_id,
        details={"version": review.version, "time_spent_seconds": review.time_spent_seconds},
    )
    submitted = {f: getattr(review, f) for f in SUBMIT_FIELDS}
    if judgements:
        _update_judgements(review, values, judgements)
        update_rows(Review, where={"pk": review.pk}, values=submitted)
        insert_rows([event], return_pk=True)
        return review_state(review)
    rows, links = _new_judgements(review, values)
    if not update_then_insert(
        Review, where=read, values=submitted, rows=[*rows, event], linked=links
    ):
        return None
    return review_state(review)


SUBMIT_FIELDS = [
    "cannot_assess",
    "cannot_assess_note",
    "draft",
    "edited_at",
    "version",
    "updated_at",
    "status",
    "submitted_at",
    "time_spent_seconds",
    "reviewer_could_unblind",
]


def _tag_ids() -> dict[str, int]:
    return {t.slug: t.pk for t in error_tags()}


def _new_judgements(
    review: Review, values: dict[str, Judged]
) -> tuple[list[ResponseJudgement], list[Linked]]:
    """The submitted values as new judgement rows in shown order, and their error-tag links
    (each naming its row by position, for ``update_then_insert``)."""
    through = ResponseJudgement.error_tags.through
    tag_ids = _tag_ids()
    rows: list[ResponseJudgement] = []
    links: list[Linked] = []
    for position, (handle, rid) in enumerate(zip(review.handles, review.shown_order, strict=True)):
        judged = values[handle]
        rows.append(
            ResponseJudgement(
                review=review,
                response_id=int(rid),
                position=position,
                rank=judged.rank,
                is_correct=judged.is_correct,
                comment=judged.comment,
            )
        )
        links += [
            Linked(
                through(errortag_id=tag_ids[slug]), parent=position, attname="responsejudgement_id"
            )
            for slug in judged.tags
            if slug in tag_ids
        ]
    return rows, links


def _update_judgements(
    review: Review, values: dict[str, Judged], judgements: list[ResponseJudgement]
) -> None:
    """A reopened review's rows given the submitted values, their tag links written again (a
    response that joined no row before gets one)."""
    through = ResponseJudgement.error_tags.through
    tag_ids = _tag_ids()
    by_response = {j.response_id: j for j in judgements}
    rows: list[ResponseJudgement] = []
    for position, (handle, rid) in enumerate(zip(review.handles, review.shown_order, strict=True)):
        judged = values[handle]
        row = by_response.get(int(rid)) or ResponseJudgement(
            review=review, response_id=int(rid), position=position
        )
        row.rank, row.is_correct, row.comment = judged.rank, judged.is_correct, judged.comment
        rows.append(row)
    new = [row for row in rows if row.pk is None]
    if new:
        # Ids come back from PostgreSQL (RETURNING) and SQLite; the tag links need them.
        insert_rows(new, return_pk=True)
    old = [row for row in rows if row not in new]
    if old:
        ResponseJudgement.objects.bulk_update(old, ["rank", "is_correct", "comment"])
        through.objects.filter(responsejudgement__review=review).delete()
    links = [
        through(responsejudgement_id=row.pk, errortag_id=tag_ids[slug])
        for row, handle in zip(rows, review.handles, strict=True)
        for slug in values[handle].tags
        if slug in tag_ids
    ]
    insert_rows(links)


MAX_REOPEN_REASON_CHARS = 2000


@transaction.atomic
def review_reopen(
    *, review: Review, actor: User, reason: str, request: HttpRequest | None = None
) -> bool:
    """Let the clinician edit a submitted review again, saying why. False if it was not submitted.

    The reason is required: the clinician reads it in their queue and on the review page, and
    the audit row keeps it, so a reopening is never unexplained.
    """
    reason = (reason or "").strip()
    if not reason:
        raise InvalidReview("say why the review is reopened", field="reason")
    if len(reason) > MAX_REOPEN_REASON_CHARS:
        raise InvalidReview(
            f"the reason is longer than {MAX_REOPEN_REASON_CHARS} characters", field="reason"
        )
    review = (
        Review.objects.select_for_update(of=("self",))
        .select_related("assignment__instruction")
        .get(pk=review.pk)
    )
    if review.status != Review.Status.SUBMITTED:
        return False
    now = timezone.now()
    review.status = Review.Status.REOPENED
    review.reopened_by = actor
    review.reopened_at = now
    review.reopen_reason = reason
    review.version += 1  # an open tab still showing the read-only review must reload
    review.updated_at = now
    review.save()
    instruction = review.assignment.instruction
    audit_record(
        action=AuditEvent.Action.REVIEW_REOPENED,
        actor=actor,
        request=request,
        obj=review,
        person_id=instruction.person_id,
        instruction_id=instruction.instruction_id,
        details={"reason": reason, "clinician": review.assignment.clinician_id},
    )
    _email_reopened(review, request=request)
    return True


def _email_reopened(review: Review, *, request: HttpRequest | None) -> None:
    """Tell the clinician, once the transaction commits, that a review of theirs is open again.

    The mail links to the review and names its instruction id; the admin's reason stays in the
    app (queue and review page), since a reason may quote the record and email leaves the
    protected machine.
    """
    assignment = review.assignment
    to = User.objects.filter(pk=assignment.clinician_id).values_list("email", flat=True).first()
    if not to:
        return
    context = {
        "instruction_id": assignment.instruction.instruction_id,
        # The round named: without it the page opens the latest round the clinician holds
        # the instruction in, which need not be the one reopened.
        "review_url": site_url(request)
        + reverse("clinician_review", args=[assignment.instruction_id])
        + f"?study={assignment.study_id}",
        "queue_url": site_url(request) + reverse("clinician_queue"),
        "site_name": settings.SITE_NAME,
    }

    def send() -> None:
        subject = render_to_string("review/clinician/email/reopened_subject.txt", context)
        body = render_to_string("review/clinician/email/reopened_message.txt", context)
        send_mail(
            settings.ACCOUNT_EMAIL_SUBJECT_PREFIX + " ".join(subject.split()), body, None, [to]
        )

    transaction.on_commit(send)
