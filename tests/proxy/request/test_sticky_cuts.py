"""A conversation's last cut (proxy/request/sticky_cuts.py): kept in memory and in the store, shared
by replicas, and when the store fails, simply not replayed (the request is cut afresh)."""

from __future__ import annotations

from pathlib import Path

from proxy.config.settings import load_settings
from proxy.request import sticky_cuts
from proxy.request.sticky_cuts import STORE_PREFIX, CutMemory
from proxy.stores import StoreFault, open_store
from strategies.sticky import Recipe, encode

RECIPE = Recipe(
    count=3,
    digest=b"\x01" * 16,
    parts=(0, {"role": "user", "content": "[summary]"}, 2),
    actions=("summarize",),
    budget=900,
)


class BrokenStore:
    async def get_blob(self, key: str) -> bytes | None:
        raise StoreFault("disk gone")

    async def put_blob(
        self, key: str, value: bytes, ttl_seconds: float, owner: str | None = ""
    ) -> None:
        raise StoreFault("disk gone")


async def test_replicas_sharing_a_store_replay_each_others_cuts(tmp_path: Path) -> None:
    settings = load_settings(None, data_dir=str(tmp_path))
    one, two = open_store(settings), open_store(settings)
    try:
        first = CutMemory(one)
        first.remember("conv", RECIPE)
        await first.drain()
        assert await two.get_blob(STORE_PREFIX + "conv") is not None
        assert await CutMemory(two).recall("conv") == RECIPE  # another replica, or a restart
        assert await CutMemory(two).recall("other") is None
    finally:
        await one.close()
        await two.close()


async def test_a_failing_store_degrades_to_cutting_afresh() -> None:
    memory = CutMemory(BrokenStore())
    assert await memory.recall("conv") is None  # no error reaches the request
    memory.remember("conv", RECIPE)  # the write fails in the background
    await memory.drain()
    assert await memory.recall("conv") == RECIPE  # memory still has it


async def test_memory_is_bounded_and_a_huge_or_unstorable_cut_is_forgotten() -> None:
    memory = CutMemory()
    one = sticky_cuts.ENTRY + len(encode(RECIPE))
    memory.memory.resize(2 * one)  # its share of the memory budget: two recipes
    for name in ("a", "b"):
        memory.remember(name, RECIPE)
    assert await memory.recall("a") == RECIPE  # a is the most recently used now
    memory.remember("c", RECIPE)
    assert await memory.recall("b") is None  # the least recently used went
    assert await memory.recall("a") == RECIPE and await memory.recall("c") == RECIPE
    assert memory.memory.held == 2 * one
    huge = Recipe(
        count=1,
        digest=b"\x00" * 16,
        parts=({"role": "user", "content": "x" * (5 << 20)},),
        actions=(),
        budget=1,
    )
    memory.remember("c", huge)
    assert await memory.recall("c") is None  # the old cut is not replayed either
    memory.remember(
        "b",
        Recipe(
            count=1,
            digest=b"\x00" * 16,
            parts=({"role": "user", "content": {1, 2}},),
            actions=(),
            budget=1,
        ),
    )
    assert await memory.recall("b") is None


class CountingStore:
    """A store that holds one recipe and counts its reads."""

    def __init__(self, raw: bytes) -> None:
        self.raw, self.reads = raw, 0

    async def get_blob(self, key: str) -> bytes | None:
        self.reads += 1
        return self.raw if key == STORE_PREFIX + "conv" else None

    async def put_blob(
        self, key: str, value: bytes, ttl_seconds: float, owner: str | None = ""
    ) -> None:
        return None


async def test_a_cut_read_from_the_store_is_replayed_from_memory_after() -> None:
    store = CountingStore(encode(RECIPE))
    memory = CutMemory(store)
    for _ in range(3):  # a restarted replica: the store once, then memory
        assert await memory.recall("conv") == RECIPE
    assert store.reads == 1
    assert await memory.recall("other") is None and await memory.recall("other") is None
    assert store.reads == 3  # a miss is not remembered: the other replica may cut it later
