from __future__ import annotations

import re
from typing import Any

from strategies.microcompact import CLEARED, ToolResultMicrocompact
from tests.counters import FixedCounter

C = FixedCounter(10)


def loop(
    i: int, name: str = "read", args: str | None = None, result: str = "big result"
) -> list[dict[str, Any]]:
    call = {
        "id": f"c{i}",
        "type": "function",
        "function": {"name": name, "arguments": args or f'{{"n": {i}}}'},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": result, "x": i},
    ]


PLACEHOLDER = "cleared"


def contents(msgs: list[dict[str, Any]]) -> list[Any]:
    """Each result's content, a cleared one as ``PLACEHOLDER``."""
    return [
        PLACEHOLDER if str(m["content"]).startswith(CLEARED) else m["content"]
        for m in msgs
        if m["role"] == "tool"
    ]


def test_the_placeholder_says_what_was_there() -> None:
    msgs = [m for i in range(2) for m in loop(i, "bash", args='{"cmd":  "cat  src/app.py"}')]
    out = ToolResultMicrocompact(keep_recent=1).apply(msgs, C)
    assert out[1]["content"] == (
        '[Tool result cleared to save context: bash {"cmd": "cat src/app.py"}, 10 tokens.]'
    )
    again = ToolResultMicrocompact(keep_recent=1).apply(out, C)
    assert again[1] is out[1]  # cleared once, the same bytes ever after


def test_the_recall_handle_closes_the_placeholder_not_the_arguments() -> None:
    """Codex's shell calls carry an array: the handle goes before the placeholder's own "]"."""
    msgs = [m for i in range(2) for m in loop(i, "shell", args='{"cmd": ["cat", "a.txt"]}')]
    out = ToolResultMicrocompact(keep_recent=1, handles=True).apply(msgs, C)
    assert re.fullmatch(
        r'\[Tool result cleared to save context: shell \{"cmd": \["cat", "a.txt"\]\}, '
        r"10 tokens; recall: r[0-9]{15}\]",
        out[1]["content"],
    ), out[1]["content"]


def test_keeps_the_most_recent_distinct_calls() -> None:
    msgs = [m for i in range(8) for m in loop(i)]
    out = ToolResultMicrocompact(keep_recent=5).apply(msgs, C)
    assert contents(out) == [PLACEHOLDER] * 3 + ["big result"] * 5
    assert out[1]["x"] == 0  # other fields kept
    assert out[-1] is msgs[-1]


def test_older_duplicates_of_a_kept_call_are_cleared() -> None:
    msgs = [m for i in range(3) for m in loop(i, args="{}")]
    out = ToolResultMicrocompact(keep_recent=5).apply(msgs, C)
    assert contents(out) == [PLACEHOLDER, PLACEHOLDER, "big result"]


def test_include_exclude_and_min_size() -> None:
    msgs = loop(0, "read") + loop(1, "bash") + loop(2, "read", result="") + loop(3, "read")
    only_bash = ToolResultMicrocompact(keep_recent=0, include_tools=("bash",)).apply(msgs, C)
    assert contents(only_bash) == ["big result", PLACEHOLDER, "", "big result"]
    not_bash = ToolResultMicrocompact(keep_recent=0, exclude_tools=("bash",)).apply(msgs, C)
    assert contents(not_bash) == [PLACEHOLDER, "big result", PLACEHOLDER, PLACEHOLDER]


def test_is_idempotent_and_leaves_unanswered_results_alone() -> None:
    msgs = [m for i in range(7) for m in loop(i)]
    mc = ToolResultMicrocompact(keep_recent=2)
    once = mc.apply(msgs, C)
    twice = mc.apply(once, C)
    assert all(a is b for a, b in zip(once, twice, strict=True))
    orphan = [{"role": "tool", "tool_call_id": "nope", "content": "x"}]
    assert mc.apply(orphan, C)[0] is orphan[0]


def test_an_error_result_is_never_cleared() -> None:
    msgs = [m for i in range(4) for m in loop(i)]
    msgs[1] = {**msgs[1], "is_error": True, "content": "build failed: missing import"}
    out = ToolResultMicrocompact(keep_recent=0).apply(msgs, C)
    assert out[1] is msgs[1]
    assert contents(out)[1:] == [PLACEHOLDER] * 3
