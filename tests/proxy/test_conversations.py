"""The per-conversation memory: prefix fingerprints (store reads and writes) and pins."""

from __future__ import annotations

import asyncio
from pathlib import Path

from proxy.config.settings import load_settings
from proxy.edge.runtime import Runtime, new_transport
from proxy.request.conversations import STORE_PREFIX, PinMemory, PrefixTracker
from proxy.stores import open_store


class SlowStore:
    """A blob store whose writes take a while, like a store under load."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.reads = 0

    async def get_blob(self, key: str) -> bytes | None:
        self.reads += 1
        return self.blobs.get(key)

    async def put_blob(self, key: str, value: bytes, ttl_seconds: float) -> None:
        await asyncio.sleep(0.05)
        self.blobs[key] = value


MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]


async def test_drain_waits_for_the_background_writes() -> None:
    store = SlowStore()
    tracker = PrefixTracker(store)
    await tracker.see("c1", MESSAGES, 10, 10, persist=True)
    assert store.blobs == {}  # written in the background
    await tracker.drain()
    assert len(store.blobs) == 1
    # a fresh tracker (another replica, a restart) finds the fingerprint in the store
    again = PrefixTracker(store)
    seen = await again.see("c1", [*MESSAGES, {"role": "assistant", "content": "a"}], 12, 12)
    assert seen.state == "kept"


async def test_a_small_prompt_costs_no_store_round_trip() -> None:
    store = SlowStore()
    tracker = PrefixTracker(store)
    seen = await tracker.see("c1", MESSAGES, 10, 10, persist=False)
    await tracker.drain()
    assert seen.state == "new"
    assert store.reads == 0 and store.blobs == {}
    # memory still compares the next one
    seen = await tracker.see("c1", [*MESSAGES, {"role": "user", "content": "x"}], 12, 12, False)
    assert seen.state == "kept"


def test_pin_last_is_remembered_for_the_conversation() -> None:
    pins = PinMemory()
    first = [{"role": "user", "content": "rule: always answer in French"}]
    assert pins.pinned("c1", first, pin_last=True) == {id(first[0])}
    later = [
        {"role": "user", "content": "rule: always answer in French"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next"},
    ]
    assert pins.pinned("c1", later, pin_last=False) == {id(later[0])}
    assert pins.pinned("c2", later, pin_last=False) == frozenset()


async def test_a_fingerprint_written_at_shutdown_reaches_the_store(tmp_path: Path) -> None:
    """Runtime.stop waits for pending fingerprint writes before it closes the store (they were
    lost: 'Cannot operate on a closed database')."""
    settings = load_settings(None, data_dir=str(tmp_path))
    rt = await Runtime.start(settings, new_transport(settings))
    await rt.prefixes.see("c1", MESSAGES, 10, 10, persist=True)
    await rt.stop()  # at once: the write is still in flight
    store = open_store(settings)
    try:
        assert await store.get_blob(STORE_PREFIX + "c1") is not None
    finally:
        await store.close()
