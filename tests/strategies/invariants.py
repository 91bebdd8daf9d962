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


CUT_MARK = "[Output cut to fit the context window"


def assert_newest_step_kept(
    sent: list[dict[str, Any]], kept: list[dict[str, Any]], newest: int, cut: bool
) -> None:
    """``kept`` ends with the newest step of ``sent`` (from index ``newest``): the same objects,
    or, when the fit cut the step (``cut``), an output of the same call whose text says it was
    cut; its calls and every other message always the same objects."""
    tail = len(sent) - newest
    assert len(kept) >= tail
    for mine, theirs in zip(kept[len(kept) - tail :], sent[newest:], strict=True):
        if mine is theirs:
            continue
        assert cut, "the newest step was rewritten although it fitted whole"
        assert theirs["role"] == "tool" and mine["tool_call_id"] == theirs["tool_call_id"]
        assert str(mine["content"]).startswith(CUT_MARK)


def least_floor(counter: Any, messages: list[dict[str, Any]], indices: list[int]) -> int:
    """What the protected ``indices`` take at the least, their outputs cut as far as a cut
    goes (strategies/step_cut.py: MIN_KEEP), with the reply priming."""
    from strategies.step_cut import MIN_KEEP

    total = counter.priming
    for i in indices:
        size = counter.message(messages[i])
        total += min(size, MIN_KEEP) if messages[i]["role"] == "tool" else size
    return total
