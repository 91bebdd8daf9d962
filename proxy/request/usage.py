"""What the upstream says it counted: the prompt usage of an answer read whole, in the request's
own format (``usage.prompt_tokens``, ``usage.input_tokens``, or Anthropic's three input counts).

Compared with the proxy's own count of what it forwarded, it shows how far the proxy's
tokenizer is from the upstream's (``contextwarden_usage_drift_ratio``): a dashboard sees a
tokenizer change, or an estimate that runs low, before requests start to overflow.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import orjson

from proxy.formats.base import WireFormat
from proxy.formats.chat import CHAT
from proxy.upstreams.forwarding import Reply, decoded

log = logging.getLogger("contextwarden")


def answer(reply: Reply) -> dict[str, Any] | None:
    """A 200 answer read whole, as JSON (None for a stream, an error or another body)."""
    if reply.body is None or reply.status != 200:
        return None
    try:
        data: Any = orjson.loads(decoded(reply.body, reply.headers))
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def prompt_tokens(body: bytes, fmt: WireFormat = CHAT) -> int | None:
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    usage = data.get("usage") if isinstance(data, dict) else None
    return fmt.prompt_usage(usage) if isinstance(usage, dict) else None


def stream_usage(peeked: bytes, fmt: WireFormat) -> int | None:
    """The prompt usage a stream states before its output: Anthropic's ``message_start``
    carries the input counts (the others state usage at the end, which is not waited for)."""
    for line in peeked.split(b"\n"):
        if not line.startswith(b"data:") or b"message_start" not in line:
            continue
        try:
            data: Any = orjson.loads(line[5:].strip())
        except orjson.JSONDecodeError:
            return None
        message = data.get("message") if isinstance(data, dict) else None
        usage = message.get("usage") if isinstance(message, dict) else None
        return fmt.prompt_usage(usage) if isinstance(usage, dict) else None
    return None


def prompt_usage(reply: Reply, fmt: WireFormat = CHAT) -> int | None:
    """The upstream's count of the prompt, when a 200 answer states it: one read whole (short
    JSON), or a stream that states it first."""
    if reply.status != 200:
        return None
    if reply.body is not None:
        theirs = prompt_tokens(decoded(reply.body, reply.headers), fmt)
    elif reply.peeked:
        theirs = stream_usage(reply.peeked, fmt)
    else:
        return None
    return theirs or None


TAIL_BYTES = 65536


async def tapped(
    stream: AsyncIterator[bytes],
    fmt: WireFormat,
    on_usage: Callable[[int | None], Awaitable[object]],
) -> AsyncIterator[bytes]:
    """``stream`` relayed chunk by chunk, unchanged; at its end, the prompt usage its last
    events state (chat's final chunk when the client asked for ``include_usage``, Responses'
    ``response.completed``) goes to ``on_usage``, or None when they state none. Only the
    stream's tail is kept.

    Agents hang up as soon as the final event arrives (Codex does), so the relay may stop
    between two chunks: the usage is reported when the relay is closed, whichever way."""
    tail: deque[bytes] = deque()
    size = 0
    try:
        async for chunk in stream:
            tail.append(chunk)
            size += len(chunk)
            while size - len(tail[0]) >= TAIL_BYTES:  # keep just enough chunks for the tail
                size -= len(tail.popleft())
            yield chunk
    finally:
        # A client that hung up cancels the relay, and every await of a cancelled relay would
        # be cancelled again: the report is shielded, so it runs to its end.
        with anyio.CancelScope(shield=True):
            try:
                await on_usage(final_usage(b"".join(tail), fmt))
            except Exception:  # what an answer teaches never fails its relay
                log.exception("could not learn from a stream's usage")


def final_usage(tail: bytes, fmt: WireFormat) -> int | None:
    """The prompt usage in the last event of a stream's tail that carries one."""
    for line in reversed(tail.split(b"\n")):
        if not line.startswith(b"data:") or b'"usage"' not in line:
            continue
        try:
            data: Any = orjson.loads(line[5:].strip())
        except orjson.JSONDecodeError:
            continue
        if not isinstance(data, dict):
            continue
        holder = data.get("response") if isinstance(data.get("response"), dict) else data
        usage = holder.get("usage") if isinstance(holder, dict) else None
        if isinstance(usage, dict):
            return fmt.prompt_usage(usage)
    return None
