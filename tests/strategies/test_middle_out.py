from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.middle_out import MiddleOut
from tests.counters import FixedCounter
from tests.strategies.conversations import conversation
from tests.strategies.invariants import assert_subsequence_of_same_objects, assert_tool_pairs_intact

C = FixedCounter(10)


def msgs(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": str(i)} for i in range(n)]


def test_removes_from_the_middle_keeping_both_ends() -> None:
    out = MiddleOut().apply(msgs(7), 70, 40, C)
    assert [m["content"] for m in out] == ["0", "1", "5", "6"]


def test_keep_first_and_last_counts() -> None:
    out = MiddleOut(keep_first=2, keep_last=2).apply(msgs(8), 80, 40, C)
    assert [m["content"] for m in out] == ["0", "1", "6", "7"]


def test_drops_the_block_when_the_ends_alone_do_not_fit() -> None:
    assert MiddleOut().apply(msgs(3), 30, 10, C) == []


@settings(max_examples=200, deadline=None)
@given(conversation(), st.integers(0, 300))
def test_invariants(conv: list[dict[str, Any]], limit: int) -> None:
    out = MiddleOut().apply(conv, len(conv) * 10, limit, C)
    assert len(out) * 10 <= limit
    assert_tool_pairs_intact(out)
    assert_subsequence_of_same_objects(out, conv)
