"""Talking to an OpenAI-compatible upstream over the pooled transport (aiohttp_transport.py).

Which request headers go upstream is decided in :mod:`proxy.headers`; the upstream's status,
headers and raw body bytes come back untouched and are relayed chunk by chunk. Bodies are only
read whole for errors, which the overflow detector must inspect.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from starlette.responses import Response, StreamingResponse

from proxy.config.catalog import Upstream
from proxy.errors import Invariant, UpstreamTimeout, UpstreamUnavailable, error_body
from proxy.paths import canonical
from proxy.upstreams.overflows import Overflow

MAX_ERROR_BODY = 1024 * 1024


def join_url(base_url: str, subpath: str, query: str = "") -> str:
    """``base_url`` and the decoded ``subpath`` in its canonical, once-encoded form (see
    proxy/paths.py); the transports send the result as it is."""
    url = base_url.rstrip("/") + "/" + canonical(subpath.lstrip("/"))
    return f"{url}?{query}" if query else url


@dataclass(kw_only=True, slots=True)
class Reply:
    """An upstream answer: either a stream to relay or a body already read whole."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes | None = None
    stream: AsyncIterator[bytes] | None = None
    overflow: Overflow | None = None
    closer: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)
    peeked: bytes = b""  # a stream's first events, read by the overflow peek (and relayed)
    peek_seconds: float = 0.0  # how long the upstream took to send them
    # How an event stream the upstream broke off ends, in the client's format (set by the
    # request path once it knows the format; chat's shape until then).
    broken: Callable[[str], bytes] = field(default=lambda m: chat_stream_error(m), repr=False)

    async def aclose(self) -> None:
        if self.closer is not None:
            await self.closer()


class Transport(Protocol):
    """Sends one request upstream. An error status comes back read whole (the overflow
    detector inspects it); anything else comes back streaming, raw bytes as the upstream sent
    them. Connection failures raise UpstreamUnavailable, time-outs UpstreamTimeout."""

    async def send(
        self,
        upstream: Upstream,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        content: bytes | AsyncIterator[bytes] | None,
    ) -> Reply: ...

    async def aclose(self) -> None: ...


def timed_out(detail: str = "") -> UpstreamTimeout:
    """An upstream that did not answer in time (504), in one wording for every transport."""
    return UpstreamTimeout(
        "the upstream did not answer in time" + (f" ({detail})" if detail else "")
    )


def unreachable(detail: str) -> UpstreamUnavailable:
    """An upstream that could not be reached (502), in one wording for every transport."""
    return UpstreamUnavailable(f"the upstream could not be reached: {detail}")


async def reply_of(
    status: int,
    headers: list[tuple[str, str]],
    chunks: AsyncIterator[bytes],
    close: Callable[[], Awaitable[None]],
    errors: type[BaseException] | tuple[type[BaseException], ...],
    small: bool,
) -> Reply:
    """An upstream's answer, whichever transport brought it: an error or a small body is read
    whole (the overflow check reads its text), anything else is relayed as it comes."""
    reply = Reply(status=status, headers=headers, closer=close)
    if status >= 400 or small:
        reply.body = await _read_whole(chunks, close, errors)
    else:
        reply.stream = relay(chunks, close, reply, errors)
    return reply


async def _read_whole(
    chunks: AsyncIterator[bytes],
    close: Callable[[], Awaitable[None]],
    errors: type[BaseException] | tuple[type[BaseException], ...],
    limit: int = MAX_ERROR_BODY,
) -> bytes:
    out: list[bytes] = []
    size = 0
    try:
        async for chunk in chunks:
            out.append(chunk)
            size += len(chunk)
            if size > limit:
                break
    except errors:
        pass  # whatever arrived is what the client gets
    finally:
        await close()
    return b"".join(out)


async def relay(
    chunks: AsyncIterator[bytes],
    close: Callable[[], Awaitable[None]],
    reply: Reply,
    errors: type[BaseException] | tuple[type[BaseException], ...],
) -> AsyncIterator[bytes]:
    """The upstream's chunks as they come. If the upstream breaks off mid-stream, an event
    stream ends with an error event in the client's format (``reply.broken``: so the client's
    SDK raises instead of returning a truncated answer as if it were whole) and any other body
    just ends; the connection to the upstream is released either way."""
    try:
        async for chunk in chunks:
            yield chunk
    except errors as exc:
        if is_event_stream(reply.headers):
            yield reply.broken(
                f"the upstream connection broke off mid-stream: {type(exc).__name__}"
            )
    finally:
        await close()


def chat_stream_error(message: str) -> bytes:
    """The end of a broken chat (or legacy completions) stream: a data line with OpenAI's error
    object, which the openai SDK raises."""
    body = error_body(message, "upstream_error", "stream_interrupted")
    return b"\n\ndata: " + body + b"\n\n"


SMALL_BODY = 256 * 1024


def is_small(length: int | None, content_type: str | None) -> bool:
    """A short, complete answer (not an event stream) is read whole and sent on whole: the same
    bytes, without the cost of a streaming response, and its usage can be read."""
    kind = content_type or ""
    return length is not None and length <= SMALL_BODY and "event-stream" not in kind


def is_event_stream(headers: list[tuple[str, str]]) -> bool:
    return any(k.lower() == "content-type" and "text/event-stream" in v.lower() for k, v in headers)


def decoded(body: bytes, headers: Mapping[str, str] | list[tuple[str, str]]) -> bytes:
    """The body with gzip/deflate undone, for inspection only (the client gets the raw bytes)."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    encoding = next((v.lower() for k, v in items if k.lower() == "content-encoding"), "")
    if encoding in ("gzip", "deflate"):
        try:
            return zlib.decompress(body, zlib.MAX_WBITS | 32)
        except zlib.error:
            return body
    return body


def respond(reply: Reply, extra: list[tuple[str, str]]) -> Response:
    headers = reply.headers + extra
    response: Response
    if reply.body is not None:
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        headers.append(("content-length", str(len(reply.body))))
        response = Response(reply.body, reply.status)
    else:
        if reply.stream is None:
            raise Invariant("a reply with neither a body nor a stream")
        response = StreamingResponse(reply.stream, reply.status)
    response.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    return response


def rewrite_answer(
    reply: Reply,
    whole: Callable[[bytes], bytes],
    events: Callable[[AsyncIterator[bytes]], AsyncIterator[bytes]],
    streamed: bool,
) -> bool:
    """A 200 answer the proxy adds to (what a served edit did, a served compaction): ``whole``
    rewrites a body, ``events`` an event stream (``streamed``); a body the upstream streamed
    unframed is read whole first. An answer the upstream encoded (gzip...) is left as it came;
    whether it was rewritten."""
    if any(k.lower() == "content-encoding" for k, _ in reply.headers):
        return False
    if reply.body is not None:
        reply.body = whole(reply.body)
        return True
    if reply.stream is None:
        return False
    reply.headers = [(k, v) for k, v in reply.headers if k.lower() != "content-length"]
    reply.stream = events(reply.stream) if streamed else _rewritten_whole(reply.stream, whole)
    return True


async def _rewritten_whole(
    chunks: AsyncIterator[bytes], whole: Callable[[bytes], bytes]
) -> AsyncIterator[bytes]:
    yield whole(b"".join([chunk async for chunk in chunks]))
