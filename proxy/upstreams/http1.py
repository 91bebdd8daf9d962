"""The default upstream transport: HTTP/1.1 on asyncio's own connections, answers parsed by
httptools (llhttp, the parser uvicorn serves with).

Why not aiohttp's client: an answer relayed through it cost about 75 us of CPU (request and
response objects, payload registry, timers, tracing hooks), half of the proxy's whole cost on a
small request. Here a request is one write of bytes built from the headers as they are, and the
answer is parsed as it arrives; ``python -m bench`` measures both.

What it keeps from aiohttp's behaviour:
- a pool of keep-alive connections per origin (scheme, host, port), at most ``max_connections``
  requests in flight; an idle connection the upstream closed is dropped, one idle for longer
  than ``IDLE_SECONDS`` is closed;
- TLS with the system's default context (certificates verified, SNI, ALPN ``http/1.1``);
- ``connect_timeout`` for the connection and ``timeout`` for the whole exchange, answer
  included: past it a stream breaks off (the relay ends it with an error event);
- raw bodies: nothing decompressed, header bytes sent as they came (latin-1 round-trips them);
- a request whose reused connection turns out closed before any answer byte is sent again once,
  on a new connection (the upstream never saw it);
- back-pressure: reading from the upstream pauses while ``HIGH_WATER`` bytes wait for the
  client.

Bodies streamed from the client (uploads) and ``HEAD`` go through aiohttp (``fallback``): rare,
and their semantics (chunked uploads, bodiless answers) are aiohttp's to get right.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import cast

import httptools

from proxy.config.catalog import Upstream
from proxy.errors import BadRequest
from proxy.headers import response_headers
from proxy.upstreams.forwarding import (
    MAX_ERROR_BODY,
    Reply,
    Transport,
    is_small,
    reply_of,
    timed_out,
    unreachable,
)

IDLE_SECONDS = 15.0  # aiohttp's keep-alive time-out
HIGH_WATER = 256 * 1024  # answer bytes waiting for the client before reading pauses
LOW_WATER = 64 * 1024
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
FRAMING = frozenset({"content-length", "transfer-encoding"})
ERRORS = (ConnectionError, TimeoutError)
COPY_LIMIT = 64 * 1024


class UpstreamClosed(ConnectionError):
    """The upstream closed the connection, or sent what is not HTTP/1.1, mid-answer."""


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str
    host: str  # for the socket (an IPv6 literal without brackets)
    port: int
    authority: bytes  # the Host header: as the base URL writes it

    @property
    def tls(self) -> bool:
        return self.scheme == "https"


class Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.busy = False
        self.idle_since = 0.0
        self.head: asyncio.Future[tuple[int, list[tuple[str, str]]]] | None = None
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.error: BaseException | None = None
        self.complete = False
        self.keep_alive = False
        self.received = False  # any byte of this request's answer
        self.headers: list[tuple[str, str]] = []
        self.delimited = True  # the answer has a length or chunks (else: it ends at close)
        self.timer: asyncio.TimerHandle | None = None

    # -- one exchange

    def begin(self, deadline: float) -> asyncio.Future[tuple[int, list[tuple[str, str]]]]:
        """Start an exchange; the future is the answer's status and headers."""
        self.busy = True
        self.head = head = self.loop.create_future()
        self.chunks.clear()
        self.buffered = 0
        self.error = None
        self.complete = False
        self.received = False
        self.headers = []
        self.timer = self.loop.call_at(deadline, self._time_out)
        return head

    def write(self, head: bytes, content: bytes | None) -> None:
        assert self.transport is not None
        if content and len(content) > COPY_LIMIT:
            self.transport.write(head)  # not copied into one buffer with its head
            self.transport.write(content)
        else:
            self.transport.write(head + content if content else head)

    def finish(self) -> bool:
        """End the exchange; True when the connection may serve another request."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.busy = False
        reusable = (
            self.complete
            and self.error is None
            and not self.closed
            and self.keep_alive
            and not self.chunks
        )
        if self.paused and reusable:
            self.paused = False
            assert self.transport is not None
            self.transport.resume_reading()
        if not reusable:
            self.close()
        return reusable

    async def body(self) -> AsyncIterator[bytes]:
        while True:
            if self.chunks:
                chunk = self.chunks.popleft()
                self.buffered -= len(chunk)
                if self.paused and self.buffered < LOW_WATER and not self.closed:
                    self.paused = False
                    assert self.transport is not None
                    self.transport.resume_reading()
                yield chunk
            elif self.complete:
                return
            elif self.error is not None:
                raise self.error
            else:
                self.waiter = self.loop.create_future()
                await self.waiter

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True

    def _time_out(self) -> None:
        self.timer = None
        self._fail(TimeoutError())
        if self.transport is not None:
            self.transport.abort()
        self.closed = True

    def _fail(self, exc: BaseException) -> None:
        if self.error is None and not self.complete:
            self.error = exc
        if self.head is not None and not self.head.done():
            self.head.set_exception(exc)
        self._wake()

    def _wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        if not self.busy or self.complete:  # bytes nobody asked for: not usable any more
            self.close()
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            # An upgrade (101) is no answer to relay either.
            self._fail(UpstreamClosed(f"the upstream's answer is not valid HTTP/1.1 ({exc!r})"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.busy or self.complete:
            return
        head_done = self.head is not None and self.head.done()
        if head_done and not self.delimited:
            self.complete = True  # the answer's body ends with the connection
            self._wake()
            return
        where = "mid-answer" if self.received else "before answering"
        detail = f": {exc}" if exc is not None else ""
        self._fail(UpstreamClosed(f"the upstream closed the connection {where}{detail}"))

    def pause_writing(self) -> None:  # the request is in memory already; nothing to pause
        pass

    def resume_writing(self) -> None:
        pass

    # -- httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # informational: the answer proper follows
            self.headers = []
            return
        self.delimited = any(
            k.lower() in ("content-length", "transfer-encoding") for k, _ in self.headers
        ) or status in (204, 304)
        assert self.head is not None
        if not self.head.done():
            self.head.set_result((status, self.headers))

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.head is not None and self.head.done():
            self.keep_alive = self.parser.should_keep_alive()  # llhttp forgets it after this
            self.complete = True
            self._wake()


class Http1Transport:
    def __init__(self, max_connections: int = 1024, fallback: Transport | None = None) -> None:
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: dict[Origin, list[Connection]] = {}
        self._origins: dict[str, Origin] = {}
        self._tls: ssl.SSLContext | None = None
        self._fallback = fallback
        self._max = max_connections

    async def send(
        self,
        upstream: Upstream,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        content: bytes | AsyncIterator[bytes] | None,
    ) -> Reply:
        if method == "HEAD" or not (content is None or isinstance(content, bytes)):
            return await self._other().send(upstream, method, url, headers, content)
        origin, target = self._split(url)
        head = _request_head(method, target, origin, headers, content)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + upstream.timeout
        await self._slots.acquire()
        try:
            conn, status, raw = await self._exchange(
                loop, origin, head, content, upstream.connect_timeout, deadline
            )
        except BaseException:
            self._slots.release()
            raise
        done = False

        async def close() -> None:
            nonlocal done
            if not done:
                done = True
                if conn.finish():
                    conn.idle_since = loop.time()
                    self._idle.setdefault(origin, []).append(conn)
                self._slots.release()

        kept = response_headers(raw)
        length = next((v for k, v in raw if k.lower() == "content-length"), None)
        kind = next((v for k, v in raw if k.lower() == "content-type"), None)
        small = is_small(int(length) if length and length.isdigit() else None, kind)
        if (small or status >= 400) and conn.complete and conn.buffered <= MAX_ERROR_BODY:
            # The whole answer came with its head (a short JSON answer mostly does): no
            # stream to read it from.
            body = b"".join(conn.chunks)
            conn.chunks.clear()
            conn.buffered = 0
            await close()
            return Reply(status, kept, body=body, closer=close)
        return await reply_of(status, kept, conn.body(), close, ERRORS, small)

    async def _exchange(
        self,
        loop: asyncio.AbstractEventLoop,
        origin: Origin,
        head: bytes,
        content: bytes | None,
        connect_timeout: float,
        deadline: float,
    ) -> tuple[Connection, int, list[tuple[str, str]]]:
        """Send the request; the connection it went on, once the answer's head is in."""
        conn: Connection | None = None
        retried = False
        try:
            while True:
                conn, reused = await self._connection(loop, origin, connect_timeout, deadline)
                answered = conn.begin(deadline)
                conn.write(head, content)
                try:
                    status, raw = await answered
                except UpstreamClosed:
                    conn.finish()
                    if reused and not conn.received and not retried:
                        retried = True  # a stale keep-alive connection, closed unanswered
                        continue
                    raise
                return conn, status, raw
        except BaseException as exc:
            if conn is not None:
                conn.finish()
                conn.close()
            if isinstance(exc, TimeoutError):
                raise timed_out() from exc
            if isinstance(exc, OSError):
                raise unreachable(_reason(exc, origin)) from exc
            raise

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
        if self._fallback is not None:
            await self._fallback.aclose()

    def _other(self) -> Transport:
        if self._fallback is None:
            from proxy.upstreams.aiohttp_transport import AiohttpTransport

            self._fallback = AiohttpTransport(self._max)
        return self._fallback

    def _split(self, url: str) -> tuple[Origin, str]:
        """The origin and the request target (path and query, sent as they are: the URL is
        canonical already, proxy/paths.py)."""
        start = url.find("//") + 2
        slash = url.find("/", start)
        base, target = (url, "/") if slash < 0 else (url[:slash], url[slash:])
        origin = self._origins.get(base)
        if origin is None:
            origin = self._origins[base] = _origin(base)
        return origin, target

    async def _connection(
        self,
        loop: asyncio.AbstractEventLoop,
        origin: Origin,
        connect_timeout: float,
        deadline: float,
    ) -> tuple[Connection, bool]:
        """An idle connection to ``origin`` (most recent first), or a new one. ``loop`` is
        the running one, passed down: asking asyncio for it is a system call on Python 3.11
        (its check of the process id)."""
        idle = self._idle.get(origin)
        now = loop.time()
        while idle:
            if now - idle[0].idle_since > IDLE_SECONDS:
                idle.pop(0).close()  # the oldest first: they are at the front
                continue
            conn = idle.pop()
            if not conn.closed and conn.transport is not None and not conn.transport.is_closing():
                return conn, True
            conn.close()
        timeout = min(connect_timeout, max(deadline - now, 0.0))
        tls = self._context() if origin.tls else None
        _, conn = await asyncio.wait_for(
            loop.create_connection(
                lambda: Connection(loop),
                origin.host,
                origin.port,
                ssl=tls,
                server_hostname=origin.host if tls else None,
            ),
            timeout,
        )
        return conn, False

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
            self._tls.set_alpn_protocols(["http/1.1"])
        return self._tls


def _origin(base: str) -> Origin:
    scheme, _, authority = base.partition("://")
    scheme = scheme.lower()
    if scheme not in ("http", "https") or not authority or "@" in authority:
        raise unreachable(f"cannot send to {base!r}: an http:// or https:// URL without userinfo")
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        port_text = rest.removeprefix(":")
    else:
        host, _, port_text = authority.partition(":")
    default = 443 if scheme == "https" else 80
    if port_text and not port_text.isdigit():
        raise unreachable(f"cannot send to {base!r}: the port is not a number")
    return Origin(scheme, host, int(port_text) if port_text else default, authority.encode())


def _request_head(
    method: str,
    target: str,
    origin: Origin,
    headers: list[tuple[str, str]],
    content: bytes | None,
) -> bytes:
    """The request line and headers, the headers' bytes as they came. Host and Content-Length
    are the transport's (the request path never forwards the client's)."""
    # The target is canonical (ASCII) but for its query, which keeps the client's bytes.
    lines = [f"{method} {target} HTTP/1.1".encode("utf-8", "surrogateescape")]
    has_host = False
    for name, value in headers:
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            raise BadRequest(f"the header {name!r} holds a line break or a colon in its name")
        low = name.lower()
        if low in FRAMING:
            continue  # the body's framing is the transport's alone: never two lengths
        has_host = has_host or low == "host"
        lines.append(name.encode("latin-1") + b": " + _value_bytes(value))
    if not has_host:
        lines.append(b"host: " + origin.authority)
    if content is not None:
        lines.append(b"content-length: %d" % len(content))
    elif method in BODY_METHODS:
        lines.append(b"content-length: 0")
    lines.append(b"\r\n")
    return b"\r\n".join(lines)


def _value_bytes(value: str) -> bytes:
    """A header value as bytes: latin-1 (each byte as the client sent it), or UTF-8 for a
    configured value outside latin-1."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")


def _reason(exc: OSError, origin: Origin) -> str:
    if isinstance(exc, UpstreamClosed):
        return str(exc)
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"cannot connect to {origin.host}:{origin.port} ({reason})"
