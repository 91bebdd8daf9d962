"""Upstreams served through ``litellm.acompletion`` (Anthropic, Bedrock, Gemini...).

litellm is imported on first use only: importing it takes seconds, and a proxy that serves only
OpenAI-compatible upstreams never needs it. Answers come back in OpenAI's format, streams as SSE.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import orjson

from proxy.config import Upstream
from proxy.errors import UpstreamTimeout, UpstreamUnavailable, error_body
from proxy.overflow import Overflow, is_context_overflow
from proxy.upstream import Reply

JSON = [("content-type", "application/json")]
SSE = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


async def complete(
    upstream: Upstream, api_key: str | None, headers: list[tuple[str, str]], body: bytes
) -> Reply:
    litellm = _litellm()
    payload = orjson.loads(body)
    kwargs: dict[str, Any] = {k: v for k, v in payload.items() if k != "model"}
    kwargs.update(model=upstream.model, timeout=upstream.timeout)
    key = api_key or _bearer(headers)
    if key:
        kwargs["api_key"] = key
    if upstream.base_url:
        kwargs["api_base"] = upstream.base_url
    try:
        response = await litellm.acompletion(**kwargs)
    except litellm.ContextWindowExceededError as exc:
        message = str(getattr(exc, "message", exc))
        found = is_context_overflow(400, {"error": {"message": message}}) or Overflow()
        body_out = error_body(message, "invalid_request_error", "context_length_exceeded")
        return Reply(400, list(JSON), body=body_out, overflow=found)
    except litellm.Timeout as exc:
        raise UpstreamTimeout(f"the upstream did not answer in time: {exc}") from exc
    except litellm.APIConnectionError as exc:
        raise UpstreamUnavailable(f"the upstream could not be reached: {exc}") from exc
    except Exception as exc:  # litellm maps every provider error to a class with a status code
        status = getattr(exc, "status_code", None)
        if not isinstance(status, int) or status < 400:
            raise UpstreamUnavailable(f"the upstream failed: {exc}") from exc
        message = str(getattr(exc, "message", exc))
        return Reply(status, list(JSON), body=error_body(message, "upstream_error", None))
    if payload.get("stream"):
        return Reply(200, list(SSE), stream=_sse(response))
    return Reply(200, list(JSON), body=orjson.dumps(response.model_dump()))


async def _sse(chunks: Any) -> AsyncIterator[bytes]:
    try:
        async for chunk in chunks:
            yield b"data: " + orjson.dumps(chunk.model_dump(exclude_none=True)) + b"\n\n"
    except Exception as exc:  # the client's stream ends with an error event, not a hang
        yield b"data: " + error_body(str(exc), "upstream_error", "stream_interrupted") + b"\n\n"
    yield b"data: [DONE]\n\n"


def _bearer(headers: list[tuple[str, str]]) -> str | None:
    for k, v in headers:
        if k.lower() == "authorization" and v.lower().startswith("bearer "):
            return v[7:].strip() or None
    return None
