"""Anthropic prompt caching when a Messages request is trimmed: the client's breakpoints.

A ``cache_control`` breakpoint marks the end of a prefix the client wants cached. When trimming
drops the block that held one, the breakpoint moves to the nearest kept block before it, so the
client's caching intent survives; and no request leaves with more than ``MAX_BREAKPOINTS``
(tools and system keep theirs; the oldest in the messages go first).
"""

from __future__ import annotations

from typing import Any

from strategies.messages import SOURCE, Message

MAX_BREAKPOINTS = 4


def marks_of(view_message: Message) -> list[Any]:
    src = view_message.get(SOURCE)
    if not isinstance(src, dict) or src["b"] is None:
        return []
    return [b["cache_control"] for b in src["b"] if isinstance(b, dict) and "cache_control" in b]


def attach(out: list[dict[str, Any]], marks: list[Any]) -> None:
    """Move the dropped blocks' breakpoint onto the last block kept before them."""
    if not marks:
        return
    if out and isinstance(out[-1]["content"][-1], dict):
        last = out[-1]["content"][-1]
        if "cache_control" not in last:
            out[-1]["content"][-1] = {**last, "cache_control": marks[-1]}
    marks.clear()


def cap_breakpoints(payload: dict[str, Any], messages: list[dict[str, Any]]) -> None:
    """At most four breakpoints in all: tools and system keep theirs; the oldest in the
    messages go first."""
    fixed = 0
    for key in ("tools", "system"):
        value = payload.get(key)
        if isinstance(value, list):
            fixed += sum(1 for b in value if isinstance(b, dict) and "cache_control" in b)
    marked = [
        (i, k)
        for i, m in enumerate(messages)
        if isinstance(m["content"], list)
        for k, b in enumerate(m["content"])
        if isinstance(b, dict) and "cache_control" in b
    ]
    for i, k in marked[: max(0, fixed + len(marked) - MAX_BREAKPOINTS)]:
        content = list(messages[i]["content"])
        content[k] = {key: v for key, v in content[k].items() if key != "cache_control"}
        messages[i] = {**messages[i], "content": content}
