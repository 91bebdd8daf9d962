"""#54 item 2: a client's own frame (its instructions and tool definitions) is never cut; when
it leaves less than a step's room in the window, the refusal says the window the client needs,
in the client's own error shape."""

from __future__ import annotations

import re

import anthropic
import openai
import orjson
import pytest

from proxy.windows.advice import STEP_ROOM
from tests.e2e.conftest import MODEL, StackFactory
from tests.e2e.test_anthropic import CLAUDE, claude_stack
from tests.strategies.invariants import CUT_MARK

INSTRUCTIONS = " ".join(f"Rule {k}: keep the build green and the tests fast." for k in range(700))
NEEDS = re.compile(r"it needs a model with a window of at least ([\d,]+) tokens")


def needed(message: str) -> int:
    found = NEEDS.search(message)
    assert found is not None, message
    return int(found.group(1).replace(",", ""))


def test_chat_names_the_window_the_frame_needs(make_stack: StackFactory) -> None:
    stack = make_stack(window=8_192)
    with pytest.raises(openai.BadRequestError) as refused:
        stack.client.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": "Fix the failing build."},
            ],
            max_tokens=256,
        )
    body = refused.value.body
    assert isinstance(body, dict) and body["code"] == "context_length_exceeded"
    frame = stack.upstream_count({"messages": [{"role": "system", "content": INSTRUCTIONS}]})
    # The proxy's own count of the frame, within a few tokens of the upstream's.
    assert abs(needed(body["message"]) - (frame + STEP_ROOM)) <= 16
    assert not stack.received  # nothing went upstream


def test_messages_names_the_window_the_frame_needs(make_stack: StackFactory) -> None:
    stack = claude_stack(make_stack, window=8_192)
    with pytest.raises(anthropic.BadRequestError) as refused:
        stack.anthropic.messages.create(
            model=CLAUDE,
            max_tokens=256,
            system=INSTRUCTIONS,
            messages=[{"role": "user", "content": "Fix the failing build."}],
        )
    body = refused.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert needed(body["error"]["message"]) > 8_192 + STEP_ROOM // 2


def test_a_frame_that_leaves_a_step_room_is_not_told(make_stack: StackFactory) -> None:
    stack = make_stack(window=8_192)
    huge = "word " * 20_000
    with pytest.raises(openai.BadRequestError) as refused:
        stack.client.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": huge},
            ],
            max_tokens=256,
        )
    assert NEEDS.search(str(refused.value.body)) is None


def test_a_reply_limit_keeps_its_floor_while_the_step_can_be_cut(make_stack: StackFactory) -> None:
    """A large frame (a 3k-token system prompt at 8,192) and a step that fits only with the
    reply limit far under ``min_output_tokens``: the limit was lowered to what the whole step
    left (to 1 with a frame larger still: Claude Code with a 25k frame at 30.6k); now the
    step's output is cut and the reply keeps its floor."""
    stack = claude_stack(make_stack, window=8_192)
    log = "\n".join(f"{k:4d} | step {k} ok, nothing to report here" for k in range(260))
    raw = stack.anthropic.messages.with_raw_response.create(
        model=CLAUDE,
        max_tokens=8_000,
        system=INSTRUCTIONS[: len(INSTRUCTIONS) // 3],
        messages=[
            {"role": "user", "content": "Fix the failing build."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "sh", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": log}],
            },
        ],
        tools=[{"name": "sh", "input_schema": {"type": "object"}}],
    )
    sent = stack.received[-1]
    assert sent["max_tokens"] >= 4_096, raw.headers["x-contextwarden-actions"]
    assert "step-outputs-cut 1" in raw.headers["x-contextwarden-actions"]
    assert CUT_MARK in orjson.dumps(sent["messages"][-1]).decode()
