"""Hot reads as fixed statements: a queryset compiled to SQL once per process, run many times.

The one module of the app built on Django's private API (the SQL compiler, the row iterables'
populators and converters): docs/decisions/prepared-statements.md says why it is kept, and
``make test-django-next`` runs its tests against Django's next release. Nothing else in the app
imports those internals; a view, service or selector reaches them only through the helpers here.

Compiling a queryset costs more CPU than running it (docs/benchmarks.md has the figures). The
annotation path runs a handful of such reads per request, always of the same shape with other
ids, so each is written once as an ordinary queryset and compiled once:

    PAGE_ASSIGNMENT = PreparedQuery(
        lambda p: Assignment.objects.select_related("review").filter(
            instruction_id=p.instruction_id, clinician_id=p.clinician_id
        ),
        params=("instruction_id", "clinician_id"),
    )
    PAGE_ASSIGNMENT.all(instruction_id=7, clinician_id=3)  # model instances, as the ORM gives

On first use for a database the queryset is built with a stand-in integer for every parameter
and compiled by Django; the stand-ins' places in the compiled parameters are noted and each
later call sends the same SQL with the real values. Rows become objects through Django's own
machinery (``from_db``, the select_related populators, the field converters), so a prepared
query returns what the queryset itself would. Only integer parameters are supported (the ids
the hot path filters on), which is what keeps substitution exact; anything else in the
queryset (a status, a flag) is fixed when it is written.
"""

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from threading import Lock
from typing import Any, Generic, TypeVar

from django.db import connections, router, transaction
from django.db.models import NOT_PROVIDED, Field, Model, QuerySet
from django.db.models.fields import AutoFieldMixin
from django.db.models.query import (  # type: ignore[attr-defined]
    FlatValuesListIterable,
    ModelIterable,
    ValuesListIterable,
    get_related_populators,
)
from django.db.models.sql.compiler import SQLCompiler
from django.db.transaction import TransactionManagementError

T = TypeVar("T")

# Stand-ins for the parameters while compiling: inside a 32-bit integer field's range (Django
# answers an out-of-range id with an empty result without compiling a WHERE), and unlike any id
# or constant the hot queries hold.
_STAND_IN_BASE = 2_146_483_000
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _StandIns:
    def __init__(self, names: Sequence[str]) -> None:
        for i, name in enumerate(names):
            setattr(self, name, _STAND_IN_BASE + i)


@dataclass(frozen=True)
class _ModelRows:
    """How a row becomes a model instance with its select_related objects."""

    model: type[Model]
    start: int
    end: int
    init_list: tuple[str, ...]
    populators: tuple[Any, ...]  # django.db.models.query.RelatedPopulator
    annotations: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class _Compiled:
    alias: str
    sql: str
    # For each parameter of the SQL: the index of a caller's parameter, or None for a constant.
    slots: tuple[int | None, ...]
    constants: tuple[Any, ...]
    compiler: SQLCompiler  # kept to apply its converters, never compiled again
    # What results_iter() works out on every call, worked out once: the columns' converters
    # (backend's and field's), and whether composite columns need folding into tuples.
    fields: tuple[Any, ...]
    converters: dict[int, Any]
    composite: bool
    models: _ModelRows | None  # None: values_list() rows
    flat: bool  # values_list(flat=True): the first column alone
    for_update: bool


class PreparedQuery(Generic[T]):
    """A queryset of fixed shape, compiled once per database and run with new integer ids."""

    def __init__(self, build: Callable[[Any], "QuerySet[Any, T]"], *, params: Sequence[str]):
        self._build = build
        self._names = tuple(params)
        self._compiled: _Compiled | None = None
        self._lock = Lock()

    def all(self, **values: int) -> list[T]:
        """Every row, as the queryset would give them (model instances or tuples)."""
        return list(self._iterate(values))

    def first(self, **values: int) -> T | None:
        """The first row or None: for queries that match at most one (a unique key)."""
        return next(self._iterate(values), None)

    def _iterate(self, values: dict[str, int]) -> Iterator[T]:
        if set(values) != set(self._names):
            raise TypeError(f"expected parameters {sorted(self._names)}, got {sorted(values)}")
        ordered = []
        for name in self._names:
            value = values[name]
            if type(value) is not int:  # bool is an int too; neither is an id
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if not _INT64_MIN <= value <= _INT64_MAX:
                # No row has such an id; the ORM answers the same way (an empty result) rather
                # than let SQLite raise OverflowError on a hand-typed URL.
                return
            ordered.append(value)
        compiled = self._compiled or self._compile()
        connection = connections[compiled.alias]
        if compiled.for_update and not connection.in_atomic_block:
            # What the ORM raises for select_for_update() outside a transaction.
            raise TransactionManagementError(
                "select_for_update cannot be used outside of a transaction."
            )
        params = [
            compiled.constants[i] if slot is None else ordered[slot]
            for i, slot in enumerate(compiled.slots)
        ]
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        yield from self._objects(compiled, rows)

    def _compile(self) -> _Compiled:
        with self._lock:
            if self._compiled is not None:
                return self._compiled
            queryset = self._build(_StandIns(self._names))
            alias = queryset.db  # the router's choice, fixed for the process like the SQL
            kind = queryset._iterable_class
            if kind not in (ModelIterable, ValuesListIterable, FlatValuesListIterable):
                raise TypeError("a prepared query returns model instances or values_list() rows")
            if queryset._prefetch_related_lookups:  # type: ignore[attr-defined]
                raise TypeError("a prepared query runs one statement: no prefetch_related()")
            compiler = queryset.query.get_compiler(using=alias)
            sql, sql_params = compiler.as_sql()
            stand_ins = {_STAND_IN_BASE + i: i for i in range(len(self._names))}
            slots = tuple(stand_ins.get(p) if type(p) is int else None for p in sql_params)
            missing = set(stand_ins.values()) - {s for s in slots if s is not None}
            if missing or any(str(v) in sql for v in stand_ins):
                # A parameter the queryset ignores, or one compiled into the SQL text itself:
                # substitution would silently run the wrong query.
                names = sorted(self._names[i] for i in missing) or list(self._names)
                raise ValueError(
                    f"parameters {names} do not reach the compiled SQL as placeholders"
                )
            models: _ModelRows | None = None
            if kind is ModelIterable:
                select, klass_info = compiler.select, compiler.klass_info
                assert klass_info is not None
                fields = klass_info["select_fields"]
                start, end = fields[0], fields[-1] + 1
                models = _ModelRows(
                    model=klass_info["model"],
                    start=start,
                    end=end,
                    init_list=tuple(f[0].target.attname for f in select[start:end]),
                    populators=tuple(get_related_populators(klass_info, select, alias)),
                    annotations=tuple((compiler.annotation_col_map or {}).items()),
                )
            fields = tuple(s[0] for s in compiler.select[0 : compiler.col_count])
            compiled = _Compiled(
                alias=alias,
                sql=sql,
                slots=slots,
                constants=tuple(sql_params),
                compiler=compiler,
                fields=fields,
                converters=compiler.get_converters(fields),
                composite=compiler.has_composite_fields(fields),
                models=models,
                flat=kind is FlatValuesListIterable,
                for_update=bool(queryset.query.select_for_update),
            )
            self._compiled = compiled
            return compiled

    @staticmethod
    def _objects(compiled: _Compiled, rows: list[tuple[Any, ...]]) -> Iterator[Any]:
        # compiler.results_iter(tuple_expected=True), with its per-call set-up done at compile.
        converted: Iterator[Any] = iter(rows)
        if compiled.converters:
            converted = compiled.compiler.apply_converters(converted, compiled.converters)
        if compiled.composite:
            converted = compiled.compiler.composite_fields_to_tuples(converted, compiled.fields)
        converted = map(tuple, converted)
        shape = compiled.models
        if shape is None:
            yield from (row[0] for row in converted) if compiled.flat else converted
            return
        # As ModelIterable builds them (django.db.models.query), from the compiled select.
        for row in converted:
            obj = shape.model.from_db(compiled.alias, shape.init_list, row[shape.start : shape.end])
            for populator in shape.populators:
                populator.populate(row, obj)
            for name, position in shape.annotations:
                setattr(obj, name, row[position])
            yield obj

    def forget(self) -> None:
        """Compile again on next use (a test that swaps the database backend)."""
        with self._lock:
            self._compiled = None


# --- writes of fixed shape ------------------------------------------------------------------
# What bulk_create() and update() send, without building a query object per call: the SQL text
# is made once per model and shape, and each call only prepares its values the way the ORM does
# (``get_db_prep_save``; ``pre_save`` on insert, for auto_now and friends). Neither sends model
# signals, as bulk_create() and update() don't; the models written here have no receivers.
M = TypeVar("M", bound=Model)
_SQL: dict[tuple[Any, ...], str] = {}


@functools.cache
def _insert_fields(model: type[Model]) -> "tuple[Field[Any, Any], ...]":
    # Once per model: every audited request inserts, and the fields never change.
    fields = []
    for f in model._meta.concrete_fields:
        if f.generated or f.primary_key and isinstance(f, AutoFieldMixin):
            continue  # computed by the database, as bulk_create leaves them
        if f.db_default is not NOT_PROVIDED or hasattr(f, "get_placeholder"):
            raise TypeError(f"{model.__name__}.{f.name}: not a plain column for insert_rows()")
        fields.append(f)
    return tuple(fields)


def insert_rows(objs: Sequence[M], *, return_pk: bool = False) -> None:
    """INSERT the unsaved objects in one statement; with ``return_pk`` their ids are set.

    Every concrete column but an auto id is written, each value prepared as ``save()`` would
    prepare it. A constraint violation raises django.db.IntegrityError as the ORM's does.
    """
    if not objs:
        return
    model = type(objs[0])
    alias = router.db_for_write(model)
    connection = connections[alias]
    fields = _insert_fields(model)
    key = ("insert", alias, model, len(objs), return_pk)
    sql = _SQL.get(key)
    if sql is None:
        qn = connection.ops.quote_name
        row = "(" + ", ".join(["%s"] * len(fields)) + ")"
        # Only the model's own table and column names (quoted) go into the text; values are
        # parameters.
        columns = ", ".join(qn(f.column) for f in fields)
        rows = ", ".join([row] * len(objs))
        sql = f"INSERT INTO {qn(model._meta.db_table)} ({columns}) VALUES {rows}"  # noqa: S608
        if return_pk:
            sql += f" RETURNING {qn(_column(model, 'pk').column)}"
        _SQL[key] = sql
    params = [f.get_db_prep_save(f.pre_save(obj, True), connection) for obj in objs for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        ids = cursor.fetchall() if return_pk else None
    for i, obj in enumerate(objs):
        if ids is not None:
            obj.pk = ids[i][0]
        obj._state.adding = False
        obj._state.db = alias


def _column(model: type[Model], name: str) -> "Field[Any, Any]":
    field = model._meta.pk if name == "pk" else model._meta.get_field(name)
    if not isinstance(field, Field) or not field.concrete:
        raise TypeError(f"{model.__name__}.{name} is not a column of its table")
    return field


@functools.cache
def _columns(model: type[Model], names: tuple[str, ...]) -> "tuple[Field[Any, Any], ...]":
    return tuple(_column(model, name) for name in names)


def update_rows(model: type[Model], *, where: dict[str, Any], values: dict[str, Any]) -> int:
    """``model.objects.filter(**where).update(**values)`` for equality filters on columns of the
    model itself: the number of rows changed. ``None`` cannot be matched (write ``IS NULL``
    as a queryset)."""
    alias = router.db_for_write(model)
    connection = connections[alias]
    sql, params = _update(connection, model, where, values, "update_rows")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def _update(
    connection: Any, model: type[Model], where: dict[str, Any], values: dict[str, Any], caller: str
) -> tuple[str, list[Any]]:
    """The UPDATE's text (made once per model and shape) and its parameters."""
    set_fields = _columns(model, tuple(values))
    where_fields = _columns(model, tuple(where))
    key = ("update", connection.alias, model, tuple(values), tuple(where))
    sql = _SQL.get(key)
    if sql is None:
        qn = connection.ops.quote_name
        assignments = ", ".join(f"{qn(str(f.column))} = %s" for f in set_fields)
        conditions = " AND ".join(f"{qn(str(f.column))} = %s" for f in where_fields)
        sql = f"UPDATE {qn(model._meta.db_table)} SET {assignments} WHERE {conditions}"  # noqa: S608
        _SQL[key] = sql
    params = [
        f.get_db_prep_save(v, connection) for f, v in zip(set_fields, values.values(), strict=True)
    ]
    for f, v in zip(where_fields, where.values(), strict=True):
        if v is None:
            raise ValueError(f"{caller}() cannot match {f.name} to None")
        params.append(f.get_db_prep_value(f.get_prep_value(v), connection, prepared=True))
    return sql, params


@dataclass(frozen=True)
class Linked:
    """A row for ``update_then_insert`` or ``insert_if`` whose foreign key ``attname`` is the
    id of ``rows[parent]`` (known only once that row is inserted)."""

    obj: Model
    parent: int
    attname: str


def update_then_insert(
    model: type[Model],
    *,
    where: dict[str, Any],
    values: dict[str, Any],
    rows: Sequence[Model] = (),
    linked: Sequence[Linked] = (),
) -> int:
    """``update_rows()``, and only if it changed a row, ``rows`` inserted (their ids set), then
    ``linked``: all of it or none. 1 if the UPDATE changed a row, else 0.

    On PostgreSQL this is one statement (an UPDATE and INSERTs in one WITH), atomic by itself:
    no transaction of its own, so no BEGIN and COMMIT round trips. Elsewhere the statements run
    in order inside ``transaction.atomic()``. ``where`` should match one row (a primary key): the
    inserts happen once, however many rows the UPDATE changed.
    """
    if not rows and not linked:
        return update_rows(model, where=where, values=values)  # one statement anyway
    alias = router.db_for_write(model)
    connection = connections[alias]
    if connection.vendor != "postgresql":
        with transaction.atomic(using=alias):
            changed = update_rows(model, where=where, values=values)
            if changed:
                _insert_in_order(list(rows))
                for link in linked:
                    setattr(link.obj, link.attname, rows[link.parent].pk)
                _insert_in_order([link.obj for link in linked])
            return changed
    update, params = _update(connection, model, where, values, "update_then_insert")
    # The UPDATE's text holds only quoted names; values are parameters.
    guard = f"u AS ({update} RETURNING 1), won AS (SELECT 1 FROM u LIMIT 1)"  # noqa: S608
    return int(insert_if(guard, params, rows=rows, linked=linked, using=alias))


def insert_if(
    condition: str,
    params: Sequence[Any],
    *,
    rows: Sequence[Model],
    linked: Sequence[Linked] = (),
    using: str = "default",
) -> bool:
    """PostgreSQL only: ``rows`` inserted (their ids set), then ``linked``, in one statement, if
    ``condition`` holds; whether they were.

    ``condition`` is the text of one or more WITH queries (with ``params``), the last named
    ``won``, which yields a row when the rows are to be written and none otherwise: an UPDATE
    that must win (``update_then_insert``), a lock and a check. The caller's own text, written
    once per call site; values are parameters.
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        raise NotImplementedError("insert_if() writes a data-modifying WITH: PostgreSQL only")
    groups = _groups(rows)
    where = _row_groups(groups)
    shape = tuple((type(rows[start]), end - start > 1) for start, end in groups)
    links = tuple((type(k.obj), where[k.parent][0], k.attname) for k in linked)
    key = ("insert-if", using, condition, shape, links)
    sql = _SQL.get(key)
    if sql is None:
        sql = _insert_if_sql(connection, condition, rows, groups, linked)
        _SQL[key] = sql
    values = list(params)
    for start, end in groups:
        fields = _insert_fields(type(rows[start]))
        prepared = [
            [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
            for obj in rows[start:end]
        ]
        # A run of rows goes as one array per column (UNNEST), as bulk_create sends it.
        values += (
            prepared[0] if end - start == 1 else [list(c) for c in zip(*prepared, strict=True)]
        )
    for link in linked:
        group, offset = where[link.parent]
        in_run = groups[group][1] - groups[group][0] > 1
        for f in _insert_fields(type(link.obj)):
            if f.attname != link.attname:
                values.append(f.get_db_prep_save(f.pre_save(link.obj, True), connection))
            elif in_run:
                values.append(offset + 1)  # the parent's place in its run's ids
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        found = cursor.fetchone()
    if not found[0]:
        return False
    for (start, end), ids in zip(groups, found[1:], strict=True):
        for obj, pk in zip(rows[start:end], ids if end - start > 1 else [ids], strict=True):
            obj.pk = pk
    for link in linked:
        setattr(link.obj, link.attname, rows[link.parent].pk)
    for obj in [*rows, *(link.obj for link in linked)]:
        obj._state.adding = False
        obj._state.db = using
    return True


def _groups(rows: Sequence[Model]) -> list[tuple[int, int]]:
    """(start, end) of each run of consecutive rows of one model."""
    found: list[tuple[int, int]] = []
    start = 0
    for end in range(1, len(rows) + 1):
        if end == len(rows) or type(rows[end]) is not type(rows[start]):
            found.append((start, end))
            start = end
    return found


def _row_groups(groups: list[tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """For each row's index: its run's index and its place in the run."""
    return {i: (g, i - start) for g, (start, end) in enumerate(groups) for i in range(start, end)}


def _insert_in_order(objs: list[Model]) -> None:
    """``insert_rows`` for each run of rows of one model, ids set."""
    for start, end in _groups(objs):
        insert_rows(objs[start:end], return_pk=True)


def _array_type(field: "Field[Any, Any]", connection: Any) -> str:
    db_type = field.db_type(connection)
    if not db_type:
        raise TypeError(f"{field.name}: no column type to send an array of")
    return str(db_type).split("(")[0]


def _insert_if_sql(
    connection: Any,
    condition: str,
    rows: Sequence[Model],
    groups: list[tuple[int, int]],
    linked: Sequence[Linked],
) -> str:
    # Only the caller's condition, the models' own table and column names (quoted) and their
    # column types go into the text; values are parameters.
    qn = connection.ops.quote_name
    parts = [condition]
    ids = []
    for g, (start, end) in enumerate(groups):
        model = type(rows[start])
        fields = _insert_fields(model)
        columns = ", ".join(qn(f.column) for f in fields)
        pk = qn(_column(model, "pk").column)
        if end - start == 1:
            # A parameter in a SELECT list takes the type of the column it is inserted into,
            # as in VALUES.
            selected = ", ".join(["%s"] * len(fields)) + " FROM won"
            ids.append(f"(SELECT {pk} FROM r{g})")  # noqa: S608
        else:
            # One array per column, typed as bulk_create types them (the type without its
            # modifier, so nothing is cut to a length: the column's own check applies).
            arrays = ", ".join(f"%s::{_array_type(f, connection)}[]" for f in fields)
            selected = f"x.* FROM won CROSS JOIN UNNEST({arrays}) AS x"
            # Ids are drawn in insertion order, which is the arrays' order.
            ids.append(f"(SELECT array_agg({pk} ORDER BY {pk}) FROM r{g})")  # noqa: S608
        parts.append(
            f"r{g} AS (INSERT INTO {qn(model._meta.db_table)} ({columns})"  # noqa: S608
            f" SELECT {selected} RETURNING {pk})"
        )
    where = _row_groups(groups)
    for i, link in enumerate(linked):
        model = type(link.obj)
        fields = _insert_fields(model)
        columns = ", ".join(qn(f.column) for f in fields)
        g, _offset = where[link.parent]
        start, end = groups[g]
        parent_pk = qn(_column(type(rows[start]), "pk").column)
        if end - start == 1:
            parent, source = f"r{g}.{parent_pk}", f"r{g}"
        else:
            parent = "p.ids[%s]"
            source = (
                f"(SELECT array_agg({parent_pk} ORDER BY {parent_pk}) AS ids FROM r{g}) AS p"  # noqa: S608
                " WHERE p.ids IS NOT NULL"
            )
        selected = ", ".join(parent if f.attname == link.attname else "%s" for f in fields)
        parts.append(
            f"l{i} AS (INSERT INTO {qn(model._meta.db_table)} ({columns}) SELECT {selected}"  # noqa: S608
            f" FROM {source})"
        )
    # Only the models' own table and column names (quoted) go into the text; values are
    # parameters.
    found = "".join(f", {expression}" for expression in ids)
    return "WITH " + ", ".join(parts) + f" SELECT (SELECT count(*) FROM won){found}"  # noqa: S608
