"""The per-conversation memory: prefix fingerprints (store reads and writes) and pins."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from proxy.config.settings import load_settings
from proxy.request import conversations
from proxy.request.conversations import STORE_PREFIX, Forwarded, PinMemory, PrefixTracker
from proxy.runtime import Runtime, new_transport
from proxy.stores import open_store


class SlowStore:
    """A blob store whose writes take a while, like a store under load."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.reads = 0

    async def get_blob(self, key: str) -> bytes | None:
        self.reads += 1
        return self.blobs.get(key)

    async def put_blob(
        self, key: str, value: bytes, ttl_seconds: float, owner: str | None = ""
    ) -> None:
        await asyncio.sleep(0.05)
        self.blobs[key] = value


MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]


async def test_drain_waits_for_the_background_writes() -> None:
    store = SlowStore()
    tracker = PrefixTracker(store)
    await tracker.see("c1", Forwarded(MESSAGES, 10, 10), persist=True)
    assert store.blobs == {}  # written in the background
    await tracker.drain()
    assert len(store.blobs) == 1
    # a fresh tracker (another replica, a restart) finds the fingerprint in the store
    again = PrefixTracker(store)
    seen = await again.see(
        "c1", Forwarded([*MESSAGES, {"role": "assistant", "content": "a"}], 12, 12)
    )
    assert seen.state == "kept"


async def test_a_small_prompt_costs_no_store_round_trip() -> None:
    store = SlowStore()
    tracker = PrefixTracker(store)
    seen = await tracker.see("c1", Forwarded(MESSAGES, 10, 10), persist=False)
    await tracker.drain()
    assert seen.state == "new"
    assert store.reads == 0 and store.blobs == {}
    # memory still compares the next one
    seen = await tracker.see(
        "c1", Forwarded([*MESSAGES, {"role": "user", "content": "x"}], 12, 12), False
    )
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
    rt = await Runtime.start(settings, new_transport())
    await rt.prefixes.see("c1", Forwarded(MESSAGES, 10, 10), persist=True)
    await rt.stop()  # at once: the write is still in flight
    store = open_store(settings)
    try:
        assert await store.get_blob(STORE_PREFIX + "c1") is not None
    finally:
        await store.close()


async def test_a_fingerprint_is_finished_after_the_answer_or_when_asked_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new conversation's prompt is digested once its answer has gone (the next turn of the
    event loop), not on its way; a next request that comes first finishes it itself."""
    digested: list[object] = []
    digest = conversations._digest

    def counting(message: dict[str, str]) -> bytes:
        digested.append(message)
        return digest(message)

    monkeypatch.setattr(conversations, "_digest", counting)
    tracker = PrefixTracker()
    first = [{"role": "system", "content": "s"}, {"role": "user", "content": "one"}]
    assert (await tracker.see("c1", Forwarded(first, 10, 10), persist=False)).state == "new"
    assert digested == []
    await asyncio.sleep(0)
    assert digested == first
    second = [*first, {"role": "assistant", "content": "a"}, {"role": "user", "content": "two"}]
    assert (await tracker.see("c1", Forwarded(second, 20, 20), persist=False)).state == "kept"
    # No turn of the loop between them: the next request finishes the fingerprint it needs.
    third = [*second, {"role": "assistant", "content": "b"}]
    assert (await tracker.see("c1", Forwarded(third, 30, 30), persist=False)).state == "kept"
    assert (
        await tracker.see("c1", Forwarded(first, 10, 10), persist=False)
    ).state == "broken"  # shorter
    edited = [first[0], {"role": "user", "content": "changed"}]
    assert (await tracker.see("c1", Forwarded(edited, 10, 10), persist=False)).state == "broken"


async def test_a_conversation_forgotten_before_its_fingerprint_is_finished_is_still_stored() -> (
    None
):
    store = SlowStore()
    tracker = PrefixTracker(store)
    tracker.memory.resize(conversations.FINGERPRINT_BYTES)  # memory for one conversation
    await tracker.see("c1", Forwarded(MESSAGES, 10, 10), persist=True)
    await tracker.see("c2", Forwarded(MESSAGES, 10, 10), persist=True)  # c1 leaves memory at once
    await tracker.drain()
    assert sorted(store.blobs) == [STORE_PREFIX + "c1", STORE_PREFIX + "c2"]
    again = PrefixTracker(store)
    longer = [*MESSAGES, {"role": "assistant", "content": "a"}]
    assert (await again.see("c1", Forwarded(longer, 12, 12))).state == "kept"


async def test_a_fingerprint_whose_digest_failed_is_finished_again_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    digest = conversations._digest
    failures = [MESSAGES[1]]

    def flaky(message: dict[str, str]) -> bytes:
        if message in failures:
            failures.remove(message)
            raise RuntimeError("a digest that fails once")
        return digest(message)

    monkeypatch.setattr(conversations, "_digest", flaky)
    tracker = PrefixTracker()
    await tracker.see("c1", Forwarded(MESSAGES, 10, 10), persist=False)
    with pytest.raises(RuntimeError):
        tracker._finish("c1", tracker._pending["c1"])  # as the scheduled call would
    longer = [*MESSAGES, {"role": "assistant", "content": "a"}]
    assert (await tracker.see("c1", Forwarded(longer, 12, 12), persist=False)).state == "kept"
