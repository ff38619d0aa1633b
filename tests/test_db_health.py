"""The PostgreSQL health check that runs before each request's first query (CONN_HEALTH_CHECKS).

Django's sends ``SELECT 1`` on every request that reuses a connection; ours looks at the socket
first and sends the statement only when the server has written something to an idle connection
(which is how a closed connection announces itself). These tests hold it to both halves: no
statement for a healthy connection, and a connection the server ended is replaced before the
request's own query could fail on it.
"""

import time
from unittest import mock

import psycopg
import pytest
from django.conf import settings
from django.db import connection

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3",
        reason="PostgreSQL only: SQLite connections have no health check",
    ),
]


def _other_connection() -> psycopg.Connection:
    """A plain psycopg connection to the same database, outside Django."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params, autocommit=True)


def _new_request() -> None:
    """What Django does for a request's first query on a persistent connection."""
    connection.health_check_done = False
    connection.close_if_health_check_failed()


def _count_statements():  # noqa: ANN202 - a mock.patch context
    """Count the statements Django's own check would send (it bypasses Django's cursor)."""
    return mock.patch.object(connection.connection, "cursor", wraps=connection.connection.cursor)


def test_health_checks_are_on_for_postgresql() -> None:
    assert connection.settings_dict["CONN_HEALTH_CHECKS"] is True
    assert connection.health_check_enabled


def test_a_healthy_connection_is_checked_without_a_statement() -> None:
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with _count_statements() as cursor:
        _new_request()
    assert cursor.call_count == 0
    assert connection.connection is not None
    assert connection.connection.info.backend_pid == pid


def test_a_connection_the_server_ended_is_replaced_before_the_request_uses_it() -> None:
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with _other_connection() as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    # The server writes its FATAL message and closes the socket: give it a moment to land.
    deadline = time.monotonic() + 5
    fd = connection.connection.fileno()
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while not poller.poll(0) and time.monotonic() < deadline:
        time.sleep(0.01)
    _new_request()
    assert connection.connection is None  # closed, so the next query opens a new one
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (new_pid,) = cursor.fetchone()
    assert new_pid != pid


def test_anything_waiting_on_the_socket_falls_back_to_the_statement() -> None:
    # A notification is harmless, but the check cannot tell it from a goodbye by looking:
    # it must ask the server, and keep the connection when the server answers.
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with connection.cursor() as cursor:
        cursor.execute("LISTEN medalign_health_test")
    with _other_connection() as other:
        other.execute("NOTIFY medalign_health_test")
    time.sleep(0.2)
    with _count_statements() as cursor:
        _new_request()
    assert cursor.call_count == 1
    assert connection.connection is not None
    assert connection.connection.info.backend_pid == pid
    with connection.cursor() as c:
        c.execute("UNLISTEN *")


def test_statements_are_bound_and_prepared_by_the_server() -> None:
    # DB_PREPARED_STATEMENTS (on by default): parameters sent apart from the SQL, and a
    # statement run often enough on a connection is prepared there instead of planned anew.
    from review.models import Dataset

    assert connection.settings_dict["OPTIONS"]["server_side_binding"] is True
    connection.ensure_connection()
    assert connection.connection.prepare_threshold == 5
    for _ in range(7):
        list(Dataset.objects.filter(pk=1).values_list("id"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        (prepared,) = cursor.fetchone()
    assert prepared >= 1


def test_a_connection_idle_for_a_while_is_asked_with_the_statement() -> None:
    # A peer that vanished without a word leaves nothing on the socket: after a pause, the
    # check asks the server, as Django's does.
    from medalign_site.pgbackend import base

    connection.ensure_connection()
    connection._checked_at -= base._IDLE_SECONDS + 1
    with _count_statements() as cursor:
        _new_request()
    assert cursor.call_count == 1
    assert connection.connection is not None
    with _count_statements() as cursor:  # checked just now: polled again
        _new_request()
    assert cursor.call_count == 0


def test_a_connection_whose_prepared_statements_went_stale_is_replaced() -> None:
    # A migration that changes a column's type while the app serves: every statement prepared
    # on the column fails ("cached plan must not change result type") until the connection
    # goes. It goes at the end of the request that met the error.
    from django.db import NotSupportedError

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE medalign_stale_plan (label varchar(10))")
        cursor.execute("INSERT INTO medalign_stale_plan VALUES ('a')")
    try:
        for _ in range(7):  # past psycopg's prepare threshold
            with connection.cursor() as cursor:
                cursor.execute("SELECT label FROM medalign_stale_plan WHERE label = %s", ["a"])
                assert cursor.fetchall() == [("a",)]
        pid = connection.connection.info.backend_pid
        with _other_connection() as other:
            other.execute("ALTER TABLE medalign_stale_plan ALTER label TYPE varchar(20)")
        with pytest.raises(NotSupportedError, match="cached plan"), connection.cursor() as cursor:
            cursor.execute("SELECT label FROM medalign_stale_plan WHERE label = %s", ["a"])
        connection.close_if_unusable_or_obsolete()  # what Django does when a request ends
        assert connection.connection is None
        with connection.cursor() as cursor:
            cursor.execute("SELECT label FROM medalign_stale_plan WHERE label = %s", ["a"])
            assert cursor.fetchall() == [("a",)]
            cursor.execute("SELECT pg_backend_pid()")
            assert cursor.fetchone()[0] != pid
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS medalign_stale_plan")
