from __future__ import annotations

from typing import Any

from strategies.repair import CANCELLED, repair_tool_calls
from tests.strategies.invariants import assert_tool_pairs_intact


def call(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
        ],
    }


def result(i: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": i, "content": f"r{i}"}


def test_valid_history_is_unchanged() -> None:
    msgs = [{"role": "user", "content": "q"}, call("a"), result("a")]
    out, changed = repair_tool_calls(msgs)
    assert not changed
    assert all(x is y for x, y in zip(out, msgs, strict=True))


def test_late_result_moves_next_to_its_call() -> None:
    msgs = [call("a", "b"), result("a"), {"role": "user", "content": "hurry"}, result("b")]
    out, changed = repair_tool_calls(msgs)
    assert changed
    assert [m.get("tool_call_id") or m["role"] for m in out] == ["assistant", "a", "b", "user"]
    assert_tool_pairs_intact(out)


def test_missing_result_gets_a_cancelled_stand_in_and_orphans_go() -> None:
    msgs = [result("ghost"), call("a"), {"role": "user", "content": "next"}]
    out, changed = repair_tool_calls(msgs)
    assert changed
    assert out[0]["role"] == "assistant"
    assert out[1] == {"role": "tool", "tool_call_id": "a", "content": CANCELLED}
    assert_tool_pairs_intact(out)
