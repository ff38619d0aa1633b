"""Event rows COPY'd by a worker thread on the import's own connection, while the importer reads on.

Without it the importer and PostgreSQL take turns: the importer builds a batch of rows while the
server waits, then waits while the server stores them, though the server's work and the
importer's could run side by side on two cores. One batch at a time is in flight, so memory
stays one batch larger than without it.

The worker uses the same psycopg connection, so the rows land in the import's transaction and
roll back with it. psycopg serialises a connection's use with a lock that a COPY holds until it
ends: a query the importer sends meanwhile (a patient, encounters, a scratch-table lookup) waits
for the batch in flight, never interleaves with it. Order matters only where the importer
reads or deletes events, and it calls ``wait`` first (``CohortWriter.flush``). A failed COPY's
error is raised in the importer's thread by the next ``submit`` or ``wait``; the transaction it
aborted refuses everything after it, so the import fails either way.
"""

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.db import connection

from .writers import copy_event_rows


class BackgroundCopy:
    def __init__(self, *, naive_utc: bool) -> None:
        self.naive_utc = naive_utc
        self.pool: ThreadPoolExecutor | None = None
        self.in_flight: Future[None] | None = None

    def submit(self, rows: list[tuple[Any, ...]]) -> None:
        """COPY ``rows`` (which the caller hands over: it must not change them) on the worker,
        after the batch before them."""
        self.wait()
        if self.pool is None:
            connection.ensure_connection()
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event-copy")
        raw = connection.connection  # psycopg's connection under Django's wrapper
        self.in_flight = self.pool.submit(self._copy, raw, rows)

    def _copy(self, raw: Any, rows: list[tuple[Any, ...]]) -> None:
        with raw.cursor() as cursor:
            copy_event_rows(cursor, rows, naive_utc=self.naive_utc)

    def wait(self) -> None:
        """Until the batch in flight is stored; its error, if it failed, is raised here."""
        future, self.in_flight = self.in_flight, None
        if future is not None:
            future.result()

    def close(self, *, quietly: bool = False) -> None:
        """Wait for the batch in flight and stop the worker. ``quietly`` (the import is already
        failing): its error, if any, does not hide the one being raised."""
        try:
            self.wait()
        except Exception:
            if not quietly:
                raise
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True)
                self.pool = None
