"""One summary per conversation across replicas (proxy/summaries/single_flight.py): a waiter gets the
holder's checkpoint; a holder that died, or a lock nobody holds any more, holds nobody up for
longer than the lock's short life; a live holder keeps its lock for as long as it works."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from proxy.stores.sqlite import SqliteStore
from proxy.summaries import single_flight
from proxy.summaries.single_flight import Flights
from strategies.checkpoints.chain import Checkpoint
from strategies.checkpoints.cut import FileLists

CHECKPOINT = Checkpoint(
    id="ck1",
    conversation="conv",
    covers=2,
    chain_hash="h2",
    summary="summary",
    tokens_before=100,
    tokens_after=10,
    files=FileLists(),
    created_at=time.time(),
)


def found(candidates: list[Checkpoint]) -> Checkpoint | None:
    return candidates[0] if candidates else None


def faults() -> list[Exception]:
    return []


async def test_a_waiter_gets_the_checkpoint_another_replica_made(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "cw.sqlite3", 3600, 100)
    a, b = Flights(store, faults().append), Flights(store, faults().append)

    async def slow() -> Checkpoint:
        await asyncio.sleep(single_flight.RENEW_SECONDS * 1.5)  # renewed once meanwhile
        await store.put("scope", CHECKPOINT)
        return CHECKPOINT

    holder = asyncio.ensure_future(a.run("k", slow, True, found, ("scope", "conv"), 30))
    await asyncio.sleep(0.05)
    waited = await b.run("k", slow, True, found, ("scope", "conv"), 30)
    assert waited == CHECKPOINT and await holder == CHECKPOINT
    assert not await store.locked("k")
    await store.close()


async def test_a_lock_whose_holder_died_holds_a_waiter_up_no_longer_than_its_life(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "cw.sqlite3", 3600, 100)
    assert await store.acquire("k", single_flight.LOCK_SECONDS)  # a replica killed as it summarized
    started = time.monotonic()

    async def never() -> Checkpoint | None:
        raise AssertionError("the waiter does not make it")

    got = await Flights(store, faults().append).run("k", never, True, found, ("s", "c"), 30)
    waited = time.monotonic() - started
    assert got is None
    assert waited < single_flight.LOCK_SECONDS + 1, waited
    await store.close()


async def test_a_lock_released_without_a_checkpoint_ends_the_wait(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "cw.sqlite3", 3600, 100)
    assert await store.acquire("k", single_flight.LOCK_SECONDS)

    async def holder_fails() -> None:
        await asyncio.sleep(0.3)
        await store.release("k")

    failing = asyncio.ensure_future(holder_fails())
    started = time.monotonic()

    async def never() -> Checkpoint | None:
        raise AssertionError("the waiter does not make it")

    assert (
        await Flights(store, faults().append).run("k", never, True, found, ("s", "c"), 30) is None
    )
    assert time.monotonic() - started < 1.0
    await failing
    await store.close()
