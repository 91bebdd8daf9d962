"""The recall tool's name is reserved per request (#55, F10): a client whose own tool was named
``contextwarden_recall`` had its calls answered by the proxy (with "No output is kept under the
handle ...") and never saw them. The proxy now offers its tool under a name the request does not
use (``contextwarden_recall_2``) and answers only calls of that name; the client's are the
client's."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.responses import Response

from proxy.formats.recall import RECALL
from tests.security.conftest import Capture, ProxyFactory, Seen

OWN = {"type": "object", "properties": {"handle": {"type": "string"}}}
READ = {"type": "object", "properties": {"path": {"type": "string"}}}


def chat_body() -> dict[str, Any]:
    """A long tool loop in a small window: its older outputs are cleared, so the proxy offers
    recall; the client declares a tool of its own named as the proxy's."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the files."}]
    for k in range(8):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "read_file", "arguments": orjson.dumps({"path": f"f{k}.py"}).decode()}}  # fmt: skip
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        lines = "".join(f"file {k} line {i}: value {i * k}\n" for i in range(60))
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": lines})
    tools = [
        {"type": "function", "function": {"name": "read_file", "parameters": READ}},
        {"type": "function", "function": {"name": RECALL, "parameters": OWN}},
    ]
    return {"model": "gpt-4o", "messages": messages, "tools": tools}


def calling(name: str) -> Response:
    call = {"id": "k1", "type": "function", "function": {"name": name, "arguments": '{"handle": "notes.md"}'}}  # fmt: skip
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    answer = {"id": "a", "object": "chat.completion", "created": 0, "model": "gpt-4o", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}  # fmt: skip
    return Response(orjson.dumps(answer), media_type="application/json")


def tool_names(seen: Seen) -> list[str]:
    return [t["function"]["name"] for t in orjson.loads(seen.body)["tools"]]


@pytest.fixture
def proxy(capture: Capture, make_proxy: ProxyFactory) -> Any:
    return make_proxy(
        upstreams={"main": {"base_url": f"{capture.url}/v1"}},
        models={"gpt-4o": {"context_window": 3000}},
        policies={"default": {"recall": True, "summarize": False}},
    )


def test_a_clients_own_tool_named_as_the_proxys_is_the_clients(
    proxy: Any, capture: Capture
) -> None:
    capture.answer = lambda seen: calling(RECALL)  # the model calls the client's tool
    with proxy.client("sk-own") as c:
        answer = c.post("/v1/chat/completions", json=chat_body())
    assert answer.status_code == 200, answer.text
    calls = answer.json()["choices"][0]["message"]["tool_calls"]
    assert [call["function"]["name"] for call in calls] == [RECALL]  # relayed, not answered
    assert "x-contextwarden-recalled" not in answer.headers
    assert len(capture.seen) == 1
    # The proxy's tool was offered all the same, under a name of its own.
    assert tool_names(capture.seen[0]) == ["read_file", RECALL, f"{RECALL}_2"]


def test_the_proxys_tool_under_its_reserved_name_is_answered_by_the_proxy(
    proxy: Any, capture: Capture
) -> None:
    def script(seen: Seen) -> Response:
        if len(capture.seen) == 1:
            return calling(f"{RECALL}_2")
        return Response(orjson.dumps({**orjson.loads(calling(RECALL).body), "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}]}), media_type="application/json")  # fmt: skip

    capture.answer = script
    with proxy.client("sk-own") as c:
        answer = c.post("/v1/chat/completions", json=chat_body())
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "done"
    assert answer.headers["x-contextwarden-recalled"] == "1"
    continued = orjson.loads(capture.seen[1].body)
    assert continued["messages"][-2]["tool_calls"][0]["function"]["name"] == f"{RECALL}_2"
    assert tool_names(capture.seen[1])[-1] == f"{RECALL}_2"  # the same name, continued
