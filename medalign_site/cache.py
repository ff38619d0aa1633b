"""The shared cache on Redis, degrading instead of failing while Redis is away.

The cache carries sessions (``cached_db``: the database holds them too), cached access checks,
rate limits and used TOTP codes. With Redis down, reviewing must go on (tests/faults/redis_down):
reads are misses (sessions come from the database, access is evaluated afresh), writes and
deletes are skipped with a warning. ``add`` is not softened: it is how a TOTP code is marked used,
and a code whose use cannot be recorded must not be accepted (allauth then fails the sign-in),
so new sign-ins wait for Redis while signed-in work continues. Rate limits count nothing while
Redis is down; the TOTP step still stands between a guessed password and the data.
"""

import logging
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)
_DOWN = (RedisConnectionError, RedisTimeoutError, OSError)


class _SharedClientRedisCacheClient(RedisCacheClient):
    """Django's client builds a new ``redis.Redis`` for every cache call, and redis-py's
    constructor fills a table of ~200 response callbacks each time (80 us here; a signed-in
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
