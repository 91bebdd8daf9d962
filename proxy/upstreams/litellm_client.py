"""Upstreams served through ``litellm.acompletion`` (Anthropic, Bedrock, Gemini...): the
litellm transport (``LitellmTransport``), behind the same seam as the HTTP one
(proxy/upstreams/forwarding.py: Transport).

litellm is imported on first use only: importing it takes seconds, and a proxy that serves only
OpenAI-compatible upstreams never needs it. Answers come back in OpenAI's format, streams as SSE.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import orjson

from proxy.config.catalog import Upstream
from proxy.config.environment import prepare_environment
from proxy.errors import UpstreamUnavailable, error_body
from proxy.upstreams.forwarding import Reply, timed_out, unreachable
from proxy.upstreams.overflows import Overflow, is_context_overflow

# The OpenAI chat-completion fields a client may set. litellm.acompletion also takes credentials
# and routing (api_key, api_base, base_url, extra_headers, model_list, metadata for callbacks,
# mock_response...): a body field among those would send the operator's key wherever the client
# likes, so nothing outside this list reaches litellm.
REQUEST_FIELDS = frozenset(
    {
        "messages",
        "functions",
        "function_call",
        "temperature",
        "top_p",
        "n",
        "stream",
        "stream_options",
        "stop",
        "max_tokens",
        "max_completion_tokens",
        "modalities",
        "prediction",
        "audio",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "user",
        "response_format",
        "seed",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "logprobs",
        "top_logprobs",
        "reasoning_effort",
        "verbosity",
        "safety_identifier",
        "service_tier",
        "store",
        "prompt_cache_key",
        "thinking",
        "web_search_options",
    }
)
MAX_MESSAGE_CHARS = 2000
JSON = [("content-type", "application/json")]
SSE = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]


def _litellm() -> Any:
    prepare_environment()
    import litellm

    return litellm


@dataclass(frozen=True, slots=True)
class LitellmTransport:
    """Sends a chat body through ``litellm.acompletion``: to the provider the upstream's
    ``model:`` string names (the method and URL are the HTTP transport's, and unused here), with
    the key the headers carry as a bearer token (the proxy's, or the caller's in passthrough)."""

    async def send(
        self,
        upstream: Upstream,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        content: bytes | AsyncIterator[bytes] | None,
    ) -> Reply:
        if not isinstance(content, bytes):
            raise TypeError("litellm is sent a whole JSON body")
        return await complete(upstream, headers, content)

    async def aclose(self) -> None:
        """Nothing to close: litellm's clients are its own."""


async def complete(upstream: Upstream, headers: list[tuple[str, str]], body: bytes) -> Reply:
    litellm = _litellm()
    payload = orjson.loads(body)
    kwargs = call_arguments(payload, upstream, _bearer(headers))
    try:
        response = await litellm.acompletion(**kwargs)
    except litellm.ContextWindowExceededError as exc:
        message = client_message(exc)
        found = is_context_overflow(400, {"error": {"message": message}}) or Overflow()
        body_out = error_body(message, "invalid_request_error", "context_length_exceeded")
        return Reply(status=400, headers=list(JSON), body=body_out, overflow=found)
    except litellm.Timeout as exc:
        raise timed_out(client_message(exc)) from exc
    except litellm.APIConnectionError as exc:
        message = client_message(exc)
        raise unreachable(message) from exc
    except Exception as exc:  # litellm maps every provider error to a class with a status code
        status = getattr(exc, "status_code", None)
        message = client_message(exc)
        if _timed_out(exc):
            raise timed_out(message) from exc
        # A 500 from litellm is mostly its own failure to reach or call the provider (a refused
        # connection, missing credentials): from the client's side, the gateway's upstream failed.
        if _unreachable(exc) or not isinstance(status, int) or not 400 <= status <= 599:
            raise unreachable(message) from exc
        if status == 500:
            raise UpstreamUnavailable(f"the upstream failed: {message}") from exc
        return Reply(
            status=status, headers=list(JSON), body=error_body(message, "upstream_error", None)
        )
    if payload.get("stream"):
        return Reply(status=200, headers=list(SSE), stream=_sse(response))
    return Reply(status=200, headers=list(JSON), body=orjson.dumps(response.model_dump()))


def call_arguments(payload: dict[str, Any], upstream: Upstream, key: str | None) -> dict[str, Any]:
    """``litellm.acompletion``'s arguments: the client's OpenAI fields, the rest from config."""
    kwargs: dict[str, Any] = {k: v for k, v in payload.items() if k in REQUEST_FIELDS}
    kwargs.update(model=upstream.model, timeout=upstream.timeout)
    if key:
        kwargs["api_key"] = key
    if upstream.base_url:
        kwargs["api_base"] = upstream.base_url
    if upstream.headers:
        kwargs["extra_headers"] = dict(upstream.headers)
    return kwargs


def _causes(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 16:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _unreachable(exc: BaseException) -> bool:
    """litellm reports a refused connection as a 500 "InternalServerError"; it is a 502."""
    return any(
        isinstance(e, httpx.TransportError | openai.APIConnectionError | ConnectionError)
        for e in _causes(exc)
    )


def _timed_out(exc: BaseException) -> bool:
    return any(
        isinstance(e, httpx.TimeoutException | openai.APITimeoutError | TimeoutError)
        for e in _causes(exc)
    )


def client_message(exc: BaseException) -> str:
    """An exception's message fit for a client: no traceback (litellm puts one in some
    messages), no more than a screenful."""
    text = str(getattr(exc, "message", None) or exc)
    for marker in ("Traceback (most recent call last)", '\n  File "'):
        cut = text.find(marker)
        if cut >= 0:
            text = text[:cut]
    text = text.strip() or type(exc).__name__
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + " [...]"


async def _sse(chunks: Any) -> AsyncIterator[bytes]:
    try:
        async for chunk in chunks:
            yield b"data: " + orjson.dumps(chunk.model_dump(exclude_none=True)) + b"\n\n"
    except Exception as exc:  # the client's stream ends with an error event, not a hang
        body = error_body(client_message(exc), "upstream_error", "stream_interrupted")
        yield b"data: " + body + b"\n\n"
    yield b"data: [DONE]\n\n"


def _bearer(headers: list[tuple[str, str]]) -> str | None:
    for k, v in headers:
        if k.lower() == "authorization" and v.lower().startswith("bearer "):
            return v[7:].strip() or None
    return None
