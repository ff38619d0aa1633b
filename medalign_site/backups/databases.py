"""The database half of a backup: dump, restore, and the per-table fingerprint both compare.

A table's fingerprint is its row count and the sha256 of its rows in primary-key order, as
the database itself writes them (PostgreSQL: ``COPY … TO STDOUT`` in text form, with the
session's time zone, date style and float digits fixed; SQLite: each row's Python repr). The
dump and the fingerprints come from one snapshot (``pg_dump --snapshot``), so a backup taken
while the app serves describes exactly what it holds.

PostgreSQL is dumped with ``pg_dump --format=custom`` and restored with ``pg_restore
--single-transaction --exit-on-error --no-owner --no-privileges``: the target's own role owns
what it restores, and an error rolls the whole restore back. SQLite (the demo's database) is
copied with SQLite's online backup API, consistent while the app writes.
"""

import hashlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medalign_site.backups.archive import BackupError

POSTGRES_ENGINES = {"medalign_site.pgbackend", "django.db.backends.postgresql"}
SQLITE_ENGINE = "django.db.backends.sqlite3"
# The libpq connection options Django's OPTIONS may carry that pg_dump and pg_restore also
# need (TLS to a database on another host); psycopg's own options are not libpq's.
_LIBPQ_OPTIONS = {
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslcrl",
    "sslpassword",
    "channel_binding",
    "gssencmode",
    "connect_timeout",
    "target_session_attrs",
    "service",
    "passfile",
}
# Fixed for every fingerprint, source and target alike: COPY's text form depends on them.
_SESSION = (
    "SET TIME ZONE 'UTC'",
    "SET DateStyle = 'ISO, YMD'",
    "SET IntervalStyle = 'postgres'",
    "SET extra_float_digits = 1",
    "SET bytea_output = 'hex'",
)
Fingerprints = dict[str, dict[str, Any]]


def engine_of(database: Mapping[str, Any]) -> str:
    engine = str(database["ENGINE"])
    if engine in POSTGRES_ENGINES:
        return "postgresql"
    if engine == SQLITE_ENGINE:
        return "sqlite"
    raise BackupError(f"backups cover PostgreSQL and SQLite, not {engine}")


# --- PostgreSQL -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Postgres:
    database: Mapping[str, Any]

    def conninfo(self, *, with_password: bool) -> str:
        from psycopg.conninfo import make_conninfo

        options = {
            k: v for k, v in dict(self.database.get("OPTIONS") or {}).items() if k in _LIBPQ_OPTIONS
        }
        params = {
            "dbname": self.database["NAME"],
            "user": self.database.get("USER") or None,
            "host": self.database.get("HOST") or None,
            "port": str(self.database.get("PORT") or "") or None,
            **options,
        }
        if with_password and self.database.get("PASSWORD"):
            params["password"] = self.database["PASSWORD"]
        return make_conninfo(**{k: v for k, v in params.items() if v is not None})

    def tool_env(self) -> dict[str, str]:
        # The password goes to pg_dump/pg_restore in their environment, never on a command line
        # (which every user of the host can read).
        env = dict(os.environ)
        if self.database.get("PASSWORD"):
            env["PGPASSWORD"] = str(self.database["PASSWORD"])
        return env

    def connect(self) -> Any:
        import psycopg

        try:
            return psycopg.connect(self.conninfo(with_password=True))
        except psycopg.OperationalError as exc:
            raise BackupError(
                f"cannot connect to the database {self.database['NAME']!r}: {exc}"
            ) from None

    def dump(self, into: Path) -> Fingerprints:
        """Dump into the file ``into`` and fingerprint every table, from one snapshot."""
        import psycopg

        with self.connect() as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            with conn.transaction():
                row = conn.execute("SELECT pg_export_snapshot()").fetchone()
                assert row is not None
                snapshot = str(row[0])
                result = subprocess.run(
                    [
                        "pg_dump",
                        "--format=custom",
                        "--no-password",
                        f"--snapshot={snapshot}",
                        f"--file={into}",
                        f"--dbname={self.conninfo(with_password=False)}",
                    ],
                    env=self.tool_env(),
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if result.returncode != 0:
                    raise BackupError(f"pg_dump failed: {result.stderr.strip()[-2000:]}")
                return _postgres_fingerprints(conn)

    def fingerprints(self) -> Fingerprints:
        with self.connect() as conn, conn.transaction():
            return _postgres_fingerprints(conn)

    def is_empty(self) -> bool:
        with self.connect() as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S') AND n.nspname NOT IN "
                "('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'"
            ).fetchone()
            return row is not None and row[0] == 0

    def restore(self, dump: Path) -> None:
        result = subprocess.run(
            [
                "pg_restore",
                "--no-password",
                "--single-transaction",
                "--exit-on-error",
                "--no-owner",
                "--no-privileges",
                f"--dbname={self.conninfo(with_password=False)}",
                str(dump),
            ],
            env=self.tool_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise BackupError(
                f"pg_restore failed (the restore was rolled back): {result.stderr.strip()[-2000:]}"
            )

    def schemas_and_extensions(self) -> tuple[set[str], set[str]]:
        with self.connect() as conn:
            schemas = {
                r[0]
                for r in conn.execute(
                    "SELECT nspname FROM pg_namespace WHERE nspname NOT IN "
                    "('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg_%'"
                )
            }
            extensions = {r[0] for r in conn.execute("SELECT extname FROM pg_extension")}
        return schemas, extensions

    def empty_again(self, before: tuple[set[str], set[str]]) -> None:
        """Drop what a restore made in a database that held no tables before it."""
        from psycopg import sql

        schemas_before, extensions_before = before
        schemas_now, extensions_now = self.schemas_and_extensions()
        with self.connect() as conn, conn.transaction():
            for name in sorted(schemas_now - schemas_before):
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
            for name in sorted(extensions_now - extensions_before):
                conn.execute(
                    sql.SQL("DROP EXTENSION IF EXISTS {} CASCADE").format(sql.Identifier(name))
                )
            # What remains lies in the schemas that were there before (public): its tables,
            # views and sequences, none of which existed before the restore.
            kinds = {"r": "TABLE", "p": "TABLE", "v": "VIEW", "m": "MATERIALIZED VIEW"}
            kinds["S"] = "SEQUENCE"
            for kind, word in kinds.items():
                rows = conn.execute(
                    "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n "
                    "ON n.oid = c.relnamespace WHERE c.relkind = %s AND n.nspname = ANY(%s)",
                    (kind, sorted(schemas_before)),
                ).fetchall()
                for schema, name in rows:
                    conn.execute(
                        sql.SQL("DROP {} IF EXISTS {} CASCADE").format(
                            sql.SQL(word), sql.Identifier(schema, name)
                        )
                    )


def _postgres_fingerprints(conn: Any) -> Fingerprints:
    from psycopg import sql

    for statement in _SESSION:
        conn.execute(statement)
    tables = conn.execute(
        "SELECT n.nspname, c.relname, c.oid FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname NOT IN "
        "('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_%' ORDER BY 1, 2"
    ).fetchall()
    found: Fingerprints = {}
    for schema, name, oid in tables:
        key = name if schema == "public" else f"{schema}.{name}"
        keys = [
            r[0]
            for r in conn.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s AND i.indisprimary "
                "ORDER BY array_position(i.indkey::int2[], a.attnum)",
                (oid,),
            )
        ]
        table = sql.Identifier(schema, name)
        if keys:
            query = sql.SQL("COPY (SELECT * FROM {} ORDER BY {}) TO STDOUT").format(
                table, sql.SQL(", ").join(sql.Identifier(k) for k in keys)
            )
        else:
            query = sql.SQL("COPY {} TO STDOUT").format(table)
        found[key] = _copy_fingerprint(conn, query, ordered=bool(keys))
    sequences = conn.execute(
        "SELECT schemaname, sequencename, last_value FROM pg_sequences "
        "WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2"
    ).fetchall()
    for schema, name, last_value in sequences:
        key = name if schema == "public" else f"{schema}.{name}"
        # A sequence behind its table's ids would make the restored app's next insert collide.
        found[f"sequence:{key}"] = {"last_value": last_value}
    return found


def _copy_fingerprint(conn: Any, query: Any, *, ordered: bool) -> dict[str, Any]:
    digest = hashlib.sha256()
    rows = 0
    unordered: list[bytes] = []
    with conn.cursor() as cursor, cursor.copy(query) as copy:
        for chunk in copy:
            data = bytes(chunk)
            rows += data.count(b"\n")  # COPY's text form escapes newlines inside values
            if ordered:
                digest.update(data)
            else:
                unordered.append(data)
    if not ordered:
        # No primary key, no stable order: the rows' lines sorted.
        for line in sorted(b"".join(unordered).splitlines(keepends=True)):
            digest.update(line)
    return {"rows": rows, "sha256": digest.hexdigest()}


# --- SQLite ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sqlite:
    database: Mapping[str, Any]

    @property
    def path(self) -> Path:
        return Path(str(self.database["NAME"]))

    def dump(self, into: Path) -> Fingerprints:
        if not self.path.exists():
            raise BackupError(f"the database file {self.path} does not exist")
        source = sqlite3.connect(self.path)
        target = sqlite3.connect(into)
        try:
            source.backup(target)  # SQLite's online backup: consistent while others write
        finally:
            target.close()
            source.close()
        os.chmod(into, 0o600)
        return sqlite_fingerprints(into)

    def fingerprints(self) -> Fingerprints:
        return sqlite_fingerprints(self.path)

    def is_empty(self) -> bool:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return True
        with _sqlite(self.path) as conn:
            row = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()
            return bool(row[0] == 0)

    def restore(self, dump: Path) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        source = sqlite3.connect(f"file:{dump}?mode=ro", uri=True)
        target = sqlite3.connect(self.path)
        try:
            source.backup(target)
        except sqlite3.Error as exc:
            raise BackupError(f"the SQLite restore failed: {exc}") from None
        finally:
            target.close()
            source.close()
        os.chmod(self.path, 0o600)

    def schemas_and_extensions(self) -> tuple[set[str], set[str]]:
        return set(), set()

    def empty_again(self, before: tuple[set[str], set[str]]) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


@contextmanager
def _sqlite(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


def sqlite_fingerprints(path: Path) -> Fingerprints:
    found: Fingerprints = {}
    with _sqlite(path) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_stat%' ORDER BY name"
            )
        ]
        for name in tables:
            quoted = '"' + name.replace('"', '""') + '"'
            digest = hashlib.sha256()
            rows = 0
            try:
                cursor = conn.execute(f"SELECT * FROM {quoted} ORDER BY rowid")  # noqa: S608
                lines: Any = (repr(row).encode() + b"\n" for row in cursor)
            except sqlite3.OperationalError:  # a table WITHOUT ROWID: sorted rows instead
                cursor = conn.execute(f"SELECT * FROM {quoted}")  # noqa: S608
                lines = sorted(repr(row).encode() + b"\n" for row in cursor)
            for line in lines:
                digest.update(line)
                rows += 1
            found[name] = {"rows": rows, "sha256": digest.hexdigest()}
    return found


def database_for(database: Mapping[str, Any]) -> Postgres | Sqlite:
    return Postgres(database) if engine_of(database) == "postgresql" else Sqlite(database)
