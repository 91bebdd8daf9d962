"""A small OpenAI-compatible upstream that enforces a context window the way OpenAI does.

It serves ``contextwarden demo`` and the end-to-end tests: it counts every request with its own
straightforward implementation of OpenAI's chat accounting (tiktoken), answers 400
``context_length_exceeded`` in OpenAI's words when the prompt plus ``max_tokens`` is over its
window, and otherwise answers (streaming or not) with a short reply describing what it received.
With ``count_scale`` above 1 it counts more than OpenAI would, like a provider whose tokenizer
differs from the proxy's, which is how the tests provoke overflow recovery. Every received body
is recorded in ``app.state.received`` for the tests to inspect.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from proxy.demo import own
from proxy.demo.anthropic import messages_endpoint
from proxy.demo.completions import completions_endpoint
from proxy.demo.own import SUMMARIZER_MARK
from proxy.demo.responses import responses_endpoint


class WindowCounter:
    """OpenAI's cookbook accounting: 3 a message, +1 for a name, +3 priming the reply."""

    def __init__(self, encoding: str, scale: float) -> None:
        self._enc = own.encoding(encoding)
        self._scale = scale

    def n(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def prompt(self, payload: dict[str, Any]) -> int:
        total = 3
        for m in payload["messages"]:
            total += 3 + self.n(m.get("role", ""))
            content = m.get("content")
            if isinstance(content, str):
                total += self.n(content)
            elif isinstance(content, list):
                for part in content:
                    total += self.n(part["text"]) if part.get("type") == "text" else 85
            if m.get("name"):
                total += 1 + self.n(m["name"])
            for call in m.get("tool_calls") or []:
                fn = call["function"]
                total += 5 + self.n(fn["name"]) + self.n(fn.get("arguments", ""))
            if m.get("tool_call_id"):
                total += self.n(m["tool_call_id"])
        tools = payload.get("tools") or []
        total += 12 if tools else 0
        for tool in tools:
            fn = tool.get("function", {})
            total += 7 + self.n(f"{fn.get('name', '')}:{fn.get('description', '')}")
            for key, prop in (fn.get("parameters") or {}).get("properties", {}).items():
                total += 3 + self.n(f"{key}:{prop.get('type', '')}:{prop.get('description', '')}")
        return math.ceil(total * self._scale)


def create_upstream(
    window: int = 2048,
    encoding: str = "o200k_base",
    count_scale: float = 1.0,
    summary_delay: float = 0.0,
) -> Starlette:
    counter = WindowCounter(encoding, count_scale)

    async def chat(request: Request) -> Response:
        raw = await request.body()
        payload = orjson.loads(raw)
        summarizing = _is_summary_request(payload)
        if summarizing:
            request.app.state.summaries.append(payload)
            await asyncio.sleep(summary_delay)
            if request.app.state.fail_summaries:
                error = {"message": "summarizer down", "type": "server_error", "code": None}
                return Response(orjson.dumps({"error": error}), 500, media_type="application/json")
        else:
            request.app.state.received.append(payload)
            request.app.state.raw.append(raw)
        broken = tool_sequence_error(payload["messages"])
        if broken:
            return _invalid(broken)
        prompt = counter.prompt(payload)
        completion = payload.get("max_completion_tokens") or payload.get("max_tokens")
        if prompt + (completion or 0) > window:
            return _overflow(window, prompt, completion)
        message = _summary(payload) if summarizing else _answer(payload, prompt)
        if payload.get("stream"):
            return StreamingResponse(_stream(payload, message), media_type="text/event-stream")
        return Response(
            orjson.dumps(_completion(payload, message, prompt)), media_type="application/json"
        )

    async def models(request: Request) -> Response:
        data = [{"id": "demo-model", "object": "model", "created": 0, "owned_by": "demo"}]
        return Response(
            orjson.dumps({"object": "list", "data": data}), media_type="application/json"
        )

    async def embeddings(request: Request) -> Response:
        payload = orjson.loads(await request.body())
        request.app.state.received.append(payload)
        data = [{"object": "embedding", "index": 0, "embedding": [0.0, 1.0]}]
        body = {"object": "list", "data": data, "model": payload.get("model")}
        return Response(orjson.dumps(body), media_type="application/json")

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route(
                "/v1/completions",
                completions_endpoint(window, encoding, _overflow),
                methods=["POST"],
            ),
            Route("/v1/responses", responses_endpoint(window, encoding), methods=["POST"]),
            Route("/v1/messages", messages_endpoint(window), methods=["POST"]),
        ]
    )
    app.state.received = []
    app.state.raw = []
    app.state.summaries = []
    app.state.fail_summaries = False
    app.state.responses_overflow_event = False
    app.state.anthropic_overflow_event = False
    app.state.anthropic_cache = set()
    return app


def tool_sequence_error(messages: list[dict[str, Any]]) -> str | None:
    """OpenAI's check: tool results directly follow the call they answer, and every call has one."""
    pending: list[str] = []
    for m in messages:
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in pending:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            pending.remove(m["tool_call_id"])
            continue
        if pending:
            break
        pending = [c["id"] for c in m.get("tool_calls") or []]
    if pending:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            f"to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            f"{', '.join(pending)}"
        )
    return None


def _invalid(message: str) -> Response:
    error = {"message": message, "type": "invalid_request_error", "param": "messages", "code": None}
    return Response(orjson.dumps({"error": error}), 400, media_type="application/json")


def _overflow(window: int, prompt: int, completion: int | None) -> Response:
    if completion:
        detail = (
            f"However, you requested {prompt + completion} tokens ({prompt} in the messages, "
            f"{completion} in the completion). "
            "Please reduce the length of the messages or completion."
        )
    else:
        detail = (
            f"However, your messages resulted in {prompt} tokens. "
            "Please reduce the length of the messages."
        )
    error = {
        "message": f"This model's maximum context length is {window} tokens. {detail}",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    return Response(orjson.dumps({"error": error}), 400, media_type="application/json")


def _is_summary_request(payload: dict[str, Any]) -> bool:
    first = payload["messages"][0]
    return first.get("role") == "system" and str(first.get("content", "")).startswith(
        SUMMARIZER_MARK
    )


def _summary(payload: dict[str, Any]) -> dict[str, Any]:
    """A scripted summary: which turns it covers, so tests can see what was summarized."""
    text = str(payload["messages"][-1]["content"])
    turns = text.count("[User]:")
    updating = "<previous-summary>" in text
    body = (
        f"## Goal\nDemo conversation ({turns} user turns summarized"
        f"{', updating the previous summary' if updating else ''}).\n\n## Next Steps\n1. Continue."
    )
    return {"role": "assistant", "content": body}


def _answer(payload: dict[str, Any], prompt: int) -> dict[str, Any]:
    messages = payload["messages"]
    last = messages[-1]
    tools = payload.get("tools") or []
    if tools and last.get("role") == "user":
        fn = tools[0].get("function", {})
        call = {
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": fn.get("name", "tool"), "arguments": "{}"},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    text = f"I received {len(messages)} messages ({prompt} prompt tokens)."
    return {"role": "assistant", "content": text}


def _completion(payload: dict[str, Any], message: dict[str, Any], prompt: int) -> dict[str, Any]:
    reason = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": payload["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 10, "total_tokens": prompt + 10},
    }


async def _stream(payload: dict[str, Any], message: dict[str, Any]) -> AsyncIterator[bytes]:
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": payload["model"],
    }
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("tool_calls"):
        calls = [{"index": 0, **message["tool_calls"][0]}]
        deltas.append({"tool_calls": calls})
        reason = "tool_calls"
    else:
        deltas += [{"content": word + " "} for word in message["content"].split(" ")]
        reason = "stop"
    for delta in deltas:
        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        yield b"data: " + orjson.dumps(chunk) + b"\n\n"
    final = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}
    yield b"data: " + orjson.dumps(final) + b"\n\n"
    yield b"data: [DONE]\n\n"
