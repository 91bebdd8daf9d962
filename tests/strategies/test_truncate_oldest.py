from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.truncate_oldest import TruncateOldest
from tests.counters import FixedCounter
from tests.strategies.conversations import conversation
from tests.strategies.invariants import assert_subsequence_of_same_objects, assert_tool_pairs_intact


def m(role: str, text: str = "x", **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": text, **extra}


def call(i: str) -> dict[str, Any]:
    return {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}


COUNTER = FixedCounter(10)


def test_removes_oldest_first_until_it_fits() -> None:
    msgs = [m("user", "a"), m("assistant", "b"), m("user", "c")]
    out = TruncateOldest().apply(msgs, 30, 20, COUNTER)
    assert [x["content"] for x in out] == ["b", "c"]
    assert out[0] is msgs[1]


def test_keep_pairs_removes_a_user_message_with_its_answer() -> None:
    msgs = [m("user", "a"), m("assistant", "b"), m("user", "c"), m("assistant", "d")]
    out = TruncateOldest(unit="pair").apply(msgs, 40, 30, COUNTER)
    assert [x["content"] for x in out] == ["c", "d"]


def test_leading_assistant_goes_alone_with_pairs() -> None:
    msgs = [m("assistant", "a"), m("user", "b"), m("assistant", "c")]
    out = TruncateOldest(unit="pair").apply(msgs, 30, 20, COUNTER)
    assert [x["content"] for x in out] == ["b", "c"]


def test_tool_calls_leave_with_their_results() -> None:
    msgs = [
        m("assistant", "", tool_calls=[call("1"), call("2")]),
        m("tool", "r1", tool_call_id="1"),
        m("tool", "r2", tool_call_id="2"),
        m("user", "q"),
    ]
    out = TruncateOldest().apply(msgs, 40, 30, COUNTER)
    assert [x["content"] for x in out] == ["q"]


def test_protected_roles_survive() -> None:
    msgs = [m("system", "s"), m("user", "a"), m("assistant", "b"), m("user", "c")]
    out = TruncateOldest(protect_roles=["system"]).apply(msgs, 40, 20, COUNTER)
    assert [x["content"] for x in out] == ["s", "c"]


def test_min_messages_drops_the_block_instead() -> None:
    msgs = [m("user", "a"), m("assistant", "b"), m("user", "c")]
    assert TruncateOldest(min_messages=2).apply(msgs, 30, 10, COUNTER) == []


def test_turn_unit_removes_whole_turns() -> None:
    msgs = [
        m("user", "a"),
        m("assistant", "", tool_calls=[call("1")]),
        m("tool", "r", tool_call_id="1"),
        m("assistant", "b"),
        m("user", "c"),
        m("assistant", "d"),
    ]
    out = TruncateOldest(unit="turn").apply(msgs, 60, 50, COUNTER)
    assert [x["content"] for x in out] == ["c", "d"]


@settings(max_examples=300, deadline=None)
@given(conversation(), st.integers(0, 400), st.sampled_from(["message", "pair", "turn"]))
def test_invariants(msgs: list[dict[str, Any]], limit: int, unit: str) -> None:
    out = TruncateOldest(unit=unit).apply(msgs, len(msgs) * 10, limit, COUNTER)  # type: ignore[arg-type]
    assert len(out) * 10 <= limit or out == []
    assert_tool_pairs_intact(msgs)
    assert_tool_pairs_intact(out)
    assert_subsequence_of_same_objects(out, msgs)
    assert out == TruncateOldest(unit=unit).apply(msgs, len(msgs) * 10, limit, COUNTER)  # type: ignore[arg-type]
