"""The demo upstream's ``POST /v1/messages``: an Anthropic Messages server with the API's checks.

It counts with a real Anthropic tokenizer (the one litellm bundles; not the proxy's cl100k
estimate), caches prompt prefixes at ``cache_control`` breakpoints as the API does (a prefix
seen before is a cache read, a new one a cache write) and reports ``usage`` with the three
input counts. It rejects what the API rejects: a ``tool_use`` without its ``tool_result`` first
in the next message, a result without its call, a thinking block whose signature does not match
its text, more than four breakpoints. Over the window it answers Anthropic's 400s ("prompt is
too long: N tokens > M maximum", or "input length and `max_tokens` exceed context limit"), or,
with ``app.state.anthropic_overflow_event`` set and a streamed request, an ``error`` event.
Every accepted body is recorded in ``app.state.received``.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import AsyncIterator
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from proxy.demo.own import anthropic_pairs

SIGNING_KEY = b"demo-thinking-signatures"
MAX_BREAKPOINTS = 4


@cache
def _tokenizer() -> Any:
    import litellm
    from tokenizers import Tokenizer

    path = Path(litellm.__file__).parent / "litellm_core_utils/tokenizers/anthropic_tokenizer.json"
    return Tokenizer.from_file(str(path))


def sign(thinking: str) -> str:
    return hmac.new(SIGNING_KEY, thinking.encode(), hashlib.sha256).hexdigest()


class AnthropicCounter:
    """The demo's count: each piece of text the model reads, with Anthropic's tokenizer."""

    def n(self, text: Any) -> int:
        return len(_tokenizer().encode(text).ids) if isinstance(text, str) and text else 0

    def pieces(self, payload: dict[str, Any]) -> list[tuple[bytes, int, bool]]:
        """The prompt in cache order (tools, system, messages): each piece's canonical bytes
        (breakpoints left out), its tokens, and whether a breakpoint ends it."""
        out: list[tuple[bytes, int, bool]] = []
        for tool in payload.get("tools") or []:
            rest = {k: v for k, v in tool.items() if k != "cache_control"}
            out.append(
                (
                    orjson.dumps(rest),
                    8 + self.n(orjson.dumps(rest).decode()),
                    "cache_control" in tool,
                )
            )
        system = payload.get("system")
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system or []
        for b in blocks:
            out.append(
                (orjson.dumps(b.get("text")), 3 + self.n(b.get("text")), "cache_control" in b)
            )
        for m in payload["messages"]:
            content = m["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            out.append((m["role"].encode(), 4, False))
            for b in blocks:
                rest = {k: v for k, v in b.items() if k != "cache_control"}
                out.append((orjson.dumps(rest), self.block(b), "cache_control" in b))
        return out

    def block(self, b: dict[str, Any]) -> int:
        kind = b.get("type")
        if kind == "text":
            return 2 + self.n(b.get("text"))
        if kind == "thinking":
            return 2 + self.n(b.get("thinking"))
        if kind == "tool_use":
            return 6 + self.n(b.get("name")) + self.n(orjson.dumps(b.get("input")).decode())
        if kind == "tool_result":
            content = b.get("content")
            if isinstance(content, list):
                return 6 + sum(self.block(c) for c in content if isinstance(c, dict))
            return 6 + self.n(content)
        if kind == "image":
            return 1600
        return 2 + self.n(orjson.dumps(b).decode())

    def prompt(self, payload: dict[str, Any]) -> int:
        return sum(tokens for _, tokens, _ in self.pieces(payload))


def messages_endpoint(window: int) -> Any:
    counter = AnthropicCounter()

    async def messages(request: Request) -> Response:
        raw = await request.body()
        payload = orjson.loads(raw)
        request.app.state.received.append(payload)
        request.app.state.raw.append(raw)
        broken = invalid_request(payload)
        if broken:
            return _error(400, "invalid_request_error", broken)
        pieces = counter.pieces(payload)
        tokens = sum(t for _, t, _ in pieces)
        if tokens + payload["max_tokens"] > window:
            if payload.get("stream") and request.app.state.anthropic_overflow_event:
                stream = _error_stream(tokens, window)
                return StreamingResponse(stream, media_type="text/event-stream")
            if tokens > window:
                return _error(400, "invalid_request_error", _too_long(tokens, window))
            return _error(
                400,
                "invalid_request_error",
                f"input length and `max_tokens` exceed context limit: {tokens} + "
                f"{payload['max_tokens']} > {window}, decrease input length or `max_tokens` "
                "and try again",
            )
        usage = _usage(pieces, request.app.state.anthropic_cache)
        message = _message(payload, usage)
        if payload.get("stream"):
            return StreamingResponse(_events(message), media_type="text/event-stream")
        return Response(orjson.dumps(message), media_type="application/json")

    return messages


def invalid_request(payload: dict[str, Any]) -> str | None:
    """The API's own checks, in its words."""
    broken = anthropic_pairs(payload.get("messages"))
    if broken:
        return broken
    marks = sum("cache_control" in b for b in _all_blocks(payload) if isinstance(b, dict))
    if marks > MAX_BREAKPOINTS:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {marks}."
    for i, m in enumerate(payload["messages"]):
        if m["role"] != "assistant" or isinstance(m["content"], str):
            continue
        for k, b in enumerate(m["content"]):
            if b.get("type") == "thinking" and b.get("signature") != sign(b.get("thinking", "")):
                return f"messages.{i}.content.{k}: Invalid `signature` in `thinking` block"
    return None


def _all_blocks(payload: dict[str, Any]) -> list[Any]:
    out: list[Any] = list(payload.get("tools") or [])
    system = payload.get("system")
    if isinstance(system, list):
        out += system
    for m in payload["messages"]:
        if isinstance(m["content"], list):
            out += m["content"]
    return out


def _usage(pieces: list[tuple[bytes, int, bool]], seen: set[str]) -> dict[str, int]:
    """Cache reads up to the longest breakpoint prefix seen before, writes up to the last."""
    h = hashlib.blake2b(digest_size=16)
    total = read = upto_last = 0
    for data, tokens, mark in pieces:
        h.update(data)
        total += tokens
        if mark:
            digest = h.copy().hexdigest()
            if digest in seen:
                read = total
            seen.add(digest)
            upto_last = total
    written = max(0, upto_last - read)
    return {
        "input_tokens": total - read - written,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
        "output_tokens": 24,
    }


def _error(status: int, kind: str, message: str) -> Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Response(orjson.dumps(body), status, media_type="application/json")


def _message(payload: dict[str, Any], usage: dict[str, int]) -> dict[str, Any]:
    messages = payload["messages"]
    last = messages[-1]
    content = last["content"]
    results = isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)
    blocks: list[dict[str, Any]] = []
    if (payload.get("thinking") or {}).get("type") == "enabled":
        text = f"Considering request {uuid.uuid4().hex[:8]}."
        blocks.append({"type": "thinking", "thinking": text, "signature": sign(text)})
    tools = payload.get("tools") or []
    if tools and last["role"] == "user" and not results:
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:20]}",
                "name": tools[0]["name"],
                "input": {"path": "README.md"},
            }
        )
        reason = "tool_use"
    else:
        total = usage["input_tokens"] + usage["cache_read_input_tokens"]
        total += usage["cache_creation_input_tokens"]
        blocks.append(
            {"type": "text", "text": f"I received {len(messages)} messages ({total} tokens)."}
        )
        reason = "end_turn"
    return assistant_message(payload, blocks, reason, usage)


def assistant_message(
    payload: dict[str, Any], blocks: list[dict[str, Any]], reason: str, usage: dict[str, int]
) -> dict[str, Any]:
    """A whole Messages answer of ``blocks``."""
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": payload["model"],
        "content": blocks,
        "stop_reason": reason,
        "stop_sequence": None,
        "usage": usage,
    }


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\n".encode() + b"data: " + orjson.dumps({"type": kind, **data}) + b"\n\n"


async def _events(message: dict[str, Any]) -> AsyncIterator[bytes]:
    start = {**message, "content": [], "stop_reason": None}
    yield _event("message_start", {"message": start})
    yield _event("ping", {})
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        empty: dict[str, Any] = {
            "text": {"type": "text", "text": ""},
            "thinking": {"type": "thinking", "thinking": "", "signature": ""},
            "tool_use": {**block, "input": {}},
        }[kind]
        yield _event("content_block_start", {"index": index, "content_block": empty})
        if kind == "text":
            delta = {"type": "text_delta", "text": block["text"]}
            yield _event("content_block_delta", {"index": index, "delta": delta})
        elif kind == "thinking":
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
            yield _event("content_block_delta", {"index": index, "delta": delta})
            delta = {"type": "signature_delta", "signature": block["signature"]}
            yield _event("content_block_delta", {"index": index, "delta": delta})
        else:
            delta = {
                "type": "input_json_delta",
                "partial_json": orjson.dumps(block["input"]).decode(),
            }
            yield _event("content_block_delta", {"index": index, "delta": delta})
        yield _event("content_block_stop", {"index": index})
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield _event("message_delta", {"delta": delta, "usage": {"output_tokens": 24}})
    yield _event("message_stop", {})


def _too_long(tokens: int, window: int) -> str:
    return f"prompt is too long: {tokens} tokens > {window} maximum"


async def _error_stream(tokens: int, window: int) -> AsyncIterator[bytes]:
    start: dict[str, Any] = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "demo",
        "stop_reason": None,
        "usage": {"input_tokens": tokens, "output_tokens": 0},
    }
    yield _event("message_start", {"message": start})
    error = {"type": "invalid_request_error", "message": _too_long(tokens, window)}
    yield _event("error", {"error": error})
