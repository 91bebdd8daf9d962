"""Checks every trimmed conversation must pass, whatever produced it."""

from __future__ import annotations

from typing import Any


def assert_tool_pairs_intact(messages: list[dict[str, Any]]) -> None:
    """Every tool result follows its call, and every call has all its results."""
    open_ids: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_ids, f"orphan tool result {m['tool_call_id']}"
            open_ids.discard(m["tool_call_id"])
            continue
        assert not open_ids, f"tool calls without results: {open_ids}"
        if m["role"] == "assistant" and m.get("tool_calls"):
            open_ids = {c["id"] for c in m["tool_calls"]}
    assert not open_ids, f"tool calls without results at the end: {open_ids}"


def assert_subsequence_of_same_objects(out: list[Any], original: list[Any]) -> None:
    """Kept messages are the original objects, in their original order."""
    positions = {id(m): i for i, m in enumerate(original)}
    indexes = [positions[id(m)] for m in out]
    assert indexes == sorted(indexes)
