"""Checks every trimmed conversation must pass, whatever produced it."""

from __future__ import annotations

from typing import Any


def assert_tool_pairs_intact(messages: list[dict[str, Any]]) -> None:
    """Every tool result follows its call, and every call has all its results; in the legacy
    format, every function result directly follows a function_call, which it answers."""
    for i, m in enumerate(messages):
        if m["role"] == "function":
            before = messages[i - 1] if i else {}
            assert before.get("function_call"), f"orphan function result at {i}"
        if m["role"] == "assistant" and m.get("function_call"):
            after = messages[i + 1] if i + 1 < len(messages) else {}
            assert after.get("role") == "function", f"unanswered function_call at {i}"
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


def assert_kept_in_order(out: list[dict[str, Any]], original: list[dict[str, Any]]) -> None:
    """Every output message is an original (the same object) or a rewrite of one that changed
    only its content; either way in the original order, with every other key kept."""
    j = 0
    for m in out:
        while j < len(original) and not _same_or_rewrite(m, original[j]):
            j += 1
        assert j < len(original), f"message not from the input, or out of order: {m!r}"
        j += 1


def _same_or_rewrite(m: dict[str, Any], o: dict[str, Any]) -> bool:
    if m is o:
        return True
    rest = {k: v for k, v in m.items() if k != "content"}
    return list(m) == list(o) and rest == {k: v for k, v in o.items() if k != "content"}
