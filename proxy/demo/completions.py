"""The demo upstream's ``POST /v1/completions``: the legacy endpoint, with OpenAI's window check.

The prompt (a string, strings or token ids) is counted with the model's encoding; over the
window with ``max_tokens`` (16 by default) it answers OpenAI's 400 ``context_length_exceeded``.
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


def completions_endpoint(window: int, encoding: str, overflow: Any) -> Any:
    enc = own.encoding(encoding)

    def count(prompt: Any) -> int:
        if isinstance(prompt, str):
            return len(enc.encode_ordinary(prompt))
        if prompt and isinstance(prompt[0], int):
            return len(prompt)
        return max((count(p) for p in prompt), default=0)

    async def completions(request: Request) -> Response:
        payload = orjson.loads(await request.body())
        request.app.state.received.append(payload)
        prompt_tokens = count(payload.get("prompt", ""))
        completion = payload.get("max_tokens") or 16
        if prompt_tokens + completion > window:
            return overflow(window, prompt_tokens, completion)  # type: ignore[no-any-return]
        text = f"I received {prompt_tokens} prompt tokens."
        if payload.get("stream"):
            return StreamingResponse(_stream(payload, text), media_type="text/event-stream")
        body = _completion(payload, text, prompt_tokens)
        return Response(orjson.dumps(body), media_type="application/json")

    return completions


def _completion(payload: dict[str, Any], text: str, prompt: int) -> dict[str, Any]:
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": payload["model"],
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 8, "total_tokens": prompt + 8},
    }


async def _stream(payload: dict[str, Any], text: str) -> AsyncIterator[bytes]:
    for word in text.split(" "):
        chunk = _completion(payload, word + " ", 0)
        chunk["choices"][0]["finish_reason"] = None
        chunk.pop("usage")
        yield b"data: " + orjson.dumps(chunk) + b"\n\n"
    yield b"data: [DONE]\n\n"
