"""The Redis shared cache: clearing leaves the broker's keys alone; Redis away degrades."""

import socket

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
