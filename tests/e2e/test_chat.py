"""The openai SDK against the proxy on a real port, in front of a real window-enforcing upstream."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.e2e.conftest import MODEL, Stack, StackFactory
from tests.strategies.invariants import assert_tool_pairs_intact

SYSTEM = {"role": "system", "content": "You are the demo assistant. Keep this rule."}


def long_chat(turns: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [SYSTEM]
    for i in range(turns):
        msgs.append({"role": "user", "content": f"Question {i}: " + "tell me about tokens " * 12})
        msgs.append({"role": "assistant", "content": f"Answer {i}: " + "tokens are pieces " * 12})
    msgs.append({"role": "user", "content": "And the final question?"})
    return msgs


def test_plain_completion_passes_through(stack: Stack) -> None:
    raw = stack.client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "hello"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content.startswith("I received 1 messages")  # type: ignore[union-attr]
    assert raw.headers["x-contextwarden-actions"] == "none"
    assert raw.headers["x-contextwarden-retries"] == "0"
    assert int(raw.headers["x-contextwarden-budget"]) > 0


def test_untrimmed_body_reaches_upstream_byte_identical(stack: Stack) -> None:
    body = b'{"model":"demo-model",  "messages":[{"role":"user","content":"h\\u00e9llo"}],"x_custom":{"a":[1,2.50]}}'
    response = httpx.post(
        f"{stack.proxy_url}/v1/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 200
    assert stack.raw[-1] == body


def test_long_conversation_is_trimmed_to_the_window(stack: Stack) -> None:
    msgs = long_chat(40)
    raw = stack.client.chat.completions.with_raw_response.create(
        model=MODEL, messages=msgs, max_tokens=100
    )
    assert raw.http_response.status_code == 200
    sent = stack.received[-1]
    assert stack.upstream_count(sent) + 100 <= stack.window
    assert sent["messages"][0] == SYSTEM
    assert sent["messages"][-1] == msgs[-1]
    assert len(sent["messages"]) < len(msgs)
    assert raw.headers["x-contextwarden-actions"] == "truncate_oldest,ledger"
    assert int(raw.headers["x-contextwarden-tokens-after"]) <= int(
        raw.headers["x-contextwarden-budget"]
    )
    assert int(raw.headers["x-contextwarden-tokens-before"]) > int(
        raw.headers["x-contextwarden-tokens-after"]
    )


def test_streaming_long_conversation(stack: Stack) -> None:
    stream = stack.client.chat.completions.create(
        model=MODEL, messages=long_chat(40), stream=True, max_tokens=50
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("I received")
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert stack.upstream_count(stack.received[-1]) + 50 <= stack.window


def test_stream_is_relayed_chunk_by_chunk(stack: Stack) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with httpx.stream("POST", f"{stack.proxy_url}/v1/chat/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line for line in response.iter_lines() if line.startswith("data:")]
    assert events[-1] == "data: [DONE]"
    assert len(events) > 3


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_docs",
            "description": "Search the documentation",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
]


def test_tool_calling_conversation_never_orphans_tool_messages(stack: Stack) -> None:
    msgs: list[Any] = [SYSTEM]
    for i in range(25):
        msgs.append({"role": "user", "content": f"Look up topic {i} " + "with detail " * 10})
        first = stack.client.chat.completions.create(
            model=MODEL, messages=msgs, tools=TOOLS, max_tokens=64
        )  # type: ignore[arg-type]
        call = first.choices[0].message
        assert call.tool_calls
        msgs.append(call.model_dump(exclude_none=True))
        for tc in call.tool_calls:
            msgs.append({"role": "tool", "tool_call_id": tc.id, "content": "result " * 30})
        final = stack.client.chat.completions.create(
            model=MODEL, messages=msgs, tools=TOOLS, max_tokens=64
        )  # type: ignore[arg-type]
        msgs.append({"role": "assistant", "content": final.choices[0].message.content})
    for payload in stack.received:
        assert_tool_pairs_intact(payload["messages"])
        assert stack.upstream_count(payload) + 64 <= stack.window
        assert payload["tools"] == TOOLS


def test_unknown_fields_arrive_intact_when_trimmed(stack: Stack) -> None:
    raw = stack.client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=long_chat(40),  # type: ignore[arg-type]
        max_tokens=80,
        response_format={"type": "json_object"},
        metadata={"team": "search"},
        extra_body={"x_vendor": {"nested": [1, 2.5, None, "é"]}, "top_k": 3},
    )
    sent = stack.received[-1]
    assert sent["x_vendor"] == {"nested": [1, 2.5, None, "é"]}
    assert sent["top_k"] == 3
    assert sent["response_format"] == {"type": "json_object"}
    assert sent["metadata"] == {"team": "search"}
    client_order = list(orjson.loads(raw.http_request.content))
    assert list(sent) == [k for k in client_order if k in sent]  # the SDK's own key order


def test_overflow_from_upstream_is_recovered_invisibly(make_stack: StackFactory) -> None:
    # The upstream counts 60% more than OpenAI's tokenizer would, like a provider whose
    # tokenizer differs: the proxy's first attempt overflows and is retried smaller.
    stack = make_stack(count_scale=1.6)
    raw = stack.client.chat.completions.with_raw_response.create(
        model=MODEL, messages=long_chat(40), max_tokens=100
    )
    assert raw.http_response.status_code == 200
    assert int(raw.headers["x-contextwarden-retries"]) >= 1
    assert "overflow-retry" in raw.headers["x-contextwarden-actions"]
    assert raw.parse().choices[0].message.content
    # The learned window makes the next request fit the first time.
    again = stack.client.chat.completions.with_raw_response.create(
        model=MODEL, messages=long_chat(41), max_tokens=100
    )
    assert again.headers["x-contextwarden-retries"] == "0"


def test_system_prompt_too_big_is_a_clear_400(stack: Stack) -> None:
    msgs = [{"role": "system", "content": "rule " * 2000}, {"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError) as err:
        stack.client.chat.completions.create(model=MODEL, messages=msgs)  # type: ignore[arg-type]
    assert err.value.code == "context_length_exceeded"
    assert "system" in err.value.message
    assert stack.received == []


def test_unknown_model_is_forwarded_untouched(stack: Stack) -> None:
    raw = stack.client.chat.completions.with_raw_response.create(
        model="mystery-model-x", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.headers["x-contextwarden-actions"] == "unknown-window"
    assert stack.received[-1]["model"] == "mystery-model-x"


def test_other_v1_paths_are_forwarded(stack: Stack) -> None:
    result = stack.client.embeddings.create(model="text-embedding-3-small", input="hello")
    assert result.data[0].embedding == [0.0, 1.0]
    assert stack.received[-1]["input"] == "hello"


def test_models_lists_upstream_and_configured_models(stack: Stack) -> None:
    ids = {m.id for m in stack.client.models.list()}
    assert {"demo-model"} <= ids


def test_health(stack: Stack) -> None:
    assert httpx.get(f"{stack.proxy_url}/health").json() == {"status": "ok"}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        (b'{"model": "demo-model"}', "messages"),
        (b'{"model": "demo-model", "messages": "hi"}', "messages"),
        (b'{"messages": [{"role": "user", "content": "hi"}]}', "model"),
        (
            b'{"model": "demo-model", "messages": [{"role": "wizard", "content": "hi"}]}',
            "messages[0].role",
        ),
        (
            b'{"model": "demo-model", "messages": [{"role": "user", "content": 5}]}',
            "messages[0].content",
        ),
        (
            b'{"model": "demo-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": "lots"}',
            "max_tokens",
        ),
        (
            b'{"model": "demo-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 999999}',
            "messages",
        ),
    ],
)
def test_bad_input_gets_openai_shaped_400(stack: Stack, body: bytes, param: str | None) -> None:
    response = httpx.post(f"{stack.proxy_url}/v1/chat/completions", content=body)
    assert response.status_code == 400
    error = orjson.loads(response.content)["error"]
    assert set(error) == {"message", "type", "code", "param"}
    assert error["param"] == param
    assert stack.received == []
