"""Django's PostgreSQL backend, with a health check that sends nothing to a busy, healthy server
and connections that leave the pool when a migration has made their prepared statements stale.

**The health check.** With ``CONN_HEALTH_CHECKS`` Django runs ``SELECT 1`` before the first query
of every request that reuses a persistent connection, so that a connection the server has ended
(a restart, an administrator's ``pg_terminate_backend``, an idle timeout) is replaced instead of
failing the request. On the annotation path that is one statement in every request: a round
trip's worth of Python per request, and a statement's worth of PostgreSQL's CPU.

A server that ends a connection says so on its socket: it sends a FATAL error message and closes
it, so an idle connection's socket turns readable. So the socket is polled first (no wait), and
the statement is sent only when something is waiting on it; a message that is not a goodbye (a
notification, a parameter change) then costs that one statement and the connection is kept.
``poll`` rather than ``select``: it has no limit on descriptor numbers.

A peer that vanished without a word (the database host lost, a failover to another address, a
firewall that forgot the connection) leaves nothing on the socket: only a packet sent would
find out. So a connection that has not passed a check for ``_IDLE_SECONDS`` is asked with the
statement, as Django does; one in steady use (every request of a busy worker) is polled. TCP
keepalives (settings) make the kernel notice a dead peer on an idle connection as well.

**Stale prepared statements.** With ``DB_PREPARED_STATEMENTS`` a statement run often enough on a
connection is prepared there. A migration that changes a column's type while the app serves
makes every such statement fail with "cached plan must not change result type", and psycopg
keeps them. The first statement that fails so marks its connection obsolete, and Django closes
it when the request ends (``close_at``): the next request gets a new connection with nothing
prepared, instead of the error for the connection's remaining lifetime.
"""

import select
import time
from collections.abc import Callable
from typing import Any

import psycopg
from django.db import NotSupportedError
from django.db.backends.postgresql import base
from psycopg import pq

_WAITING = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP | select.POLLNVAL
# A worker thread under load reuses its connection every few hundred milliseconds; one unused
# for longer is checked with a statement, which then costs nothing noticeable.
_IDLE_SECONDS = 5.0
_STALE_PLAN = "cached plan must not change result type"


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._checked_at = 0.0  # time.monotonic() of the last check this connection passed
        self.execute_wrappers.append(self._recycle_on_stale_plan)

    def connect(self) -> None:
        super().connect()
        self._checked_at = time.monotonic()

    def is_usable(self) -> bool:
        conn = self.connection
        if conn is None:
            return False
        now = time.monotonic()
        try:
            pgconn = conn.pgconn
            if (
                now - self._checked_at < _IDLE_SECONDS
                and pgconn.status == pq.ConnStatus.OK
                and pgconn.transaction_status == pq.TransactionStatus.IDLE
            ):
                poller = select.poll()
                poller.register(pgconn.socket, _WAITING)
                if not poller.poll(0):
                    self._checked_at = now
                    return True
        except (OSError, ValueError, psycopg.Error):
            return False  # no socket to poll: the connection is gone
        usable = bool(super().is_usable())
        if usable:
            self._checked_at = now
        return usable

    def _recycle_on_stale_plan(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        try:
            return execute(sql, params, many, context)
        except NotSupportedError as exc:
            if isinstance(exc.__cause__, psycopg.errors.FeatureNotSupported) and (
                _STALE_PLAN in str(exc.__cause__)
            ):
                self.close_at = time.monotonic()  # closed at the end of this request
            raise
