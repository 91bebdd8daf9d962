"""The demo upstream's ``POST /v1/responses``: a stateless Responses server with OpenAI's checks.

It counts ``instructions``, every input item's text (message text, call arguments and inputs,
outputs, reasoning summaries and encrypted content) and the tool definitions with the model's
encoding, and answers an over-window request in OpenAI's words: a 400
``context_length_exceeded``, or, with ``app.state.responses_overflow_event`` set and a streamed
request, a 200 stream whose ``response.failed`` event carries that error. It rejects what the
API rejects: a reasoning item without the item that follows it, a call without its output, an
output without its call. It answers with a reasoning item (encrypted content included when
asked for) and, when tools are given and the newest item is the user's, a function call;
otherwise with a message. Every accepted body is recorded in ``app.state.received``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from proxy.demo import own

OVERFLOW_MESSAGE = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
TEXT_FIELDS = ("arguments", "input", "name", "encrypted_content")


class ResponsesCounter:
    """The demo's count of a Responses request, with the model's encoding."""

    def __init__(self, encoding: str) -> None:
        self._enc = own.encoding(encoding)

    def n(self, text: Any) -> int:
        return len(self._enc.encode_ordinary(text)) if isinstance(text, str) else 0

    def item(self, item: dict[str, Any]) -> int:
        n = self.n
        total = 4 + sum(n(item.get(k)) for k in TEXT_FIELDS)
        for field in ("content", "output", "summary"):
            value = item.get(field)
            if isinstance(value, str):
                total += n(value)
            elif isinstance(value, list):
                total += sum(
                    n(p.get("text") or p.get("refusal")) if p.get("type") != "input_image" else 85
                    for p in value
                    if isinstance(p, dict)
                )
        return total

    def prompt(self, payload: dict[str, Any]) -> int:
        n = self.n
        items = payload["input"]
        total = 3 + n(payload.get("instructions"))
        if isinstance(items, str):
            return total + 4 + n(items)
        total += sum(self.item(i) for i in items)
        for tool in payload.get("tools") or []:
            total += 7 + n(f"{tool.get('name', '')}:{tool.get('description', '')}")
            total += n(orjson.dumps(tool.get("parameters") or {}).decode())
        return total


def responses_endpoint(window: int, encoding: str) -> Any:
    counter = ResponsesCounter(encoding)

    async def responses(request: Request) -> Response:
        raw = await request.body()
        payload = orjson.loads(raw)
        request.app.state.received.append(payload)
        request.app.state.raw.append(raw)
        broken = invalid_items(payload["input"])
        if broken:
            return _error(400, broken, "input", None)
        tokens = counter.prompt(payload)
        if tokens + (payload.get("max_output_tokens") or 0) > window:
            if payload.get("stream") and request.app.state.responses_overflow_event:
                return StreamingResponse(_failed(payload), media_type="text/event-stream")
            return _error(400, OVERFLOW_MESSAGE, "input", "context_length_exceeded")
        response = _response(payload, tokens)
        if payload.get("stream"):
            return StreamingResponse(_events(response), media_type="text/event-stream")
        return Response(orjson.dumps(response), media_type="application/json")

    return responses


def invalid_items(items: Any) -> str | None:
    """The API's own pairing checks, in its words."""
    if isinstance(items, str):
        return None
    calls = {i.get("call_id") for i in items if i.get("type") == "function_call"}
    outputs = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
    for k, item in enumerate(items):
        kind = item.get("type")
        if kind == "reasoning":
            nxt = items[k + 1] if k + 1 < len(items) else None
            if (
                nxt is None
                or nxt.get("type") in ("reasoning", "function_call_output")
                or (nxt.get("role") == "user")
            ):
                return (
                    f"Item '{item.get('id')}' of type 'reasoning' was provided without its "
                    "required following item."
                )
        if kind == "function_call" and item.get("call_id") not in outputs:
            return f"No tool output found for function call {item.get('call_id')}."
        if kind == "function_call_output" and item.get("call_id") not in calls:
            return (
                f"No tool call found for function call output with call_id {item.get('call_id')}."
            )
    return None


def _error(status: int, message: str, param: str | None, code: str | None) -> Response:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return Response(orjson.dumps({"error": error}), status, media_type="application/json")


def _response(payload: dict[str, Any], tokens: int) -> dict[str, Any]:
    items = payload["input"]
    last = items if isinstance(items, str) else items[-1]
    user_last = isinstance(last, str) or last.get("role") == "user"
    tools = [t for t in payload.get("tools") or [] if t.get("type") == "function"]
    reasoning: dict[str, Any] = {
        "id": f"rs_{uuid.uuid4().hex}",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Thinking about the request."}],
    }
    if "reasoning.encrypted_content" in (payload.get("include") or []):
        reasoning["encrypted_content"] = "gAAAA" + uuid.uuid4().hex * 8
    if tools and user_last:
        answer: dict[str, Any] = {
            "id": f"fc_{uuid.uuid4().hex}",
            "type": "function_call",
            "call_id": f"call_{uuid.uuid4().hex[:16]}",
            "name": tools[0]["name"],
            "arguments": '{"path": "README.md"}',
            "status": "completed",
        }
    else:
        count = 1 if isinstance(items, str) else len(items)
        answer = text_item(f"I received {count} items ({tokens} input tokens).")
    return completed(payload, [reasoning, answer], tokens)


def text_item(text: str) -> dict[str, Any]:
    """An assistant message output item of ``text``."""
    return {
        "id": f"msg_{uuid.uuid4().hex}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def completed(payload: dict[str, Any], output: list[dict[str, Any]], tokens: int) -> dict[str, Any]:
    """A completed response object with ``output``, for a prompt of ``tokens``."""
    return {
        "id": f"resp_{uuid.uuid4().hex}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": payload["model"],
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": payload.get("tools") or [],
        "store": payload.get("store", True),
        "usage": {
            "input_tokens": tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 10},
            "total_tokens": tokens + 20,
        },
    }


def _event(kind: str, seq: int, **fields: Any) -> bytes:
    data = {"type": kind, "sequence_number": seq, **fields}
    return f"event: {kind}\n".encode() + b"data: " + orjson.dumps(data) + b"\n\n"


async def _events(response: dict[str, Any]) -> AsyncIterator[bytes]:
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    seq = 0
    yield _event("response.created", seq, response=started)
    seq += 1
    yield _event("response.in_progress", seq, response=started)
    for index, item in enumerate(response["output"]):
        seq += 1
        yield _event("response.output_item.added", seq, output_index=index, item=item)
        if item["type"] == "message":
            text = item["content"][0]["text"]
            for word in text.split(" "):
                seq += 1
                yield _event(
                    "response.output_text.delta",
                    seq,
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=word + " ",
                    logprobs=[],
                )
        seq += 1
        yield _event("response.output_item.done", seq, output_index=index, item=item)
    seq += 1
    yield _event("response.completed", seq, response=response)


async def _failed(payload: dict[str, Any]) -> AsyncIterator[bytes]:
    base = {
        "id": f"resp_{uuid.uuid4().hex}",
        "object": "response",
        "created_at": int(time.time()),
        "model": payload["model"],
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    yield _event("response.created", 0, response={**base, "status": "in_progress"})
    yield _event("response.in_progress", 1, response={**base, "status": "in_progress"})
    error = {"code": "context_length_exceeded", "message": OVERFLOW_MESSAGE}
    yield _event("response.failed", 2, response={**base, "status": "failed", "error": error})
