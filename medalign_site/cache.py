"""The shared cache: on Redis, degrading instead of failing while Redis is away; or in the
database. Either way it stores signed JSON, never a pickle (medalign_site/cache_codec.py).

The cache carries sessions (``cached_db``: the database holds them too), cached access checks,
rate limits and used TOTP codes. With Redis down, reviewing must go on (tests/faults/redis_down):
reads are misses (sessions come from the database, access is evaluated afresh), writes and
deletes are skipped with a warning. ``add`` is not softened: it is how a TOTP code is marked used,
and a code whose use cannot be recorded must not be accepted (allauth then fails the sign-in),
so new sign-ins wait for Redis while signed-in work continues. Rate limits count nothing while
Redis is down; the TOTP step still stands between a guessed password and the data.
"""

import logging
import time
from datetime import UTC, datetime
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.db import DatabaseCache
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.db import DatabaseError, connections, models, router, transaction
from django.utils.timezone import now as tz_now
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from medalign_site.cache_codec import decode_or_miss, encode

logger = logging.getLogger(__name__)
_DOWN = (RedisConnectionError, RedisTimeoutError, OSError)


class _SharedClientRedisCacheClient(RedisCacheClient):
    """Django's client builds a new ``redis.Redis`` for every cache call, and redis-py's
    constructor fills a table of some 200 response callbacks each time (and a signed-in
    request makes several cache calls). One client per connection pool serves every call: a
    ``redis.Redis`` is safe to share between threads (each command takes a connection from the
    pool), and the pool itself starts afresh in a forked child."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        # Django's private helpers (the stubs do not declare them): the same pool choice as its
        # own get_client.
        index: int = self._get_connection_pool_index(write)  # type: ignore[attr-defined]
        client = self._clients.get(index)
        if client is None:
            pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
            client = self._client(connection_pool=pool)  # type: ignore[attr-defined]
            self._clients[index] = client
        return client

    # Values in and out through the signed JSON codec, bound to their key (Django's serializer
    # interface sees the value alone). Timeouts here are seconds from now, or None.
    @staticmethod
    def _encode(key: Any, value: Any, timeout: Any) -> str:
        return encode(key, value, expires_at=None if timeout is None else time.time() + timeout)

    def add(self, key: Any, value: Any, timeout: Any) -> bool:
        client = self.get_client(key, write=True)
        stored = self._encode(key, value, timeout)
        if timeout == 0:
            if added := bool(client.set(key, stored, nx=True)):
                client.delete(key)
            return added
        return bool(client.set(key, stored, ex=timeout, nx=True))

    def get(self, key: Any, default: Any) -> Any:
        stored = self.get_client(key).get(key)
        if stored is None:
            return default
        ok, value = decode_or_miss(key, stored)
        return value if ok else default

    def set(self, key: Any, value: Any, timeout: Any) -> None:
        client = self.get_client(key, write=True)
        if timeout == 0:
            client.delete(key)
        else:
            client.set(key, self._encode(key, value, timeout), ex=timeout)

    def get_many(self, keys: Any) -> dict[Any, Any]:
        keys = list(keys)
        found = {}
        for key, stored in zip(keys, self.get_client(None).mget(keys), strict=True):
            if stored is not None:
                ok, value = decode_or_miss(key, stored)
                if ok:
                    found[key] = value
        return found

    def set_many(self, data: Any, timeout: Any) -> None:
        pipeline = self.get_client(None, write=True).pipeline()
        pipeline.mset({k: self._encode(k, v, timeout) for k, v in data.items()})
        if timeout is not None:
            for key in data:
                pipeline.expire(key, timeout)
        pipeline.execute()

    def incr(self, key: Any, delta: Any) -> int:
        # Values are signed, so Redis's INCR cannot apply; nothing in the app counts this way
        # (allauth's rate limits keep lists of times). Not atomic, as Django's base cache.
        value = self.get(key, None)
        if value is None:
            raise ValueError(f"Key '{key}' not found.")
        self.set(key, value + delta, None if (ttl := self.get_client(key).ttl(key)) < 0 else ttl)
        return int(value + delta)


class ResilientRedisCache(RedisCache):
    def __init__(self, server: Any, params: Any) -> None:
        super().__init__(server, params)
        self._class = _SharedClientRedisCacheClient

    def _warn(self, operation: str) -> None:
        logger.warning("shared cache (Redis) unavailable: %s skipped", operation)

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        try:
            return super().get(key, default, version)
        except _DOWN:
            self._warn("get")
            return default

    def get_many(self, keys: Any, version: Any = None) -> dict[Any, Any]:
        try:
            return super().get_many(keys, version)
        except _DOWN:
            self._warn("get_many")
            return {}

    def has_key(self, key: Any, version: Any = None) -> bool:
        try:
            return super().has_key(key, version)
        except _DOWN:
            self._warn("has_key")
            return False

    def set(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None
    ) -> None:
        try:
            return super().set(key, value, timeout, version)
        except _DOWN:
            self._warn("set")
            return None

    def set_many(self, data: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> list[Any]:
        try:
            return super().set_many(data, timeout, version)
        except _DOWN:
            self._warn("set_many")
            return list(data)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: Any = None) -> bool:
        try:
            return super().touch(key, timeout, version)
        except _DOWN:
            self._warn("touch")
            return False

    def delete(self, key: Any, version: Any = None) -> bool:
        try:
            return super().delete(key, version)
        except _DOWN:
            # A delete that did not happen can leave a stale access check for its short
            # lifetime; said in the log so an operator sees it.
            self._warn("delete")
            return False

    def delete_many(self, keys: Any, version: Any = None) -> None:
        try:
            super().delete_many(keys, version)
        except _DOWN:
            self._warn("delete_many")

    def clear(self) -> None:
        # Only this cache's keys: the Redis database may be the Celery broker's too (a
        # FLUSHDB would drop queued scoring batches).
        try:
            client = self._cache.get_client(None, write=True)  # type: ignore[attr-defined]
            batch = []
            for key in client.scan_iter(match=f"{self.key_prefix}:*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    client.delete(*batch)
                    batch = []
            if batch:
                client.delete(*batch)
        except _DOWN:
            self._warn("clear")


class SignedDatabaseCache(DatabaseCache):
    """Django's database cache (the embedded default) storing signed JSON instead of pickles.

    The same table, statements and culling as Django's backend (``get_many`` and ``_base_set``
    follow Django 5.2's code); only the value's encoding differs. A value the app did not write
    is a miss. Table and column names below are quoted identifiers, never input (hence S608).
    """

    def _names(self, connection: Any) -> tuple[str, str, str, str]:
        quote = connection.ops.quote_name
        table: str = self._table  # type: ignore[attr-defined]
        return quote(table), quote("cache_key"), quote("value"), quote("expires")

    @staticmethod
    def _to_datetime(value: Any, connection: Any) -> Any:
        expression = models.Expression(output_field=models.DateTimeField())
        for converter in connection.ops.get_db_converters(
            expression
        ) + expression.get_db_converters(connection):
            value = converter(value, expression, connection)
        return value

    def get_many(self, keys: Any, version: Any = None) -> dict[Any, Any]:
        if not keys:
            return {}
        key_map = {self.make_and_validate_key(key, version=version): key for key in keys}
        connection = connections[router.db_for_read(self.cache_model_class)]
        table, key_col, value_col, expires_col = self._names(connection)
        marks = ", ".join(["%s"] * len(key_map))
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {key_col}, {value_col}, {expires_col} FROM {table} "  # noqa: S608
                f"WHERE {key_col} IN ({marks})",
                list(key_map),
            )
            rows = cursor.fetchall()
        result = {}
        expired_keys = []
        now = tz_now()
        for key, value, expires in rows:
            if self._to_datetime(expires, connection) < now:
                expired_keys.append(key)
                continue
            ok, decoded = decode_or_miss(key, connection.ops.process_clob(value))
            if ok:
                result[key_map[key]] = decoded
        self._base_delete_many(expired_keys)  # type: ignore[attr-defined]
        return result

    def _base_set(self, mode: str, key: str, value: Any, timeout: Any = DEFAULT_TIMEOUT) -> bool:
        timeout = self.get_backend_timeout(timeout)  # a Unix time here, or None
        db = router.db_for_write(self.cache_model_class)
        connection = connections[db]
        table, key_col, value_col, expires_col = self._names(connection)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) FROM {table}")  # noqa: S608
            num = cursor.fetchone()[0]
            now = tz_now().replace(microsecond=0)
            expires = datetime.max if timeout is None else datetime.fromtimestamp(timeout, tz=UTC)
            exp = connection.ops.adapt_datetimefield_value(expires.replace(microsecond=0))
            if num > self._max_entries:
                self._cull(db, cursor, now, num)  # type: ignore[attr-defined]
            stored = "" if mode == "touch" else encode(key, value, expires_at=timeout)
            try:
                with transaction.atomic(using=db):
                    cursor.execute(
                        f"SELECT {key_col}, {expires_col} FROM {table} "  # noqa: S608
                        f"WHERE {key_col} = %s",
                        [key],
                    )
                    row = cursor.fetchone()
                    if row and mode == "touch":
                        # A touched value keeps the expiry it was signed with (nothing in the
                        # app touches): it is refused after that even if the row lives on.
                        cursor.execute(
                            f"UPDATE {table} SET {expires_col} = %s "  # noqa: S608
                            f"WHERE {key_col} = %s",
                            [exp, key],
                        )
                    elif row and (
                        mode == "set"
                        or (mode == "add" and self._to_datetime(row[1], connection) < now)
                    ):
                        cursor.execute(
                            f"UPDATE {table} SET {value_col} = %s, {expires_col} = %s "  # noqa: S608
                            f"WHERE {key_col} = %s",
                            [stored, exp, key],
                        )
                    elif mode != "touch":
                        cursor.execute(
                            f"INSERT INTO {table} ({key_col}, {value_col}, {expires_col}) "  # noqa: S608
                            "VALUES (%s, %s, %s)",
                            [key, stored, exp],
                        )
                    else:
                        return False  # touch failed
            except DatabaseError:
                # As Django's: to be thread-safe, updates and inserts may fail silently.
                return False
            return True
