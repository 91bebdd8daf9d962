"""Both checkpoint stores against the same contract; Redis is a real redis-server."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from proxy.stores.protocol import Store
from proxy.stores.quota import Blob
from proxy.stores.redis import RedisStore
from proxy.stores.sqlite import SqliteStore
from strategies.checkpoints.chain import Checkpoint, Layer
from strategies.checkpoints.cut import FileLists


@pytest.fixture(params=["sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        s: Store = SqliteStore(tmp_path / "cw.sqlite3", ttl_seconds=3600, max_entries=3)
    else:
        url = request.getfixturevalue("redis_url")
        s = RedisStore(url, ttl_seconds=3600, max_per_conversation=3)
    yield s
    await s.close()


def ck(i: int, conversation: str = "conv", created: float | None = None) -> Checkpoint:
    return Checkpoint(
        id=f"ck{i}-{conversation}",
        conversation=conversation,
        covers=i,
        chain_hash=f"h{i}",
        summary=f"summary {i}",
        tokens_before=1000,
        tokens_after=50,
        files=FileLists(("a.py",), ("b.py",)),
        created_at=created if created is not None else time.time() + i,
        previous_id=None,
    )


async def test_round_trip_grouped_by_team_and_conversation(store: Store) -> None:
    await store.put("t1", ck(1))
    await store.put("t1", ck(2))
    await store.put("t2", ck(3, "other"))
    got = sorted(await store.candidates("t1", "conv"), key=lambda c: c.covers)
    assert got == [ck(1, created=got[0].created_at), ck(2, created=got[1].created_at)]
    assert got[0].files == FileLists(("a.py",), ("b.py",))
    assert [c.covers for c in await store.candidates("t2", "other")] == [3]
    assert await store.candidates("t2", "conv") == []


async def test_a_layered_checkpoint_keeps_its_layers(store: Store) -> None:
    earlier = (Layer(2, "first", FileLists(("x.py",), ())), Layer(5, "second"))
    layered = replace(ck(7), earlier=earlier)
    await store.put("layers", layered)
    (got,) = await store.candidates("layers", "conv")
    assert got.earlier == earlier
    assert got == replace(layered, created_at=got.created_at)


async def test_size_limit_drops_the_oldest(store: Store) -> None:
    for i in range(5):
        await store.put("t", ck(i))
    kept = sorted(c.covers for c in await store.candidates("t", "conv"))
    assert kept == [2, 3, 4]


async def test_learned_windows_only_go_down(store: Store) -> None:
    await store.put_learned_window("m", 5000)
    await store.put_learned_window("m", 7000)
    await store.put_learned_window("m", 4000)
    assert (await store.learned_windows())["m"] == 4000


async def test_settings_are_overwritten_both_ways(store: Store) -> None:
    await store.put_setting("calibration\tt\tm", 900)
    await store.put_setting("calibration\tt\tm", 1100)
    assert (await store.learned_windows())["calibration\tt\tm"] == 1100


async def test_blobs_expire(store: Store) -> None:
    await store.put_blob("fp", b"\x00\x01", ttl_seconds=60)
    assert await store.get_blob("fp") == b"\x00\x01"
    await store.put_blob("fp", b"\x02", ttl_seconds=0.05)
    assert await store.get_blob("fp") == b"\x02"
    await asyncio.sleep(0.1)
    assert await store.get_blob("fp") is None
    assert await store.get_blob("never") is None


async def test_blobs_put_together(store: Store) -> None:
    await store.put_blob("a", b"old", ttl_seconds=60)
    await store.put_blobs([Blob("a", b"1", 60), Blob("b", b"2", 0.05), Blob("c", b"3", 60)])
    assert [await store.get_blob(k) for k in "abc"] == [b"1", b"2", b"3"]
    await asyncio.sleep(0.1)
    assert [await store.get_blob(k) for k in "abc"] == [b"1", None, b"3"]
    await store.put_blobs([])


async def test_locks_are_exclusive_until_released_or_expired(store: Store) -> None:
    assert await store.acquire("k", 60)
    assert not await store.acquire("k", 60)
    await store.release("k")
    assert await store.acquire("k", 0.05)
    time.sleep(0.1)
    assert await store.acquire("k", 60)


async def test_quota_slots_are_counted_per_key_and_free_up_as_the_window_passes(
    store: Store,
) -> None:
    key = f"quota\t{uuid.uuid4()}"
    assert [await store.take_slot(key, 3, 0.5) for _ in range(5)] == [True] * 3 + [False] * 2
    assert await store.slots_taken(key, 0.5) == 3
    assert await store.slots_taken(f"{key}-other", 0.5) == 0
    await asyncio.sleep(0.6)
    assert await store.slots_taken(key, 0.5) == 0
    assert await store.take_slot(key, 3, 0.5)


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_processes_sharing_a_store_take_one_quota_between_them(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Two clients of one store (two workers on one SQLite file, two replicas on one Redis),
    racing for a quota of 7: seven calls in all, never 7 each."""
    stores: list[Store] = []
    for _ in range(2):
        if backend == "sqlite":
            stores.append(SqliteStore(tmp_path / "cw.sqlite3", ttl_seconds=60, max_entries=10))
        else:
            stores.append(RedisStore(request.getfixturevalue("redis_url"), 60, 3))
    key = f"quota\t{uuid.uuid4()}"
    try:
        taken = await asyncio.gather(*(s.take_slot(key, 7, 60) for s in stores * 10))
        assert sum(taken) == 7
        assert [await s.slots_taken(key, 60) for s in stores] == [7, 7]
    finally:
        for s in stores:
            await s.close()


async def test_a_store_answers_a_ping(store: Store) -> None:
    await store.ping()


async def test_a_renewed_lock_outlives_its_first_ttl_and_is_seen_held(store: Store) -> None:
    """TTLs of a second and a half: on a loaded run (the full suite on 2 cores) a sleep of 0.2 s
    overshot the 0.1 s a 0.3 s TTL left, and a held lock read as gone."""
    key = f"lock-{uuid.uuid4()}"
    assert not await store.locked(key)
    assert await store.acquire(key, 1.5)
    assert await store.locked(key)
    await asyncio.sleep(1.0)
    await store.renew(key, 1.5)
    await asyncio.sleep(0.8)  # past the first ttl, with 0.7 s of the renewed one to spare
    assert await store.locked(key) and not await store.acquire(key, 1.5)
    await asyncio.sleep(1.5)  # not renewed: gone
    assert not await store.locked(key)
    await store.renew(key, 60)  # renewing a lock nobody holds takes nothing
    assert not await store.locked(key)


async def test_sqlite_ttl_hides_and_purges_old_checkpoints(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "cw.sqlite3", ttl_seconds=60, max_entries=100)
    await s.put("t", ck(1, created=time.time() - 3600))
    assert await s.candidates("t", "conv") == []
    await s.close()


async def test_the_scope_secret_is_made_once_and_kept(store: Store) -> None:
    first = await store.scope_secret()
    assert len(first) == 32
    assert await store.scope_secret() == first


async def test_sqlite_reads_take_no_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversation's checkpoints and blobs are read on the event loop: a worker thread's
    round trip costs more than the read (proxy/stores/sqlite.py)."""
    s = SqliteStore(tmp_path / "cw.sqlite3", ttl_seconds=3600, max_entries=100)
    await s.put("t", ck(1))
    await s.put_blob("fp", b"\x01", ttl_seconds=60)
    hops: list[Callable[..., Any]] = []
    to_thread = asyncio.to_thread

    async def counted(fn: Callable[..., Any], *args: Any) -> Any:
        hops.append(fn)
        return await to_thread(fn, *args)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    assert [c.covers for c in await s.candidates("t", "conv")] == [1]
    assert await s.get_blob("fp") == b"\x01"
    assert await s.get_blob("absent") is None
    assert hops == []
    await s.put_blob("fp", b"\x02", ttl_seconds=60)  # writes still go to the thread
    assert len(hops) == 1
    assert await s.get_blob("fp") == b"\x02"  # and the reader sees them at once
    await s.close()


async def test_a_sqlite_batch_that_fails_is_rolled_back_and_the_next_one_lands(
    tmp_path: Path,
) -> None:
    s = SqliteStore(tmp_path / "cw.sqlite3", ttl_seconds=3600, max_entries=100)
    bad: Any = object()  # not a value SQLite can bind
    with pytest.raises(sqlite3.Error):
        await s.put_blobs([Blob("a", b"1", 60), Blob("b", bad, 60)])
    assert await s.get_blob("a") is None  # the whole batch, or none of it
    await s.put_blobs([Blob("a", b"2", 60)])
    assert await s.get_blob("a") == b"2"
    await s.close()


class LockedReader:
    """A connection that finds the file locked, as another process holding it would."""

    def __init__(self, code: int) -> None:
        self.code = code

    def execute(self, *args: object) -> None:
        exc = sqlite3.OperationalError("database is locked")
        exc.sqlite_errorcode = self.code
        raise exc

    def close(self) -> None:
        pass


async def test_a_sqlite_read_that_finds_the_file_locked_waits_in_the_worker_thread(
    tmp_path: Path,
) -> None:
    s = SqliteStore(tmp_path / "cw.sqlite3", ttl_seconds=3600, max_entries=100)
    await s.put("t", ck(1))
    await s.put_blob("fp", b"\x01", ttl_seconds=60)
    s._reader = LockedReader(sqlite3.SQLITE_BUSY)  # type: ignore[assignment]
    assert [c.covers for c in await s.candidates("t", "conv")] == [1]
    assert await s.get_blob("fp") == b"\x01"
    s._reader = LockedReader(sqlite3.SQLITE_IOERR)  # type: ignore[assignment]
    with pytest.raises(sqlite3.OperationalError):  # any other fault is the store's fault
        await s.get_blob("fp")
    await s.close()
