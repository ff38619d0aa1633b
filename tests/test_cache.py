"""The Redis shared cache: clearing leaves the broker's keys alone; Redis away degrades."""

import socket
import time

import pytest

from medalign_site.cache import ResilientRedisCache

REDIS_URL = "redis://127.0.0.1:6379/11"


def _cache(url: str) -> ResilientRedisCache:
    return ResilientRedisCache(
        url,
        {"KEY_PREFIX": "medalign", "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2}},
    )


def _redis_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.skipif(not _redis_up(), reason="no Redis on 127.0.0.1:6379")
def test_clearing_the_cache_leaves_the_brokers_keys_alone() -> None:
    cache = _cache(REDIS_URL)
    client = cache._cache.get_client(None, write=True)
    client.set("celery-queue-like-key", "keep")
    cache.set("limit", 3)
    cache.clear()
    assert cache.get("limit") is None
    assert client.get("celery-queue-like-key") == b"keep"
    client.delete("celery-queue-like-key")


def test_with_redis_away_reads_miss_writes_are_skipped_and_add_fails_closed() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here
    cache = _cache(f"redis://127.0.0.1:{port}/0")
    assert cache.get("session", "default") == "default"
    assert cache.get_many(["a", "b"]) == {}
    cache.set("a", 1)
    cache.delete("a")
    # add() marks a TOTP code as used: if that cannot be recorded, the code is not accepted.
    with pytest.raises(Exception):  # noqa: B017 - redis' ConnectionError
        cache.add("allauth.mfa.totp.used", "y")


@pytest.mark.skipif(not _redis_up(), reason="no Redis on 127.0.0.1:6379")
def test_one_redis_client_serves_every_call_and_every_thread(monkeypatch) -> None:
    # Django's own client built a redis.Redis (and its ~200-entry callback table) per call.
    import threading

    import redis

    built = []
    real_init = redis.Redis.__init__

    def counting_init(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        built.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counting_init)
    cache = _cache(REDIS_URL)
    cache.set("shared-client", 1)

    def work(n: int) -> None:
        for i in range(20):
            cache.set(f"shared-client-{n}", i)
            assert cache.get(f"shared-client-{n}") == i
        cache.get_many([f"shared-client-{n}", "shared-client"])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.get("shared-client-3") == 19
    assert len(built) == 1
    cache.delete_many(["shared-client", *(f"shared-client-{n}" for n in range(4))])


def test_redis_replies_are_parsed_by_hiredis() -> None:
    # A dependency (pyproject.toml): redis-py picks it up by itself, and every request makes two
    # cache calls (the session and the access entry), each lighter with the C parser.
    import redis.utils

    assert redis.utils.HIREDIS_AVAILABLE


# --- nothing read back from the cache is unpickled ----------------------------------------------
class _Planted:
    """A pickle that, when loaded, creates ``path`` (what a shell command would do, harmlessly)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):  # noqa: ANN204 - pickle's protocol
        return (open, (self.path, "w"))


def _own_prefix() -> str:
    import os

    return f"{os.environ.get('TEST_CACHE_PREFIX', 'medalign-test')}-codec"


@pytest.mark.skipif(not _redis_up(), reason="no Redis on 127.0.0.1:6379")
def test_a_pickle_planted_in_redis_is_refused_not_executed(tmp_path) -> None:
    import pickle

    cache = ResilientRedisCache(REDIS_URL, {"KEY_PREFIX": _own_prefix()})
    marker = tmp_path / "pwned"
    key = cache.make_key("review:access:user:1")
    client = cache._cache.get_client(None, write=True)
    client.set(key, pickle.dumps(_Planted(str(marker))))
    assert cache.get("review:access:user:1") is None
    assert cache.get_many(["review:access:user:1"]) == {}
    assert not marker.exists()
    client.delete(key)


@pytest.mark.django_db
def test_a_pickle_planted_in_the_database_cache_is_refused_not_executed(tmp_path) -> None:
    import base64
    import pickle

    from django.db import connection

    cache = _database_cache()

    marker = tmp_path / "pwned"
    cache.set("review:access:user:1", ["placeholder"], 60)  # a row to overwrite
    planted = base64.b64encode(pickle.dumps(_Planted(str(marker)))).decode()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE medalign_cache SET value = %s WHERE cache_key = %s",
            [planted, cache.make_key("review:access:user:1")],
        )
    assert cache.get("review:access:user:1") is None
    assert not marker.exists()


def _database_cache():  # noqa: ANN202
    # Explicitly the database cache: with Redis configured (CI) the default cache is Redis, and
    # migration 0007 made no table for it then: made here, as createcachetable would.
    from django.core.management.commands.createcachetable import Command
    from django.db import DEFAULT_DB_ALIAS, connection

    from medalign_site.cache import SignedDatabaseCache

    if "medalign_cache" not in connection.introspection.table_names():
        command = Command()
        command.verbosity = 0
        command.create_table(DEFAULT_DB_ALIAS, "medalign_cache", dry_run=False)
    return SignedDatabaseCache("medalign_cache", {"KEY_PREFIX": _own_prefix()})


def _caches(request) -> list:  # noqa: ANN001
    caches = []
    if _redis_up():
        caches.append(ResilientRedisCache(REDIS_URL, {"KEY_PREFIX": _own_prefix()}))
    request.getfixturevalue("db")
    caches.append(_database_cache())
    return caches


def test_values_round_trip_as_json_with_dates(request) -> None:
    from datetime import UTC, date, datetime

    value = [
        "2026-01-01",
        {"roles": ["clinician"], "at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)},
        date(2027, 1, 1),
        None,
        1.5,
    ]
    for cache in _caches(request):
        cache.set("round-trip", value, 60)
        assert cache.get("round-trip") == value
        assert cache.get_many(["round-trip"]) == {"round-trip": value}
        assert cache.add("round-trip-add", True, 60) is True
        assert cache.add("round-trip-add", True, 60) is False
        cache.delete_many(["round-trip", "round-trip-add"])


def test_a_signed_value_copied_under_another_key_is_refused(request) -> None:
    # An admin's access entry copied to a clinician's key must not make the clinician an admin.
    for cache in _caches(request):
        cache.set("review:access:user:1", ["admin's entry"], 60)
        cache.set("review:access:user:2", ["clinician's entry"], 60)
        if isinstance(cache, ResilientRedisCache):
            client = cache._cache.get_client(None, write=True)
            client.set(
                cache.make_key("review:access:user:2"),
                client.get(cache.make_key("review:access:user:1")),
            )
        else:
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE medalign_cache SET value = (SELECT value FROM medalign_cache "
                    "WHERE cache_key = %s) WHERE cache_key = %s",
                    [
                        cache.make_key("review:access:user:1"),
                        cache.make_key("review:access:user:2"),
                    ],
                )
        assert cache.get("review:access:user:2") is None
        assert cache.get("review:access:user:1") == ["admin's entry"]
        cache.delete_many(["review:access:user:1", "review:access:user:2"])


def test_a_value_replayed_after_its_lifetime_is_refused() -> None:
    from medalign_site.cache_codec import CacheValueRefused, decode, encode

    stored = encode("k", {"a": 1}, expires_at=time.time() - 5)
    with pytest.raises(CacheValueRefused):
        decode("k", stored)
    assert decode("k", encode("k", {"a": 1}, expires_at=time.time() + 60)) == {"a": 1}
    assert decode("k", encode("k", {"a": 1}, expires_at=None)) == {"a": 1}
