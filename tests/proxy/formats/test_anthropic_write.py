"""Writing a kept Messages view back: breakpoints follow the client's intent, never more than
four, and untouched messages are the client's own objects."""

from __future__ import annotations

from typing import Any

from proxy.formats.anthropic import ANTHROPIC

CC = {"type": "ephemeral"}


def text(t: str, mark: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": t}
    if mark:
        block["cache_control"] = CC
    return block


def marks(payload: dict[str, Any]) -> list[str]:
    return [
        b["text"]
        for m in payload["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if "cache_control" in b
    ]


def test_a_dropped_blocks_breakpoint_moves_to_the_nearest_kept_block_before_it() -> None:
    messages = [
        {"role": "user", "content": [text("u1")]},
        {"role": "assistant", "content": [text("a1")]},
        {"role": "user", "content": [text("u2", mark=True)]},
        {"role": "assistant", "content": [text("a2")]},
        {"role": "user", "content": [text("u3")]},
    ]
    payload = {"model": "m", "max_tokens": 9, "system": "s", "messages": messages}
    view = ANTHROPIC.view(payload)
    kept = [view.messages[i] for i in (0, 1, 2, 5)]  # system, u1, a1, u3: u2 and a2 went
    written = ANTHROPIC.write(payload, view, kept)
    assert [m["content"][0]["text"] for m in written["messages"]] == ["u1", "a1", "u3"]
    assert marks(written) == ["a1"]
    assert written["messages"][0] is messages[0]  # untouched: the client's own object
    assert "cache_control" not in messages[1]["content"][0]  # the client's object is not edited


def test_no_request_leaves_with_more_than_four_breakpoints() -> None:
    messages = [
        {"role": "user", "content": [text(f"u{k}", mark=True)]}
        if k % 2 == 0
        else {"role": "assistant", "content": [text(f"a{k}")]}
        for k in range(7)
    ]
    payload = {
        "model": "m",
        "max_tokens": 9,
        "system": [text("s", mark=True)],
        "tools": [{"name": "t", "input_schema": {}, "cache_control": CC}],
        "messages": messages,
    }
    view = ANTHROPIC.view(payload)
    written = ANTHROPIC.write(payload, view, view.messages)
    assert marks(written) == ["u4", "u6"]  # 2 in tools and system, the two newest here
    assert written["system"] == payload["system"] and written["tools"] == payload["tools"]


def test_tool_results_stay_first_and_pairs_whole_when_a_user_message_is_split() -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}
    messages = [
        {"role": "user", "content": [text("q")]},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result, text("and also this")]},
    ]
    payload = {"model": "m", "max_tokens": 9, "messages": messages}
    view = ANTHROPIC.view(payload)
    roles = [m["role"] for m in view.messages]
    assert roles == ["user", "assistant", "tool", "user"]
    written = ANTHROPIC.write(payload, view, view.messages)
    assert written["messages"] == messages
