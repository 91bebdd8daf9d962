"""The memory budget (proxy/observe/memory.py): the footprint taken off, each cache given its
share of the rest, the use shown in /admin/stats and /metrics; and the per-conversation
memories' measure no less than what tracemalloc finds they keep alive."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from proxy.observe import memory
from proxy.observe.memory import FLOOR, MIB, SHARES, MemoryBudget
from proxy.request.conversations import Forwarded, PrefixTracker
from proxy.request.recall import RecallMemory
from proxy.request.sticky_cuts import CutMemory
from proxy.summaries.seen import SeenConversations
from strategies.bounded_memory import Lru
from strategies.sticky import Recipe


def budget_over(footprint: int, budget_mb: int) -> tuple[MemoryBudget, dict[str, Lru[str, int]]]:
    caches = {name: Lru[str, int]() for name in SHARES}
    budget = MemoryBudget(budget_mb)
    for name, cache in caches.items():
        budget.add(name, cache)
    return budget, caches


def test_the_caches_share_what_the_footprint_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "resident", lambda: 300 * MIB)
    budget, caches = budget_over(300 * MIB, 768)
    budget.measure()
    assert budget.footprint == 300 * MIB and budget.caches == 468 * MIB
    for name, cache in caches.items():
        assert cache.limit == int(468 * MIB * SHARES[name])
    assert sum(SHARES.values()) == pytest.approx(1.0)
    figures = budget.figures()
    assert (figures["budget_mb"], figures["footprint_mb"], figures["caches_mb"]) == (768, 300, 468)
    assert set(figures["caches"]) == set(SHARES)


def test_what_the_caches_hold_is_not_taken_for_footprint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured again once litellm has loaded, the caches already hold something."""
    budget, caches = budget_over(0, 768)
    caches["cuts"].put("conversation", 1, 50 * MIB)
    monkeypatch.setattr(memory, "resident", lambda: 350 * MIB)
    budget.measure()
    assert budget.footprint == 300 * MIB


def test_a_budget_below_the_footprint_leaves_the_caches_a_floor(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(memory, "resident", lambda: 400 * MIB)
    budget, _ = budget_over(0, 256)
    budget.measure()
    assert budget.caches == FLOOR
    assert "below this process's footprint" in caplog.text


def test_the_use_shows_in_the_admin_stats_and_the_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CW_ADMIN", "cw-admin")
    # The proxy runs in the test runner's process, whose size depends on the tests run before.
    monkeypatch.setattr(memory, "resident", lambda: 300 * MIB)
    with BackgroundServer(create_upstream(window=4096)) as demo:
        config = {
            "upstreams": {"demo": {"base_url": f"{demo.url}/v1"}},
            "data_dir": str(tmp_path),
            "admin_key_env": "CW_ADMIN",
            "limits": {"memory_budget_mb": 900},
            "models": {"demo-model": {"context_window": 4096, "tokenizer": "o200k_base"}},
        }
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            words = "hi " * 3000  # near the window: counted, and cut
            body = {"model": "demo-model", "messages": [{"role": "user", "content": words}]}
            assert httpx.post(f"{proxy.url}/v1/chat/completions", json=body).status_code == 200
            stats = httpx.get(
                f"{proxy.url}/admin/stats", headers={"authorization": "Bearer cw-admin"}
            ).json()["memory"]
            metrics = httpx.get(f"{proxy.url}/metrics").text
    assert stats["budget_mb"] == 900
    assert 250 < stats["footprint_mb"] <= 300  # what the caches hold is not footprint
    assert stats["footprint_mb"] + stats["caches_mb"] == pytest.approx(900, abs=1)
    assert stats["caches"]["token counts"]["entries"] > 0
    assert stats["held_mb"] <= stats["caches_mb"]
    assert 'contextwarden_memory_bytes{kind="limit",part="cuts"}' in metrics
    assert 'contextwarden_memory_bytes{kind="resident",part="process"}' in metrics
    assert stats["in_flight_mb"] == 0
    assert 'contextwarden_memory_bytes{kind="held",part="large bodies in flight"}' in metrics


async def test_a_large_body_in_flight_takes_its_room_from_the_caches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory, "resident", lambda: 300 * MIB)
    budget, caches = budget_over(0, 768)
    budget.measure()
    async with budget.holding(10 * MIB):
        assert budget.in_flight == 10 * MIB * memory.IN_FLIGHT_FACTOR
        assert budget.caches == 468 * MIB - budget.in_flight
        assert caches["cuts"].limit == int(budget.caches * SHARES["cuts"])
        assert budget.figures()["in_flight_mb"] == 40
    assert budget.in_flight == 0 and budget.caches == 468 * MIB
    assert caches["cuts"].limit == int(468 * MIB * SHARES["cuts"])


async def test_large_bodies_past_the_room_wait_one_alone_always_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """room = 768 - 300 - 32 = 436 MiB: a 100 MiB body (400 counted) goes, a second waits
    for it; a body larger than the room goes when it is alone."""
    monkeypatch.setattr(memory, "resident", lambda: 300 * MIB)
    budget, _ = budget_over(0, 768)
    budget.measure()
    order: list[str] = []
    first_out = asyncio.Event()

    async def body(name: str, size: int, hold: asyncio.Event | None) -> None:
        async with budget.holding(size):
            order.append(f"{name} in")
            if hold is not None:
                await hold.wait()
            order.append(f"{name} out")

    first = asyncio.create_task(body("first", 100 * MIB, first_out))
    await asyncio.sleep(0.01)
    second = asyncio.create_task(body("second", 100 * MIB, None))
    small = asyncio.create_task(body("small", 5 * MIB, None))
    await asyncio.sleep(0.01)
    assert order == ["first in", "small in", "small out"]  # 400 + 20 <= 436; 400 + 400 not
    assert budget.waited == 1
    first_out.set()
    await asyncio.gather(first, second, small)
    assert order[3:] == ["first out", "second in", "second out"]
    huge = asyncio.create_task(body("huge", 500 * MIB, None))
    await asyncio.wait_for(huge, 1)  # 2,000 MiB counted, over the room: alone, it goes
    assert budget.in_flight == 0


OURS = [tracemalloc.Filter(True, f"{Path(__file__).parents[3]}/*")]  # not the test runner's


def retained(fill: Callable[[], Any]) -> tuple[int, Any]:
    """What ``fill()`` leaves allocated by this project's code (tracemalloc), and what it
    returned (kept alive)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(OURS)
        kept = fill()
        gc.collect()
        after = tracemalloc.take_snapshot().filter_traces(OURS)
    finally:
        tracemalloc.stop()
    return sum(s.size_diff for s in after.compare_to(before, "filename")), kept


MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]


async def test_fingerprints_count_what_they_keep_alive() -> None:
    async def fill() -> PrefixTracker:
        tracker = PrefixTracker()
        for k in range(3000):
            await tracker.see(f"{k:032x}", Forwarded(MESSAGES, 100 + k, 100 + k), persist=False)
            await asyncio.sleep(0)  # its answer goes: the fingerprint is finished
        await tracker.drain()
        return tracker

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(OURS)
        tracker = await fill()
        gc.collect()
        after = tracemalloc.take_snapshot().filter_traces(OURS)
    finally:
        tracemalloc.stop()
    real = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert real <= tracker.memory.held, (real, tracker.memory.held)


def test_cuts_and_seen_marks_count_what_they_keep_alive() -> None:
    def cuts() -> CutMemory:
        memory = CutMemory()
        for k in range(2000):
            summary = {"role": "user", "content": f"[summary {k}] " + "done " * 40}
            recipe = Recipe(
                count=9,
                digest=bytes(16),
                parts=(0, summary, 7, 8),
                actions=("summarize",),
                budget=3000,
            )
            memory.remember(f"{k:032x}", recipe)
        return memory

    real, kept = retained(cuts)
    assert real <= kept.memory.held, (real, kept.memory.held)

    def marks() -> SeenConversations:
        seen = SeenConversations()
        for k in range(3000):
            seen._hold(f"scope~{k:032x}:{k:032x}")
        return seen

    real, kept = retained(marks)
    assert real <= kept.memory.held, (real, kept.memory.held)


def test_recalled_outputs_count_what_they_keep_alive() -> None:
    def fill() -> RecallMemory:
        memory = RecallMemory()
        for k in range(300):
            outputs = {
                f"r{k:06x}{i:06x}": (f"{k} {i} " + "out " * 200, f"bash ls {i}") for i in range(5)
            }
            memory.keep(f"{k:032x}", outputs)
        return memory

    real, kept = retained(fill)
    assert real <= kept.held, (real, kept.held)
    kept.resize(kept.held // 2)  # its share shrinks: the least recently used go
    assert kept.held <= kept.limit
