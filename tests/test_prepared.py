"""medalign_site.prepared: hot reads compiled once, inserts and updates of fixed shape.

Each helper must give exactly what the ORM call it replaces gives, on SQLite and on PostgreSQL
(the suite runs on both), so every test here compares with the ORM itself.
"""

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from medalign_site.prepared import (
    Linked,
    PreparedQuery,
    insert_rows,
    update_rows,
    update_then_insert,
)
from review.models import (
    Assignment,
    AuditEvent,
    ErrorTag,
    ModelResponse,
    ResponseJudgement,
    Review,
    Role,
)
from review.services.reviews import review_get_or_start
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def two(db):
    """Two clinicians, each assigned the same two instructions; one review started."""
    dataset = review_data.make_dataset()
    patient = review_data.make_record(dataset, "P-PREP", n_events=5)
    instructions = [
        review_data.make_instruction(dataset, patient, f"I-PREP-{i}", n_responses=3)
        for i in range(2)
    ]
    clinicians = [
        factories.make_user(f"c{i}@example.edu", roles=[Role.CLINICIAN]) for i in range(2)
    ]
    assignments = [review_data.assign(i, c) for c in clinicians for i in instructions]
    review_get_or_start(assignment=assignments[0])
    return instructions, clinicians, assignments


PAGE = PreparedQuery(
    lambda p: Assignment.objects.select_related(
        "instruction__dataset", "instruction__patient", "review"
    ).filter(instruction_id=p.instruction_id, clinician_id=p.clinician_id),
    params=("instruction_id", "clinician_id"),
)


def _state(obj) -> dict:  # noqa: ANN001 - any model instance
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def test_a_prepared_read_gives_what_the_queryset_gives(two, django_assert_num_queries):
    instructions, clinicians, _ = two
    for instruction in instructions:
        for clinician in clinicians:
            expected = list(
                Assignment.objects.select_related(
                    "instruction__dataset", "instruction__patient", "review"
                ).filter(instruction_id=instruction.pk, clinician_id=clinician.pk)
            )
            with django_assert_num_queries(1):  # the related objects come with it
                got = PAGE.all(instruction_id=instruction.pk, clinician_id=clinician.pk)
                related = [
                    (a.instruction, a.instruction.dataset, a.instruction.patient) for a in got
                ]
            assert [_state(a) for a in got] == [_state(a) for a in expected]
            assert [tuple(_state(o) for o in r) for r in related] == [
                (
                    _state(a.instruction),
                    _state(a.instruction.dataset),
                    _state(a.instruction.patient),
                )
                for a in expected
            ]
            for a, e in zip(got, expected, strict=True):
                has = hasattr(e, "review")
                assert hasattr(a, "review") == has
                if has:
                    assert _state(a.review) == _state(e.review)


def test_values_come_back_converted(two):
    _, _, assignments = two
    assignment = PAGE.first(
        instruction_id=assignments[0].instruction_id, clinician_id=assignments[0].clinician_id
    )
    assert assignment is not None
    review = assignment.review
    assert isinstance(review.handles, list) and len(review.handles) == 3  # JSON, decoded
    assert isinstance(review.started_at, datetime) and timezone.is_aware(review.started_at)


def test_values_list_rows_and_flat_values(two):
    instructions, _, _ = two
    rows = PreparedQuery(
        lambda p: (
            ModelResponse.objects.filter(instruction_id=p.i)
            .order_by("id")
            .values_list("id", "model_name")
        ),
        params=("i",),
    )
    ids = PreparedQuery(
        lambda p: (
            ModelResponse.objects.filter(instruction_id=p.i)
            .order_by("id")
            .values_list("id", flat=True)
        ),
        params=("i",),
    )
    for instruction in instructions:
        expected = list(
            ModelResponse.objects.filter(instruction=instruction)
            .order_by("id")
            .values_list("id", "model_name")
        )
        assert rows.all(i=instruction.pk) == expected
        assert ids.all(i=instruction.pk) == [e[0] for e in expected]


def test_no_match_and_ids_out_of_range_give_no_rows(two):
    assert PAGE.first(instruction_id=-1, clinician_id=-1) is None
    # A hand-typed URL: SQLite would raise OverflowError; the ORM answers "no such row".
    assert PAGE.all(instruction_id=10**30, clinician_id=1) == []


def test_parameters_must_be_the_named_ints():
    with pytest.raises(TypeError, match="expected parameters"):
        PAGE.all(instruction_id=1)
    with pytest.raises(TypeError, match="must be an int"):
        PAGE.all(instruction_id="1", clinician_id=1)
    with pytest.raises(TypeError, match="must be an int"):
        PAGE.all(instruction_id=True, clinician_id=1)


def test_a_parameter_that_never_reaches_the_sql_is_refused(db):
    ignored = PreparedQuery(
        lambda p: Assignment.objects.filter(clinician_id=p.clinician_id),
        params=("clinician_id", "instruction_id"),
    )
    with pytest.raises(ValueError, match="instruction_id"):
        ignored.all(clinician_id=1, instruction_id=2)


def test_what_a_prepared_query_cannot_run_is_refused(db):
    with pytest.raises(TypeError, match="prefetch_related"):
        PreparedQuery(
            lambda p: Review.objects.filter(pk=p.pk).prefetch_related("judgements"),
            params=("pk",),
        ).all(pk=1)
    with pytest.raises(TypeError, match="values_list"):
        PreparedQuery(lambda p: Review.objects.filter(pk=p.pk).values("id"), params=("pk",)).all(
            pk=1
        )


@pytest.mark.django_db(transaction=True)
def test_a_locking_read_needs_a_transaction():
    # As select_for_update() outside a transaction: an error, not a read that locks nothing.
    locked = PreparedQuery(
        lambda p: Review.objects.select_for_update().filter(pk=p.pk), params=("pk",)
    )
    assert not connection.in_atomic_block
    with pytest.raises(TransactionManagementError):
        locked.all(pk=1)
    with transaction.atomic():
        assert locked.all(pk=1) == []


# --- writes ------------------------------------------------------------------------------------
AT = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)


def _event(n: int, actor) -> AuditEvent:  # noqa: ANN001 - a User
    return AuditEvent(
        created_at=AT,
        action=AuditEvent.Action.REVIEW_SAVED,
        actor=actor,
        actor_email=actor.email,
        object_type="Review",
        object_id=str(n),
        person_id="P-1",
        instruction_id="I-1",
        ip_address="10.0.0.7",
        user_agent="pytest",
        details={"version": n, "nested": {"ok": True}},
    )


def test_insert_rows_writes_what_bulk_create_writes(two):
    _, clinicians, _ = two
    actor = clinicians[0]
    mine = [_event(n, actor) for n in (1, 2)]
    theirs = [_event(n, actor) for n in (1, 2)]
    with CaptureQueriesContext(connection) as captured:
        insert_rows(mine, return_pk=True)
    assert len(captured) == 1
    AuditEvent.objects.bulk_create(theirs)
    assert all(e.pk is not None and not e._state.adding for e in mine)

    def stored(events: list[AuditEvent]) -> list[dict]:
        rows = [_state(AuditEvent.objects.get(pk=e.pk)) for e in events]
        for row in rows:
            del row["id"]
        return rows

    assert stored(mine) == stored(theirs)


def test_insert_rows_raises_integrity_error_and_keeps_the_transaction_usable(two):
    _, _, assignments = two
    duplicate = Review(assignment=assignments[0], shown_order=[], handles=[])
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows([duplicate], return_pk=True)
    assert Review.objects.filter(assignment=assignments[0]).count() == 1


def test_update_rows_does_what_filter_update_does(two):
    _, _, assignments = two
    review = Review.objects.get(assignment=assignments[0])
    now = timezone.now()
    values = {"draft": {"fields": {"x": [1, 2]}}, "version": review.version + 1, "updated_at": now}
    stale = {"pk": review.pk, "version": review.version + 5, "status": review.status}
    assert update_rows(Review, where=stale, values=values) == 0
    current = {"pk": review.pk, "version": review.version, "status": review.status}
    assert update_rows(Review, where=current, values=values) == 1
    stored = Review.objects.get(pk=review.pk)
    assert stored.draft == {"fields": {"x": [1, 2]}} and stored.version == review.version + 1
    assert stored.updated_at == now
    with pytest.raises(ValueError, match="None"):
        update_rows(Review, where={"pk": review.pk, "submitted_at": None}, values=values)


def _judgement_with_tag(review: Review, tag: ErrorTag) -> tuple[ResponseJudgement, Linked]:
    row = ResponseJudgement(
        review=review, response_id=int(review.shown_order[0]), position=0, rank=1, is_correct=False
    )
    through = ResponseJudgement.error_tags.through
    return row, Linked(through(errortag_id=tag.pk), parent=0, attname="responsejudgement_id")


def test_update_then_insert_writes_the_rows_only_when_the_update_wins(two):
    _, clinicians, assignments = two
    review = Review.objects.get(assignment=assignments[0])
    tag = ErrorTag.objects.first() or ErrorTag.objects.create(slug="t", label="T")
    values = {"version": review.version + 1, "updated_at": timezone.now()}
    stale = {"pk": review.pk, "version": review.version + 5}
    row, link = _judgement_with_tag(review, tag)
    event = _event(1, clinicians[0])
    assert (
        update_then_insert(Review, where=stale, values=values, rows=[row, event], linked=[link])
        == 0
    )
    assert row.pk is None and event.pk is None and row._state.adding
    assert not ResponseJudgement.objects.filter(review=review).exists()
    assert not AuditEvent.objects.filter(person_id="P-1").exists()

    current = {"pk": review.pk, "version": review.version}
    with CaptureQueriesContext(connection) as captured:
        changed = update_then_insert(
            Review, where=current, values=values, rows=[row, event], linked=[link]
        )
    assert changed == 1
    # One statement on PostgreSQL, atomic by itself; elsewhere a savepoint around four.
    assert len(captured) == (1 if connection.vendor == "postgresql" else 6)
    assert Review.objects.get(pk=review.pk).version == review.version + 1
    stored = ResponseJudgement.objects.get(review=review)
    assert stored.pk == row.pk and not row._state.adding
    assert [t.pk for t in stored.error_tags.all()] == [tag.pk]
    assert link.obj.responsejudgement_id == row.pk
    theirs = _event(1, clinicians[0])
    AuditEvent.objects.bulk_create([theirs])
    mine_row, theirs_row = (_state(AuditEvent.objects.get(pk=e.pk)) for e in (event, theirs))
    del mine_row["id"], theirs_row["id"]
    assert mine_row == theirs_row


def test_a_run_of_rows_is_inserted_in_order_and_links_find_their_row(two):
    # Several rows of one model go as one array per column (UNNEST): each gets its own id, in
    # order, and a link names the row it belongs to, wherever it stands in the run.
    _, clinicians, assignments = two
    review = Review.objects.get(assignment=assignments[0])
    tags = [ErrorTag.objects.create(slug=f"run-{i}", label=f"Run {i}") for i in range(2)]
    through = ResponseJudgement.error_tags.through
    rows = [
        ResponseJudgement(
            review=review,
            response_id=int(rid),
            position=i,
            rank=i + 1,
            is_correct=i % 2 == 0,
            comment=f"row {i}",
        )
        for i, rid in enumerate(review.shown_order)
    ]
    event = _event(3, clinicians[0])
    links = [
        Linked(through(errortag_id=tags[0].pk), parent=1, attname="responsejudgement_id"),
        Linked(through(errortag_id=tags[1].pk), parent=1, attname="responsejudgement_id"),
        Linked(through(errortag_id=tags[0].pk), parent=2, attname="responsejudgement_id"),
    ]
    where = {"pk": review.pk, "version": review.version}
    values = {"version": review.version + 1}
    assert update_then_insert(Review, where=where, values=values, rows=[*rows, event], linked=links)
    stored = {
        j.pk: (j.position, j.comment, sorted(t.slug for t in j.error_tags.all()))
        for j in ResponseJudgement.objects.filter(review=review)
    }
    assert {row.pk: (row.position, row.comment) for row in rows} == {
        pk: found[:2] for pk, found in stored.items()
    }
    assert [stored[row.pk][2] for row in rows] == [[], ["run-0", "run-1"], ["run-0"]]
    assert AuditEvent.objects.get(pk=event.pk).person_id == "P-1"
    # The same shape again, lost: nothing is written.
    again = [ResponseJudgement(review=review, response_id=rows[0].response_id, position=0)] * 2
    assert not update_then_insert(Review, where=where, values=values, rows=again)


def test_update_then_insert_is_all_or_nothing(two):
    _, clinicians, assignments = two
    review = Review.objects.get(assignment=assignments[0])
    existing = Review.objects.get(assignment=assignments[0])
    # A second review of the same assignment breaks a unique constraint after the UPDATE ran.
    duplicate = Review(assignment=existing.assignment, shown_order=[], handles=[])
    values = {"version": review.version + 1}
    with pytest.raises(IntegrityError), transaction.atomic():
        update_then_insert(
            Review,
            where={"pk": review.pk, "version": review.version},
            values=values,
            rows=[_event(2, clinicians[0]), duplicate],
        )
    assert Review.objects.get(pk=review.pk).version == review.version
    assert not AuditEvent.objects.filter(person_id="P-1").exists()


# What this module reaches into: the fence (docs/decisions/prepared-statements.md) holds while no
# other module of the app does.
_INTERNALS = ("django.db.models.sql", "django.db.models.query")


def test_no_other_module_of_the_app_imports_djangos_query_internals() -> None:
    root = Path(__file__).resolve().parents[1]
    found = []
    for package in ("medalign_site", "review", "scoring"):
        for path in (root / package).rglob("*.py"):
            if path == root / "medalign_site" / "prepared.py" or "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else []
                )
                found += [
                    f"{path.relative_to(root)}: {name}"
                    for name in names
                    if any(name == m or name.startswith(f"{m}.") for m in _INTERNALS)
                ]
    assert found == []
