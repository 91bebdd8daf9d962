"""The store's size bounds (proxy/stores/quota.py) on both backends: each owner's objects
under its bound, everybody's under the total, the oldest out first; Redis is a real
redis-server."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from proxy.request.recall import RecallMemory
from proxy.stores.quota import Blob, Quota, charged
from proxy.stores.redis import RedisStore
from proxy.stores.sqlite import SqliteStore
from tests.proxy.stores.test_stores import ck

PER_OWNER = 10_000
TOTAL = 25_000
QUOTA = Quota(total=TOTAL, per_owner=PER_OWNER)
VALUE = b"x" * 1_000  # a blob of about a tenth of an owner's bound

Store = SqliteStore | RedisStore


@pytest.fixture(params=["sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s: Store
    if request.param == "sqlite":
        s = SqliteStore(tmp_path / "cw.sqlite3", 3600, 100_000, quota=QUOTA)
    else:
        url = request.getfixturevalue("redis_url")
        s = RedisStore(url, 3600, 16, quota=QUOTA)
        await s._redis.flushdb()
    yield s
    await s.close()


def size(store: Store, key: str) -> int:
    """What the store charges a blob of ``VALUE`` under ``key`` (Redis's key has a prefix)."""
    return charged(f"cw:blob:{key}" if isinstance(store, RedisStore) else key, VALUE)


async def present(store: Store, keys: list[str]) -> list[str]:
    return [k for k in keys if await store.get_blob(k) is not None]


async def test_an_owner_past_its_bound_loses_its_own_oldest_and_nobody_elses(store: Store) -> None:
    theirs = [f"b{i}" for i in range(3)]
    for key in theirs:
        await store.put_blob(key, VALUE, 3600, "b")
    flood = [f"a{i}" for i in range(40)]
    for key in flood:
        await store.put_blob(key, VALUE, 3600, "a")
    kept = await present(store, flood)
    assert kept == flood[-len(kept) :]  # the newest, in one run: the oldest went first
    assert 0 < sum(size(store, k) for k in kept) <= PER_OWNER < sum(size(store, k) for k in flood)
    assert await present(store, theirs) == theirs
    assert store.usage.evicted_owner == len(flood) - len(kept)
    assert store.usage.evicted_total == 0


async def test_everybody_past_the_total_loses_the_oldest_of_anybody(store: Store) -> None:
    written = []
    for i in range(40):  # eight owners, each well under its own bound
        key = f"k{i}"
        await store.put_blob(key, VALUE, 3600, f"owner{i % 8}")
        written.append(key)
    kept = await present(store, written)
    assert kept == written[-len(kept) :]
    assert sum(size(store, k) for k in kept) <= TOTAL < 40 * len(VALUE)
    assert store.usage.evicted_total == len(written) - len(kept) > 0
    assert 0 < store.usage.held <= TOTAL


async def test_checkpoints_count_and_go_oldest_first_with_the_blobs(store: Store) -> None:
    big = replace(ck(0), summary="s" * 6_000, created_at=time.time() - 10)
    await store.put("scope", big, "a")
    for i in range(6):
        await store.put_blob(f"a{i}", VALUE, 3600, "a")
    assert await store.candidates("scope", "conv") == []  # the oldest object of "a"
    assert store.usage.evicted_owner == 1


async def test_a_value_written_again_is_counted_once(store: Store) -> None:
    for _ in range(50):
        await store.put_blob("same", VALUE, 3600, "a")
        await store.put_blobs([Blob("same2", VALUE, 3600, "a")])
    assert await present(store, ["same", "same2"]) == ["same", "same2"]
    assert store.usage.evicted_owner == 0
    assert store.usage.held == size(store, "same") + size(store, "same2")


async def test_records_outside_the_bounds_are_never_evicted(store: Store) -> None:
    await store.put_blob("owner-record", b"team", 3600, None)
    for i in range(60):
        await store.put_blob(f"k{i}", VALUE, 3600, f"o{i % 4}")
    assert await store.get_blob("owner-record") == b"team"


async def test_an_evicted_original_is_recalled_as_no_longer_kept(store: Store) -> None:
    first = RecallMemory(store)
    first.keep("conv-b", {"r000000000001": ("the original", "read_file a.txt")}, "b")
    await first.drain()
    for i in range(40):
        await store.put_blob(f"other{i}", VALUE, 3600, f"o{i}")  # past the total
    later = RecallMemory(store)  # another process, or this one after its cache let it go
    assert await later.get("conv-b", "r000000000001") is None  # answered with NOT_KEPT


async def test_a_sqlite_file_from_before_the_bounds_is_counted_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as db:  # the schema before the bounds, with a blob in it
        db.executescript(
            "CREATE TABLE checkpoints (team TEXT NOT NULL, conversation TEXT NOT NULL, "
            "id TEXT PRIMARY KEY, created_at REAL NOT NULL, body BLOB NOT NULL);"
            "CREATE TABLE blobs (key TEXT PRIMARY KEY, value BLOB NOT NULL, "
            "expires_at REAL NOT NULL);"
        )
        db.execute("INSERT INTO blobs VALUES ('old', ?, ?)", (b"y" * 9_000, time.time() + 60))
    s = SqliteStore(path, 3600, 100, quota=QUOTA)
    assert s.usage.held == charged("old", b"y" * 9_000)
    await s.put_blob("new", VALUE, 3600, "")  # the shared owner: past its bound, "old" goes
    assert await s.get_blob("old") is None
    assert await s.get_blob("new") == VALUE
    await s.close()


async def test_redis_forgets_what_expired(redis_url: str) -> None:
    s = RedisStore(redis_url, 3600, 16, quota=QUOTA)
    await s._redis.flushdb()
    await s.put_blob("brief", VALUE, 0.05, "a")
    await asyncio.sleep(0.1)
    await s.put_blob("next", b"1", 3600, "a")  # a write forgets what expired before it
    assert s.usage.held == charged("cw:blob:next", b"1")
    await s.close()
