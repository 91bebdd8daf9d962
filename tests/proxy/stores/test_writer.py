"""The request path's blob writes, gathered (proxy/stores/writer.py): one batch per delay, the
newest value per key, reads that see what waits, one batch at a time, nothing lost at stop."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from proxy.config.settings import load_settings
from proxy.stores import StoreFault, open_store
from proxy.stores.quota import Blob
from proxy.stores.writer import BlobWriter


class Recording:
    """A batch store that records each batch; ``pause`` holds a batch in flight until set."""

    def __init__(self, failures: int = 0) -> None:
        self.blobs: dict[str, bytes] = {}
        self.batches: list[list[Blob]] = []
        self.pause: asyncio.Event | None = None
        self.failures = failures
        self.in_flight = 0
        self.most_in_flight = 0

    async def get_blob(self, key: str) -> bytes | None:
        return self.blobs.get(key)

    async def put_blobs(self, items: list[Blob]) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.pause is not None:
                await self.pause.wait()
            self.batches.append(items)
            if self.failures:
                self.failures -= 1
                raise StoreFault("the store is down")
            self.blobs.update({b.key: b.value for b in items})
        finally:
            self.in_flight -= 1


async def test_writes_within_the_delay_go_in_one_batch_with_the_newest_value_per_key() -> None:
    store = Recording()
    writer = BlobWriter(store, delay=0.02)
    await writer.put_blob("prefix\tc1", b"1", 60)
    await writer.put_blob("cut\tc1", b"cut", 60)
    await writer.put_blob("prefix\tc1", b"2", 60)  # the conversation's next request
    assert store.batches == []  # nothing written on the request's path
    await asyncio.sleep(0.1)
    assert store.batches == [[Blob("prefix\tc1", b"2", 60), Blob("cut\tc1", b"cut", 60)]]


async def test_reads_see_what_waits_and_what_is_being_written() -> None:
    store = Recording()
    store.pause = asyncio.Event()
    writer = BlobWriter(store, delay=0.01)
    store.blobs["k"] = b"old"
    await writer.put_blob("k", b"waiting", 60)
    assert await writer.get_blob("k") == b"waiting"
    await asyncio.sleep(0.05)  # the batch is in flight, held
    assert store.in_flight == 1
    assert await writer.get_blob("k") == b"waiting"
    await writer.put_blob("k", b"newer", 60)
    assert await writer.get_blob("k") == b"newer"
    assert await writer.get_blob("absent") is None
    store.pause.set()
    await writer.drain()
    assert store.blobs["k"] == b"newer"
    assert await writer.get_blob("k") == b"newer"


async def test_one_batch_at_a_time_in_order() -> None:
    """A batch is not started while another is in flight: two could land out of order (the
    SQLite store's lock is not taken in order), leaving an older value behind."""
    store = Recording()
    store.pause = asyncio.Event()
    writer = BlobWriter(store, delay=0.01)
    await writer.put_blob("k", b"1", 60)
    await asyncio.sleep(0.05)
    await writer.put_blob("k", b"2", 60)
    await asyncio.sleep(0.05)  # past the delay, the first batch still in flight
    assert store.in_flight == 1
    store.pause.set()
    await asyncio.sleep(0.1)
    assert [batch[0][1] for batch in store.batches] == [b"1", b"2"]
    assert store.most_in_flight == 1
    assert store.blobs["k"] == b"2"


async def test_a_failed_batch_is_dropped_and_the_next_writes_go_on() -> None:
    store = Recording(failures=1)
    writer = BlobWriter(store, delay=0.01)
    await writer.put_blob("a", b"1", 60)
    await asyncio.sleep(0.05)
    assert store.blobs == {} and len(store.batches) == 1
    assert await writer.get_blob("a") is None  # no longer held: the store never took it
    await writer.put_blob("b", b"2", 60)
    await asyncio.sleep(0.05)
    assert store.blobs == {"b": b"2"}


async def test_drain_writes_what_waits_at_once() -> None:
    store = Recording()
    writer = BlobWriter(store, delay=60)
    await writer.put_blob("a", b"1", 60)
    await asyncio.wait_for(writer.drain(), 1)
    assert store.blobs == {"a": b"1"}
    await asyncio.wait_for(writer.drain(), 1)  # nothing left: returns at once


@pytest.mark.parametrize("delay", [0.0, 0.01])
async def test_the_sqlite_store_takes_a_batch_in_one_call(tmp_path: Path, delay: float) -> None:
    store = open_store(load_settings(None, data_dir=str(tmp_path)))
    try:
        calls: list[int] = []
        put_blobs = store.put_blobs

        async def counted(items: list[tuple[str, bytes, float]]) -> None:
            calls.append(len(items))
            await put_blobs(items)

        store.put_blobs = counted  # type: ignore[method-assign]
        writer = BlobWriter(store, delay=delay)
        for i in range(50):
            await writer.put_blob(f"k{i % 10}", f"v{i}".encode(), 60)
        await writer.drain()
        assert calls == [10]  # one call, the newest value of each of the 10 keys
        assert [await store.get_blob(f"k{i}") for i in range(10)] == [
            f"v{40 + i}".encode() for i in range(10)
        ]
    finally:
        await store.close()
