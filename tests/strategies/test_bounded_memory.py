"""Bounded memories (strategies/bounded_memory.py): never past their limit, the least recently used
going first, and their measure of what they hold no less than what tracemalloc finds they keep
alive (the memory budget is only as true as these estimates)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

import orjson
from hypothesis import given
from hypothesis import strategies as st

from strategies.bounded_memory import DigestMemo, Generations, Lru, ObjectMemo
from strategies.tokens import ChatCounter
from tests.conftest import O200K


def test_a_generation_that_fills_lets_go_of_what_no_one_used_since() -> None:
    memo: Generations[str, int] = Generations(lambda k, v: 10, limit=40)  # 2 a generation
    memo.put("a", 1)
    memo.put("b", 2)
    memo.put("c", 3)  # a new generation: a and b are old
    assert memo.get("a") == 1  # used: it moves to the young one
    memo.put("d", 4)  # the young one (c, a) is full: d begins another, b goes
    assert memo.get("b") is None
    assert [memo.get(k) for k in "acd"] == [1, 3, 4]
    assert memo.held == 30 and len(memo) == 3
    memo.resize(20)
    assert memo.held <= 20


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 50)), max_size=200))
def test_generations_never_hold_more_than_their_limit(puts: list[tuple[int, int]]) -> None:
    sizes: dict[int, int] = {}
    memo: Generations[int, int] = Generations(lambda k, v: sizes[k], limit=200)
    for key, size in puts:
        if memo.get(key) is None:
            sizes[key] = size
            memo.put(key, key)
        assert memo.held <= 200
        assert memo.get(key) in (key, None)


def test_an_lru_lets_the_least_recently_used_go_first() -> None:
    lru: Lru[str, int] = Lru(limit=30)
    for k, key in enumerate("abc"):
        lru.put(key, k, 10)
    assert lru.get("a") == 0  # the most recent now
    lru.put("d", 3, 10)
    assert "b" not in lru and [lru.peek(k) for k in "acd"] == [0, 2, 3]
    lru.put("huge", 4, 31)  # larger than the whole memory: not kept, nothing else lost
    assert "huge" not in lru and len(lru) == 3 and lru.held == 30
    lru.resize(10)
    assert list(k for k in "acd" if k in lru) == ["d"]


def retained(fill: Callable[[], object]) -> tuple[int, object]:
    """What ``fill()`` leaves allocated (tracemalloc), and what it returned (kept alive)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        kept = fill()
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    return sum(s.size_diff for s in after.compare_to(before, "filename")), kept


def texts(n: int, size: int) -> list[str]:
    return [f"{k} " + "word " * (size // 5) for k in range(n)]


def test_the_digest_memo_counts_what_it_keeps_alive() -> None:
    def fill() -> DigestMemo:
        memo = DigestMemo()
        for text in texts(2000, 300):
            memo.digest(text.encode())
        return memo

    real, memo = retained(fill)
    assert isinstance(memo, DigestMemo)
    assert real <= memo.held, (real, memo.held)


def test_the_digest_memo_keeps_orjsons_output_at_its_size() -> None:
    """orjson's output keeps a 4 KiB buffer: kept as is, 2,000 short messages' digests held
    8 MB where they measured 0.7."""

    def fill() -> DigestMemo:
        memo = DigestMemo()
        for text in texts(2000, 100):
            memo.digest(orjson.dumps({"role": "user", "content": text}))
        return memo

    real, memo = retained(fill)
    assert isinstance(memo, DigestMemo)
    assert real <= memo.held, (real, memo.held)


def test_the_object_memo_counts_what_it_keeps_alive() -> None:
    """Each entry keeps its message alive: a small message costs more than its JSON."""

    def fill() -> ObjectMemo:
        memo = ObjectMemo()
        for text in texts(2000, 40):
            message = {"role": "user", "content": text}
            memo.remember(message, b"d" * 16, len(orjson.dumps(message)))
        return memo

    real, memo = retained(fill)
    assert isinstance(memo, ObjectMemo)
    assert real <= memo.held, (real, memo.held)


def test_a_counters_memory_counts_what_it_keeps_alive() -> None:
    """A short message's count is kept by its items, which keep their strings alive."""

    def fill() -> ChatCounter:
        counter = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))
        for k, text in enumerate(texts(1000, 200)):
            counter.message({"role": "user", "content": text, "name": f"n{k}"})
            counter.message({"role": "tool", "content": [{"type": "text", "text": f"{k}"}]})
            counter.text(f"call_{k}")
        return counter

    real, counter = retained(fill)
    assert isinstance(counter, ChatCounter)
    assert real <= counter.held, (real, counter.held)
