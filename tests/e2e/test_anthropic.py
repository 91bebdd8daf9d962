"""Anthropic Messages end to end: the real ``anthropic`` SDK drives a Claude-Code-style loop
(system blocks and tools with ``cache_control``, thinking with signatures, tool_use and
tool_result) through the proxy to the demo upstream's ``/v1/messages``, whose window is small and
whose tokenizer is a real Anthropic one (the proxy only estimates)."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import orjson
import pytest

from proxy.demo.anthropic import AnthropicCounter, invalid_request, sign
from tests.e2e.conftest import Stack, StackFactory

CLAUDE = "claude-demo"
WINDOW = 6000
MAX_TOKENS = 512
ALL_APIS = ["chat_completions", "responses", "messages"]
CACHE = {"type": "ephemeral"}
SYSTEM = [
    {"type": "text", "text": "You are Claude Code, a coding agent."},
    {
        "type": "text",
        "text": "Follow the repository's style. Read files before editing them. " * 12,
        "cache_control": CACHE,
    },
]
TOOLS = [
    {
        "name": "Read",
        "description": "Read a file from the repository",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
    {
        "name": "Bash",
        "description": "Run a shell command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
        "cache_control": CACHE,
    },
]
FILLER = "The test suite reports a failure in module {k} about a missing import. "


def claude_stack(make_stack: StackFactory, window: int = WINDOW, **settings: Any) -> Stack:
    """The default policy, as a Claude Code user gets it."""
    models = {CLAUDE: {"context_window": window, "tokenizer": "estimate"}}
    return make_stack(window=window, models=models, apis=ALL_APIS, **settings)


def sdk(stack: Stack) -> anthropic.Anthropic:
    return stack.anthropic


def ask(client: anthropic.Anthropic, messages: list[dict[str, Any]], stream: bool) -> Any:
    kwargs: dict[str, Any] = {
        "model": CLAUDE,
        "max_tokens": MAX_TOKENS,
        "system": SYSTEM,
        "tools": TOOLS,
        "messages": messages,
        "thinking": {"type": "enabled", "budget_tokens": 256},
    }
    if not stream:
        return client.messages.create(**kwargs)
    with client.messages.stream(**kwargs) as events:
        return events.get_final_message()


def with_breakpoint_on_last(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What Claude Code does each turn: the message breakpoint moves to the newest block."""
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
        out.append({**m, "content": content})
    last = out[-1]["content"]
    last[-1] = {**last[-1], "cache_control": CACHE}
    return out


def running_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest user text message and everything after it."""
    for i in range(len(messages) - 1, -1, -1):
        content = messages[i]["content"]
        if messages[i]["role"] == "user" and any(b.get("type") == "text" for b in content):
            return messages[i:]
    return messages


def strip_marks(messages: list[dict[str, Any]]) -> bytes:
    clean = [
        {
            **m,
            "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]],
        }
        if isinstance(m["content"], list)
        else m
        for m in messages
    ]
    return orjson.dumps(clean)


@pytest.mark.parametrize("stream", [False, True])
def test_a_claude_code_style_loop_runs_40_turns_in_a_small_window(
    make_stack: StackFactory, stream: bool
) -> None:
    stack = claude_stack(make_stack)
    client = sdk(stack)
    history: list[dict[str, Any]] = []
    for turn in range(40):
        history.append(
            {"role": "user", "content": [{"type": "text", "text": FILLER.format(k=turn) * 4}]}
        )
        first = ask(client, with_breakpoint_on_last(history), stream)
        history.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in first.content],
            }
        )
        use = next(b for b in first.content if b.type == "tool_use")
        result = {
            "type": "tool_result",
            "tool_use_id": use.id,
            "content": FILLER.format(k=-turn) * 4,
        }
        history.append({"role": "user", "content": [result]})
        sent = with_breakpoint_on_last(history)
        second = ask(client, sent, stream)
        assert second.content[-1].type == "text"
        # The running tool loop reached the upstream byte for byte, thinking and signature too.
        forwarded = stack.received[-1]["messages"]
        assert strip_marks(running_turn(forwarded)) == strip_marks(running_turn(sent))
        history.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in second.content],
            }
        )
    counter = AnthropicCounter()
    tools, system = orjson.dumps(TOOLS), orjson.dumps(SYSTEM)
    for payload in stack.received:
        assert counter.prompt(payload) + MAX_TOKENS <= WINDOW
        assert invalid_request(payload) is None
        assert orjson.dumps(payload["tools"]) == tools
        assert orjson.dumps(payload["system"]) == system
    trimmed = [
        k for k, p in enumerate(stack.received) if len(p["messages"]) < 4 * (k // 2) + 1 + k % 2 * 2
    ]
    assert len(trimmed) > 20  # calibrated from the first answers: the cuts start late
    after_first_cut = trimmed[1:]
    kept_prefix = 0
    for k in after_first_cut:
        before, now = stack.received[k - 1]["messages"], stack.received[k]["messages"]
        kept_prefix += strip_marks(now).startswith(strip_marks(before)[:-1])
    assert kept_prefix / len(after_first_cut) >= 0.9, (kept_prefix, len(after_first_cut))


def test_what_cannot_fit_is_a_prompt_too_long_error_in_anthropics_shape(
    make_stack: StackFactory,
) -> None:
    stack = claude_stack(make_stack)
    with pytest.raises(anthropic.BadRequestError) as caught:
        sdk(stack).messages.create(
            model=CLAUDE,
            max_tokens=MAX_TOKENS,
            messages=[{"role": "user", "content": "word " * 9000}],
        )
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("prompt is too long: ")
    assert not stack.received


def test_an_error_event_in_a_stream_is_recovered_invisibly(make_stack: StackFactory) -> None:
    """The proxy believes the window is 16000; the upstream's is 4000, and it says so as an
    ``error`` event inside a 200 stream. The proxy shrinks to the stated limit and retries."""
    models = {CLAUDE: {"context_window": 16000, "tokenizer": "estimate"}}
    stack = make_stack(window=4000, models=models, apis=ALL_APIS)
    stack.upstream_app.state.anthropic_overflow_event = True
    messages: list[dict[str, Any]] = []
    for k in range(50):
        messages += [
            {"role": "user", "content": FILLER.format(k=k) * 6},
            {"role": "assistant", "content": "Noted. " + FILLER.format(k=k)},
        ]
    messages.append({"role": "user", "content": "Summarise the failures."})
    with sdk(stack).messages.stream(model=CLAUDE, max_tokens=MAX_TOKENS, messages=messages) as s:
        final = s.get_final_message()
    assert final.content[-1].type == "text"
    assert len(stack.received) >= 2
    last = stack.received[-1]
    assert AnthropicCounter().prompt(last) + MAX_TOKENS <= 4000
    assert last["messages"][-1] == messages[-1]


def test_a_team_key_in_x_api_key_is_accepted_and_never_forwarded(
    make_stack: StackFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_KEY", "cw-team-key-0001")
    monkeypatch.setenv("DEMO_KEY", "sk-ant-operator")
    stack = claude_stack(make_stack, auth="keys", teams={"default": {"key_envs": ["TEAM_KEY"]}})
    with anthropic.Anthropic(
        base_url=stack.proxy_url, api_key="cw-team-key-0001", max_retries=0
    ) as client:
        reply = client.messages.create(
            model=CLAUDE, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.content[0].type == "text"
    with anthropic.Anthropic(base_url=stack.proxy_url, api_key="nope", max_retries=0) as wrong:
        with pytest.raises(anthropic.AuthenticationError) as caught:
            wrong.messages.create(
                model=CLAUDE, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            )
        assert caught.value.body["type"] == "error"  # type: ignore[index]


def test_an_input_length_and_max_tokens_overflow_is_recovered(make_stack: StackFactory) -> None:
    """The upstream's window is smaller than the proxy believes; it answers Anthropic's 400
    "input length and `max_tokens` exceed context limit: a + b > c". The proxy learns the limit
    from the numbers and retries once, smaller."""
    models = {CLAUDE: {"context_window": 16000, "tokenizer": "estimate"}}
    stack = make_stack(window=4000, models=models, apis=ALL_APIS)
    messages: list[dict[str, Any]] = []
    for k in range(40):
        messages += [
            {"role": "user", "content": FILLER.format(k=k) * 6},
            {"role": "assistant", "content": "Noted. " + FILLER.format(k=k)},
        ]
    messages.append({"role": "user", "content": "Summarise the failures."})
    raw = sdk(stack).messages.with_raw_response.create(
        model=CLAUDE, max_tokens=MAX_TOKENS, messages=messages
    )
    assert raw.parse().content[-1].type == "text"
    assert raw.headers["x-contextwarden-retries"] == "1"
    assert "overflow-retry" in raw.headers["x-contextwarden-actions"]
    assert AnthropicCounter().prompt(stack.received[-1]) + MAX_TOKENS <= 4000


def test_a_moved_breakpoint_keeps_the_prefix(make_stack: StackFactory) -> None:
    """Claude Code and the SDK move their message breakpoint to the newest message on every
    request; the provider caches the same bytes, so the prefix is kept, not broken (it was
    reported broken, and /admin/stats counted negative savings)."""
    stack = claude_stack(make_stack, window=200_000)
    client = sdk(stack)
    history: list[dict[str, Any]] = []
    states = []
    for turn in range(4):
        history.append({"role": "user", "content": [{"type": "text", "text": f"Turn {turn}."}]})
        raw = client.messages.with_raw_response.create(
            model=CLAUDE,
            max_tokens=MAX_TOKENS,
            system=SYSTEM,
            messages=with_breakpoint_on_last(history),  # type: ignore[arg-type]
        )
        states.append(raw.headers["x-contextwarden-prefix"])
        answer = raw.parse()
        history.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in answer.content],
            }
        )
    assert states == ["new", "kept", "kept", "kept"]


def test_context_management_is_served_for_an_upstream_without_it(make_stack: StackFactory) -> None:
    """The demo upstream is not Anthropic's API: the proxy applies the edits (the real SDK's
    ``extra_body``, as Claude Code sends the field) and forwards no ``context_management``."""
    stack = claude_stack(make_stack)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the files."}]
    for k in range(5):
        use = {"type": "tool_use", "id": f"toolu_{k}", "name": "Read", "input": {"path": f"{k}"}}
        messages += [
            {"role": "assistant", "content": [use]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": f"file {k}"}
                ],
            },
        ]
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 2},
        "keep": {"type": "tool_uses", "value": 1},
    }
    raw = sdk(stack).messages.with_raw_response.create(
        model=CLAUDE,
        max_tokens=MAX_TOKENS,
        messages=messages,  # type: ignore[arg-type]
        extra_body={"context_management": {"edits": [edit]}},
    )
    assert raw.http_response.status_code == 200
    forwarded = stack.received[-1]
    assert "context_management" not in forwarded
    outputs = [
        b["content"]
        for m in forwarded["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert outputs[:4] == ["[This tool result was cleared to save context.]"] * 4
    assert outputs[4] == "file 4"
    # Reported where Anthropic's API reports it: the Message's context_management...
    applied = raw.http_response.json()["context_management"]["applied_edits"]
    assert [(a["type"], a["cleared_tool_uses"]) for a in applied] == [
        ("clear_tool_uses_20250919", 4)
    ]
    assert raw.parse().content  # the rest of the answer as the SDK reads it
    # ... and, streamed, the message_delta event's.
    body = {
        "model": CLAUDE,
        "max_tokens": MAX_TOKENS,
        "messages": messages,
        "stream": True,
        "context_management": {"edits": [edit]},
    }
    headers = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
    streamed = httpx.post(f"{stack.proxy_url}/v1/messages", json=body, headers=headers, timeout=30)
    events = [
        orjson.loads(line[len("data: ") :])
        for line in streamed.text.splitlines()
        if line.startswith("data: ")
    ]
    deltas = [e for e in events if e["type"] == "message_delta"]
    assert [d["context_management"] for d in deltas] == [{"applied_edits": applied}]
    assert all("context_management" not in e for e in events if e["type"] != "message_delta")
    # An edit it cannot read (a newer type) is left out, never refused: the upstream, which
    # has no context editing, would have ignored it.
    newer = {"type": "compact_20260112"}
    sdk(stack).messages.create(
        model=CLAUDE,
        max_tokens=MAX_TOKENS,
        messages=messages,  # type: ignore[arg-type]
        extra_body={"context_management": {"edits": [newer]}},
    )
    assert "context_management" not in stack.received[-1]


def test_the_actions_header_names_the_context_edits_it_served(make_stack: StackFactory) -> None:
    """``x-contextwarden-actions`` names each edit the proxy applied (by its type, as the
    answer's ``applied_edits`` does), and only those: Claude Code's ``keep: "all"`` clears
    nothing and reads ``none``."""
    stack = claude_stack(make_stack)
    messages: list[dict[str, Any]] = []
    for k in range(3):
        thought = {"type": "thinking", "thinking": f"plan {k}", "signature": sign(f"plan {k}")}
        use = {"type": "tool_use", "id": f"toolu_{k}", "name": "Read", "input": {"path": f"{k}"}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": f"file {k}"}
        messages += [
            {"role": "user", "content": f"Read file {k}."},
            {"role": "assistant", "content": [thought, use]},
            {"role": "user", "content": [result]},
            {"role": "assistant", "content": [{"type": "text", "text": f"Read {k}."}]},
        ]
    messages.append({"role": "user", "content": "Now summarize them."})
    tools = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": 1},
    }
    thinking = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}

    def sent(*edits: dict[str, Any]) -> tuple[str, list[str]]:
        raw = sdk(stack).messages.with_raw_response.create(
            model=CLAUDE,
            max_tokens=MAX_TOKENS,
            messages=messages,  # type: ignore[arg-type]
            extra_body={"context_management": {"edits": list(edits)}},
        )
        assert raw.http_response.status_code == 200
        applied = raw.http_response.json().get("context_management", {}).get("applied_edits")
        return raw.headers["x-contextwarden-actions"], [a["type"] for a in applied or []]

    assert sent(tools, thinking) == (
        "clear_tool_uses_20250919,clear_thinking_20251015",
        ["clear_tool_uses_20250919", "clear_thinking_20251015"],
    )
    assert sent(thinking) == ("clear_thinking_20251015", ["clear_thinking_20251015"])
    assert sent({"type": "clear_thinking_20251015", "keep": "all"}) == ("none", [])
