"""Anthropic's context editing served by the proxy (proxy/formats/anthropic_edits.py)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.formats.anthropic_edits import (
    PLACEHOLDER,
    reported_body,
    reported_stream,
    serve,
    strip,
)


def count(value: Any) -> int:
    """A token a word of the value's JSON."""
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return len(text.split())


def loop(rounds: int, output: str = "line " * 50) -> list[dict[str, Any]]:
    """A task, then ``rounds`` tool rounds, each with thinking."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the files."}]
    for i in range(rounds):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": f"step {i}", "signature": f"s{i}"},
                    {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"n": i}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": output}],
            }
        )
    return messages


def body(messages: list[dict[str, Any]], *edits: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 10,
        "messages": messages,
        "context_management": {"edits": list(edits)},
    }


def results(messages: list[dict[str, Any]]) -> list[Any]:
    return [
        b["content"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]


def test_clear_tool_uses_keeps_the_newest_and_reports_what_it_cleared() -> None:
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 100},
        "keep": {"type": "tool_uses", "value": 2},
    }
    original = body(loop(5), edit)
    out, applied = serve(original, count)
    assert "context_management" not in out
    assert results(out["messages"]) == [PLACEHOLDER] * 3 + ["line " * 50] * 2
    assert applied == [
        {
            "type": "clear_tool_uses_20250919",
            "cleared_tool_uses": 3,
            "cleared_input_tokens": 3 * (50 - len(PLACEHOLDER.split())),
        }
    ]
    # The client's messages are untouched (it keeps its full history), and the calls too.
    assert results(original["messages"]) == ["line " * 50] * 5
    assert [m["content"][1]["input"] for m in out["messages"][1::2]] == [{"n": i} for i in range(5)]


def test_clear_tool_uses_waits_for_its_trigger_and_spares_excluded_tools() -> None:
    quiet = {"type": "clear_tool_uses_20250919"}  # default trigger: 100,000 input tokens
    out, applied = serve(body(loop(5), quiet), count)
    assert applied == [] and results(out["messages"]) == ["line " * 50] * 5
    by_uses = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 3},
        "keep": {"type": "tool_uses", "value": 1},
        "exclude_tools": ["Read"],
        "clear_tool_inputs": True,
    }
    out, applied = serve(body(loop(5), by_uses), count)
    assert applied == [] and results(out["messages"]) == ["line " * 50] * 5


def test_clear_tool_inputs_and_clear_at_least() -> None:
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 2},
        "keep": {"type": "tool_uses", "value": 1},
        "clear_tool_inputs": ["Read"],
    }
    out, applied = serve(body(loop(3), edit), count)
    assert [m["content"][1]["input"] for m in out["messages"][1::2]] == [{}, {}, {"n": 2}]
    assert applied[0]["cleared_tool_uses"] == 2
    much = {**edit, "clear_at_least": {"type": "input_tokens", "value": 10_000}}
    out, applied = serve(body(loop(3), much), count)
    assert applied == [] and results(out["messages"]) == ["line " * 50] * 3


def test_clear_thinking_keeps_the_newest_turns() -> None:
    first = loop(2)
    second = [{"role": "user", "content": "Now the next one."}, *loop(2)[1:]]
    messages = [*first, {"role": "assistant", "content": "Done."}, *second]
    edit = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
    out, applied = serve(body(messages, edit), count)

    def thinking(ms: list[dict[str, Any]]) -> list[int]:
        return [
            i
            for i, m in enumerate(ms)
            if isinstance(m["content"], list) and any(b["type"] == "thinking" for b in m["content"])
        ]

    assert thinking(messages) == [1, 3, 7, 9]
    assert thinking(out["messages"]) == [7, 9]  # the running turn keeps its thinking
    assert applied == [
        {"type": "clear_thinking_20251015", "cleared_thinking_turns": 1, "cleared_input_tokens": 4}
    ]
    # Claude Code's own edit: keep everything.
    for every in ("all", {"type": "all"}):
        edit = {"type": "clear_thinking_20251015", "keep": every}
        out, applied = serve(body(messages, edit), count)
        assert out["messages"] == messages and applied == []


def turns(n: int) -> list[dict[str, Any]]:
    """``n`` finished turns (a prompt, a thinking answer), then the newest prompt, unanswered:
    what a client sends for the next turn."""
    messages: list[dict[str, Any]] = []
    for i in range(n):
        messages.append({"role": "user", "content": f"Question {i}."})
        thought = {"type": "thinking", "thinking": f"thought {i}", "signature": f"s{i}"}
        messages.append(
            {"role": "assistant", "content": [thought, {"type": "text", "text": f"Answer {i}."}]}
        )
    return [*messages, {"role": "user", "content": "Next question."}]


def thought(messages: list[dict[str, Any]]) -> list[int]:
    """The indexes of the messages that hold thinking."""
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m["content"], list) and any(b["type"] == "thinking" for b in m["content"])
    ]


@pytest.mark.parametrize(
    ("keep", "kept", "cleared"),
    [
        # As documented: the thinking of the most recent ``value`` assistant turns is kept;
        # the default (no keep) is ``{"type": "thinking_turns", "value": 1}``: the last
        # assistant turn's. The newest prompt, not answered yet, is no assistant turn.
        (None, [5], 2),
        ({"type": "thinking_turns", "value": 1}, [5], 2),
        ({"type": "thinking_turns", "value": 2}, [3, 5], 1),
        ({"type": "thinking_turns", "value": 3}, [1, 3, 5], 0),
        ({"type": "thinking_turns", "value": 9}, [1, 3, 5], 0),
    ],
)
def test_clear_thinking_keeps_the_last_n_assistant_turns(
    keep: Any, kept: list[int], cleared: int
) -> None:
    messages = turns(3)
    edit = {"type": "clear_thinking_20251015"} | ({} if keep is None else {"keep": keep})
    out, applied = serve(body(messages, edit), count)
    assert thought(messages) == [1, 3, 5]
    assert thought(out["messages"]) == kept
    assert [a["cleared_thinking_turns"] for a in applied] == ([cleared] if cleared else [])
    # The cleared turns keep their answers.
    assert [m["content"][-1]["text"] for m in out["messages"][1::2]] == [
        f"Answer {i}." for i in range(3)
    ]


def test_clear_thinking_counts_a_running_tool_loop_as_one_assistant_turn() -> None:
    """A turn is the assistant's messages between two prompts, tool rounds included; the
    newest prompt after them is no turn yet."""
    messages = [*loop(2), {"role": "assistant", "content": "Done."}]
    messages += [*turns(1)[:2], {"role": "user", "content": "Next question."}]
    edit = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
    out, applied = serve(body(messages, edit), count)
    assert thought(messages) == [1, 3, 7]
    assert thought(out["messages"]) == [7]
    assert applied[0]["cleared_thinking_turns"] == 1
    two = {**edit, "keep": {"type": "thinking_turns", "value": 2}}
    out, applied = serve(body(messages, two), count)
    assert out["messages"] == messages and applied == []


def test_strip_leaves_the_rest_as_it_is() -> None:
    original = body(loop(1), {"type": "clear_thinking_20251015", "keep": "all"})
    assert strip(original) == {k: v for k, v in original.items() if k != "context_management"}


@pytest.mark.parametrize(
    "value",
    [
        "all",
        {"edits": [{"type": "compact_19990101"}]},
        {"edits": [{"type": "clear_thinking_20251015", "keep": 3}]},
        {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "turns", "value": 1}}]},
        {"edits": [{"type": "clear_tool_uses_20250919", "surprise": 1}]},
        {"edits": [{"type": "clear_tool_uses_20250919", "exclude_tools": "Read"}]},
    ],
)
def test_an_edit_it_cannot_read_is_left_out_not_refused(value: Any) -> None:
    original = {"model": "m", "messages": loop(1), "context_management": value}
    out, applied = serve(original, count)
    assert out == strip(original) and applied == []


def test_the_edits_it_can_read_still_apply_beside_one_it_cannot() -> None:
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": 1},
    }
    newer = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 1}}
    out, applied = serve(body(loop(3), newer, edit), count)
    assert [a["cleared_tool_uses"] for a in applied] == [2]
    assert results(out["messages"]) == [PLACEHOLDER] * 2 + ["line " * 50]


STREAM = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"m"}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
APPLIED = [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 1, "cleared_input_tokens": 9}]


def relayed(chunks: list[bytes]) -> list[bytes]:
    async def source() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    async def collect() -> list[bytes]:
        return [c async for c in reported_stream(source(), APPLIED)]

    return asyncio.run(collect())


@given(st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), max_size=6))
def test_the_report_lands_in_message_delta_however_the_stream_is_cut(cuts: list[int]) -> None:
    points = [0, *sorted(set(cuts)), len(STREAM)]
    chunks = [STREAM[a:b] for a, b in itertools.pairwise(points)]
    out = b"".join(relayed(chunks))
    delta = b'{"type":"message_delta","delta":{"stop_reason":"end_turn"}}'
    reported = orjson.dumps(
        {**orjson.loads(delta), "context_management": {"applied_edits": APPLIED}}
    )
    assert out == STREAM.replace(delta, reported)


def test_a_stream_relays_each_event_as_it_comes_up_to_message_delta() -> None:
    events = [e + b"\n\n" for e in STREAM.split(b"\n\n") if e]
    out = relayed(events)
    assert out[:2] == events[:2]  # nothing held back before the delta
    assert b"context_management" in out[2] and out[3] == events[3]


def test_a_message_body_gets_the_report_and_anything_else_is_left() -> None:
    message = orjson.dumps({"type": "message", "content": []})
    assert orjson.loads(reported_body(message, APPLIED))["context_management"] == {
        "applied_edits": APPLIED
    }
    assert reported_body(b"not json", APPLIED) == b"not json"
    error = orjson.dumps({"type": "error", "error": {}})
    assert reported_body(error, APPLIED) == error
