"""What replicas of one store share, kept in the store and only cached in each process: the
seen-conversation marks, the newest prefix fingerprint, the newest cut, a team's quota; and a
request's writes reach the store before its answer leaves (the next request may go elsewhere)."""

from __future__ import annotations

import asyncio

import pytest

from proxy.request.conversations import Forwarded, PrefixTracker
from proxy.request.recall import RecallMemory
from proxy.request.sticky_cuts import CutMemory
from proxy.stores import StoreFault
from proxy.stores.quota import Blob
from proxy.stores.writer import BlobWriter
from proxy.summaries.allowance import Allowance, TeamQuota
from proxy.summaries.llm import AllowanceSpent
from proxy.summaries.seen import STORE_PREFIX, SeenConversations
from strategies.sticky import Recipe


class Shared:
    """An in-memory store shared by several "replicas" (blobs and quota slots)."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.slots: dict[str, int] = {}
        self.reads = 0
        self.down = False

    async def get_blob(self, key: str) -> bytes | None:
        if self.down:
            raise StoreFault("the store is down")
        self.reads += 1
        return self.blobs.get(key)

    async def put_blob(
        self, key: str, value: bytes, ttl_seconds: float, owner: str | None = ""
    ) -> None:
        await self.put_blobs([Blob(key, value, ttl_seconds, owner)])

    async def put_blobs(self, items: list[Blob]) -> None:
        if self.down:
            raise StoreFault("the store is down")
        await asyncio.sleep(0.01)
        self.blobs.update({b.key: b.value for b in items})

    async def take_slot(self, key: str, limit: int, window_seconds: float) -> bool:
        if self.down:
            raise StoreFault("the store is down")
        if self.slots.get(key, 0) >= limit:
            return False
        self.slots[key] = self.slots.get(key, 0) + 1
        return True

    async def slots_taken(self, key: str, window_seconds: float) -> int:
        if self.down:
            raise StoreFault("the store is down")
        return self.slots.get(key, 0)


async def settle(tracker: PrefixTracker, writer: BlobWriter) -> None:
    """What a request does before its answer leaves (proxy/runtime.py: Runtime.settle)."""
    await tracker.drain()
    await writer.flush()


def turns(n: int) -> list[dict[str, str]]:
    """A conversation's messages after ``n`` user turns (each answered but the last)."""
    messages = [{"role": "system", "content": "s"}]
    for i in range(n):
        messages.append({"role": "user", "content": f"question {i}"})
        if i < n - 1:
            messages.append({"role": "assistant", "content": f"answer {i}"})
    return messages


async def test_a_conversation_seen_by_one_replica_is_seen_by_the_others() -> None:
    store = Shared()
    a, b = SeenConversations(store, 60), SeenConversations(store, 60)
    assert not await a.check("conv")  # its first sight, anywhere
    assert await b.check("conv")  # the mark is the store's: not b's first sight
    assert await a.check("conv")
    reads = store.reads
    assert await b.check("conv") and store.reads == reads  # b remembers what it read
    assert not await b.check("other", remember=False)  # a preview marks nothing
    assert not await a.check("other")
    assert list(store.blobs) == [STORE_PREFIX + "conv", STORE_PREFIX + "other"]


async def test_a_store_fault_reads_as_a_first_sight_and_memory_still_remembers() -> None:
    store = Shared()
    store.down = True
    seen = SeenConversations(store, 60)
    assert not await seen.check("conv")
    assert await seen.check("conv")  # this process saw it


async def test_alternating_replicas_compare_with_the_newest_fingerprint() -> None:
    """Two replicas take turns with one conversation. Each compares a request with the
    conversation's last prompt, wherever it went; a replica's own fingerprint is two requests
    old. The accounting reports each request's real predecessor: kept, with its tokens."""
    store = Shared()
    writers = [BlobWriter(store), BlobWriter(store)]
    replicas = [PrefixTracker(w, shared=True) for w in writers]
    states = []
    for n in range(1, 7):
        replica, writer = replicas[n % 2], writers[n % 2]
        seen = await replica.see("conv", Forwarded(turns(n), 10 * n, 10 * n), persist=False)
        await settle(replica, writer)
        states.append((seen.state, seen.previous_tokens))
    assert states == [("new", 0)] + [("kept", 10 * n) for n in range(1, 6)]


async def test_a_fingerprint_older_than_memorys_is_not_taken_from_the_store() -> None:
    store = Shared()
    writer = BlobWriter(store)
    replica = PrefixTracker(writer, shared=True)
    await replica.see("conv", Forwarded(turns(2), 20, 20))
    await settle(replica, writer)
    stale = dict(store.blobs)
    await replica.see("conv", Forwarded(turns(3), 30, 30))
    await settle(replica, writer)
    store.blobs.update(stale)  # the store lost the newest write
    seen = await replica.see("conv", Forwarded(turns(4), 40, 40))
    assert (seen.state, seen.previous_tokens) == ("kept", 30)


async def test_without_a_shared_store_memory_answers_alone() -> None:
    store = Shared()
    tracker = PrefixTracker(store)
    await tracker.see("conv", Forwarded(turns(1), 10, 10), persist=True)
    await tracker.drain()
    reads = store.reads
    assert (await tracker.see("conv", Forwarded(turns(2), 20, 20), persist=True)).state == "kept"
    assert store.reads == reads  # one process on its own file: its memory is the truth


async def test_a_replica_replays_the_newest_cut_the_store_holds() -> None:
    store = Shared()
    old = Recipe(
        count=3, digest=b"\x01" * 16, parts=(0, 1, 2), actions=("truncate_oldest",), budget=900
    )
    new = Recipe(
        count=5, digest=b"\x02" * 16, parts=(0, 3, 4), actions=("truncate_oldest",), budget=900
    )
    a, b = CutMemory(store, shared=True), CutMemory(store, shared=True)
    a.remember("conv", old)
    await a.drain()
    assert await b.recall("conv") == old
    b.remember("conv", new)  # b cut afresh since
    await b.drain()
    assert await a.recall("conv") == new  # not the one a made
    store.down = True
    assert await a.recall("conv") is None  # the store is down: cut afresh
    store.down = False  # back before the fresh cut is written
    a.remember("conv", old)
    await a.drain()
    assert await b.recall("conv") == new  # not over the newest: it was cut without reading it
    store.down = False
    store.blobs.clear()  # the store restarted empty: cut afresh
    assert await b.recall("conv") is None


async def test_a_flush_returns_once_what_was_put_is_in_the_store() -> None:
    store = Shared()
    writer = BlobWriter(store, delay=60)  # never on its own within the test
    await writer.put_blob("a", b"1", 60)
    await asyncio.wait_for(writer.flush(), 1)
    assert store.blobs == {"a": b"1"}
    await writer.put_blob("b", b"2", 60)
    flushing = asyncio.ensure_future(writer.flush())
    await asyncio.sleep(0)
    await writer.put_blob("c", b"3", 60)  # put while b's batch is in flight
    await asyncio.wait_for(asyncio.gather(flushing, writer.flush()), 1)
    assert store.blobs == {"a": b"1", "b": b"2", "c": b"3"}
    await asyncio.wait_for(writer.flush(), 1)  # nothing waits: at once


async def test_a_flush_returns_when_the_store_fails() -> None:
    store = Shared()
    store.down = True
    writer = BlobWriter(store, delay=60)
    await writer.put_blob("a", b"1", 60)
    await asyncio.wait_for(writer.flush(), 1)
    assert store.blobs == {}


async def test_replicas_take_a_teams_calls_from_one_quota() -> None:
    store = Shared()
    quotas = [
        TeamQuota(team="t", per_hour=3, store=store),
        TeamQuota(team="t", per_hour=3, store=store),
    ]
    made = [await quotas[i % 2].take() for i in range(6)]
    assert made == [True, True, True, False, False, False]
    assert [await q.left() for q in quotas] == [0, 0]
    assert [(q.calls, q.refused) for q in quotas] == [(2, 1), (1, 2)]
    allowance = Allowance.start(4, 30, quotas[0])
    assert await allowance.affordable(4) == 0
    with pytest.raises(AllowanceSpent, match="team's summarizer calls"):
        await allowance.take(10)


async def test_concurrent_checkpoints_never_start_pieces_the_quota_cannot_finish() -> None:
    """Two checkpoints of three pieces each on a team's hour of 4 calls, their calls
    interleaved (two requests, or two replicas): the first takes its three, the second the one
    left (it summarizes its last piece). Read-then-spend let both start, each spent two calls
    and was cut short: 4 calls, no checkpoint."""
    store = Shared()
    quota = TeamQuota(team="t", per_hour=4, store=store)
    first, second = Allowance.start(8, 30, quota), Allowance.start(8, 30, quota)
    assert [await first.affordable(3), await second.affordable(3)] == [3, 1]
    for _ in range(3):
        await first.take(10)
    await second.take(10)
    assert await quota.left() == 0
    with pytest.raises(AllowanceSpent, match="team's summarizer calls"):
        await second.take(10)  # past what it was given: the quota holds


async def test_a_quota_the_store_cannot_count_holds() -> None:
    store = Shared()
    store.down = True
    quota = TeamQuota(team="t", per_hour=100, store=store)
    assert not await quota.take()
    assert await quota.left() == 0
    free = TeamQuota(team="t", per_hour=None, store=store)  # no cap: the store is not asked
    assert await free.take() and await free.left() is None


async def test_a_replica_finds_a_call_another_recorded_for_recall() -> None:
    """Recall by what a call was (a file name) reads the store's index of the conversation's
    calls: the newest may have been made on another replica."""
    store = Shared()
    a, b = RecallMemory(store, 60, shared=True), RecallMemory(store, 60, shared=True)
    a.keep("conv", {"r000000000001": ("first", "read_file a.py")})
    await a.drain()
    assert await b.get("conv", "a.py") == "first"
    b.keep("conv", {"r000000000002": ("second", "read_file a.py")})  # read again, on b
    await b.drain()
    assert await a.get("conv", "a.py") == "second"
