"""Responses end to end: the real ``openai`` SDK's ``client.responses.create`` (streaming and
not) and an openai-agents ``Agent`` drive Codex-style stateless tool loops through the proxy to
the demo upstream's ``/v1/responses``, whose window is small."""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest

from proxy.demo.responses import ResponsesCounter, invalid_items
from tests.e2e.conftest import MODEL, Stack, StackFactory

WINDOW = 2048
INSTRUCTIONS = "You are a coding agent. Read files with the read tool and answer briefly."
TOOLS = [
    {
        "type": "function",
        "name": "read",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]
FILLER = "The build log shows a warning about an unused import in module {k}. " * 3


def upstream_tokens(payload: dict[str, Any]) -> int:
    return ResponsesCounter("o200k_base").prompt(payload)


def after_last_user(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = max(i for i, item in enumerate(items) if item.get("role") == "user")
    return items[last:]


def create(client: openai.OpenAI, items: list[dict[str, Any]], stream: bool) -> Any:
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "input": items,
        "instructions": INSTRUCTIONS,
        "tools": TOOLS,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "max_output_tokens": 128,
    }
    if not stream:
        return client.responses.create(**kwargs)
    final = None
    for event in client.responses.create(stream=True, **kwargs):
        if event.type == "response.completed":
            final = event.response
    assert final is not None
    return final


def check_forwarded(stack: Stack, sent: list[dict[str, Any]], seen: int) -> None:
    """Every request the upstream got since ``seen``: within its window, pairs whole, and the
    running turn (reasoning included) byte for byte as the client sent it."""
    for payload in stack.received[seen:]:
        assert upstream_tokens(payload) + 128 <= WINDOW
        assert invalid_items(payload["input"]) is None
        assert payload["instructions"] == INSTRUCTIONS
    last = stack.received[-1]["input"]
    assert orjson.dumps(after_last_user(last)) == orjson.dumps(after_last_user(sent))


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
def test_a_codex_style_stateless_loop_runs_40_turns_in_a_small_window(
    make_stack: StackFactory, stream: bool
) -> None:
    stack = make_stack(window=WINDOW)
    items: list[dict[str, Any]] = []
    trimmed = 0
    for turn in range(40):
        items.append({"role": "user", "content": f"Turn {turn}: " + FILLER.format(k=turn)})
        seen = len(stack.received)
        first = create(stack.client, items, stream)
        items += [o.model_dump(exclude_none=True) for o in first.output]
        call = next(o for o in first.output if o.type == "function_call")
        reasoning = next(o for o in first.output if o.type == "reasoning")
        assert reasoning.encrypted_content
        items.append(
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": FILLER.format(k=-turn),
            }
        )
        second = create(stack.client, items, stream)
        assert second.output[-1].type == "message"
        items += [o.model_dump(exclude_none=True) for o in second.output]
        check_forwarded(stack, items[: -len(second.output)], seen)
        trimmed += sum(len(p["input"]) < len(items) - 2 for p in stack.received[seen:])
    assert trimmed > 40  # the window forced trimming on most requests


def history(turns: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for k in range(turns):
        items += [
            {"role": "user", "content": f"Turn {k}: " + FILLER.format(k=k)},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Done. " + FILLER.format(k=k)}],
            },
        ]
    return [*items, {"role": "user", "content": "And now?"}]


def test_a_response_failed_event_in_a_stream_is_recovered_invisibly(
    make_stack: StackFactory,
) -> None:
    """The proxy believes the window is 4096; the upstream's is 1024, and it says so only as a
    ``response.failed`` event inside a 200 stream. The proxy shrinks and retries."""
    stack = make_stack(window=1024, proxy_window=4096)
    stack.upstream_app.state.responses_overflow_event = True
    items = history(12)
    events = list(
        stack.client.responses.create(
            model=MODEL, input=items, stream=True, store=False, max_output_tokens=64
        )
    )
    assert [e.type for e in events][-1] == "response.completed"
    assert "response.failed" not in [e.type for e in events]
    assert len(stack.received) >= 2
    assert upstream_tokens(stack.received[-1]) + 64 <= 1024
    assert stack.received[-1]["input"][-1] == items[-1]


def test_what_cannot_fit_is_an_overflow_error_the_sdk_recognises(stack: Stack) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        stack.client.responses.create(model=MODEL, input="word " * 3000)
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.status_code == 400
    assert not stack.received


@pytest.mark.slow
async def test_an_openai_agents_agent_runs_a_40_turn_tool_loop(make_stack: StackFactory) -> None:
    from agents import (
        Agent,
        ModelSettings,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)
    stack = make_stack(window=WINDOW)

    @function_tool
    def read(path: str) -> str:
        """Read a file."""
        return f"Contents of {path}: " + FILLER.format(k=path)

    async with openai.AsyncOpenAI(
        base_url=f"{stack.proxy_url}/v1", api_key="sk-test", max_retries=0
    ) as client:
        agent = Agent(
            name="coder",
            instructions=INSTRUCTIONS,
            tools=[read],
            model=OpenAIResponsesModel(model=MODEL, openai_client=client),
            model_settings=ModelSettings(
                max_tokens=128, store=False, response_include=["reasoning.encrypted_content"]
            ),
        )
        items: list[Any] = []
        for turn in range(40):
            seen = len(stack.received)
            items.append({"role": "user", "content": f"Turn {turn}: " + FILLER.format(k=turn)})
            result = await Runner.run(agent, items)
            assert "input tokens" in result.final_output
            items = result.to_input_list()
            for payload in stack.received[seen:]:
                assert upstream_tokens(payload) + 128 <= WINDOW
                assert invalid_items(payload["input"]) is None
            # The running turn reached the upstream as the agent sent it, reasoning included.
            last = stack.received[-1]["input"]
            assert any(i.get("type") == "reasoning" for i in after_last_user(last))
        assert len(stack.received) == 80
        assert len(stack.received[-1]["input"]) < len(items) / 4  # the window forced trimming


@pytest.mark.parametrize("role", [None, "developer"])
def test_summary_checkpoints_for_responses_are_items_with_stable_bytes(
    make_stack: StackFactory, role: str | None
) -> None:
    """A long stateless Responses conversation gets a summary checkpoint: a message item after
    the instructions, reused (byte for byte) by the requests that follow. Its role is the
    policy's ``summary_role``: by default ``user``, so text an attacker planted in an old tool
    output and a summarizer repeated never reaches the model with developer authority."""
    policy = {"summary_role": role} if role else {}
    stack = make_stack(window=WINDOW, summarize=True, policies={"default": policy})
    items: list[dict[str, Any]] = []
    headers = []
    for turn in range(16):
        items.append({"role": "user", "content": f"Turn {turn}: " + FILLER.format(k=turn) * 2})
        raw = stack.client.responses.with_raw_response.create(
            model=MODEL, input=items, instructions=INSTRUCTIONS, store=False, max_output_tokens=128
        )
        headers.append(raw.headers.get("x-contextwarden-checkpoint"))
        items += [o.model_dump(exclude_none=True) for o in raw.parse().output]
    # Created by this request or, ready from pre-compaction, reused: timing decides which.
    assert any(h and h.split()[0] in ("created", "reused") for h in headers)
    by_checkpoint: dict[str, set[bytes]] = {}
    for header, payload in zip(headers, stack.received, strict=False):
        first = payload["input"][0]
        if header:
            assert first["role"] == (role or "user") and first["type"] == "message"
            by_checkpoint.setdefault(header.split()[1], set()).add(orjson.dumps(first))
    assert by_checkpoint and all(len(v) == 1 for v in by_checkpoint.values())
    assert any(h and h.startswith("reused") for h in headers)
