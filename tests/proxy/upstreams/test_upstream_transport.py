"""The upstream transport (proxy/upstreams/aiohttp_transport.py) against a scripted HTTP/1.1
server on 127.0.0.1: keep-alive reuse, stale connections, every way an answer can end,
time-outs, back-pressure, the in-flight limit and TLS."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trustme

from proxy.config.catalog import Upstream
from proxy.errors import BadRequest, UpstreamUnavailable
from proxy.upstreams.aiohttp_transport import LARGE, PIECE, AiohttpTransport
from proxy.upstreams.forwarding import Reply, is_event_stream

# One request read from the connection: (head, body); None when the client closed it.
Exchange = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[bool]]
OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


class Server:
    """Counts connections and requests; ``answer(reader, writer, n)`` answers request ``n``
    (counted over all connections) and says whether to keep the connection."""

    def __init__(self, answer: Exchange) -> None:
        self.answer = answer
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self.requests: list[bytes] = []
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                if not await self.answer(reader, writer, len(self.requests)):
                    return
        finally:
            self.open -= 1
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@asynccontextmanager
async def serving(answer: Exchange, tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    server = Server(answer)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=tls)
    server.port = listener.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listener.close()


async def always(data: bytes, writer: asyncio.StreamWriter) -> bool:
    writer.write(data)
    await writer.drain()
    return True


async def post(
    transport: AiohttpTransport, server: Server, body: bytes = b"{}", timeout: float = 30
) -> Reply:
    upstream = Upstream(base_url=server.url, timeout=timeout)
    headers = [("content-type", "application/json")]
    return await transport.send(upstream, "POST", f"{server.url}/chat/completions", headers, body)


async def read(reply: Reply) -> bytes:
    if reply.body is not None:
        return reply.body
    assert reply.stream is not None
    return b"".join([chunk async for chunk in reply.stream])


async def test_a_connection_serves_request_after_request() -> None:
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        return await always(OK, w)

    async with serving(answer) as server:
        transport = AiohttpTransport()
        for _ in range(5):
            reply = await post(transport, server)
            assert (reply.status, reply.body) == (200, b"{}")
        await transport.aclose()
    assert server.connections == 1
    head = server.requests[0].lower()  # header names' case is the client library's
    assert head.startswith(b"post /v1/chat/completions http/1.1\r\n")
    assert f"host: 127.0.0.1:{server.port}\r\n".encode() in head
    assert head.endswith(b"content-length: 2\r\n\r\n{}")


@pytest.mark.parametrize("size", [LARGE + 1, 3 * LARGE + PIECE // 2 + 7])
async def test_a_large_body_goes_whole_with_its_length(size: int) -> None:
    """Sent a piece at a time (``Pieces``), the body arrives byte for byte, with its
    ``content-length`` (not chunked), and the connection serves the next request."""
    body = bytes(i % 251 for i in range(size))

    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        return await always(OK, w)

    async with serving(answer) as server:
        transport = AiohttpTransport()
        for _ in range(2):
            assert (await post(transport, server, body)).status == 200
        await transport.aclose()
    assert server.connections == 1
    for sent in server.requests:
        head, got = sent.split(b"\r\n\r\n", 1)
        assert got == body
        assert f"content-length: {size}".encode() in head.lower()
        assert b"transfer-encoding" not in head.lower()


async def test_a_keep_alive_connection_closed_unanswered_is_a_502_never_sent_twice() -> None:
    """The upstream may have acted on a POST it did not answer: it is not sent again (RFC 9112,
    9.3.1.1), and the next request goes on a new connection."""

    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        if n == 2:  # the upstream drops its kept connection just as the request arrives
            return False
        return await always(OK, w)

    async with serving(answer) as server:
        transport = AiohttpTransport()
        assert (await post(transport, server)).status == 200
        with pytest.raises(UpstreamUnavailable, match="closed the connection before answering"):
            await post(transport, server)
        assert (await post(transport, server)).status == 200
        await transport.aclose()
    assert server.connections == 2
    assert len(server.requests) == 3


async def test_a_new_connection_closed_unanswered_is_not_retried() -> None:
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        return False

    async with serving(answer) as server:
        transport = AiohttpTransport()
        with pytest.raises(UpstreamUnavailable, match="closed the connection before answering"):
            await post(transport, server)
        await transport.aclose()
    assert len(server.requests) == 1


async def test_a_body_without_length_ends_with_the_connection() -> None:
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n")
        w.write(b"all of it, " * 1000)
        await w.drain()
        return False

    async with serving(answer) as server:
        transport = AiohttpTransport()
        reply = await post(transport, server)
        assert await read(reply) == b"all of it, " * 1000
        assert (await post(transport, server)).status == 200  # a new connection
        await transport.aclose()
    assert server.connections == 2


async def test_chunks_are_relayed_as_they_come() -> None:
    release = asyncio.Event()

    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        w.write(b"transfer-encoding: chunked\r\n\r\n")
        w.write(b"d\r\ndata: first\n\n\r\n")
        await w.drain()
        await release.wait()
        w.write(b"e\r\ndata: second\n\n\r\n0\r\n\r\n")
        await w.drain()
        return True

    async with serving(answer) as server:
        transport = AiohttpTransport()
        reply = await post(transport, server)
        assert reply.stream is not None and is_event_stream(reply.headers)
        assert await reply.stream.__anext__() == b"data: first\n\n"  # before the rest is sent
        release.set()
        assert [c async for c in reply.stream] == [b"data: second\n\n"]
        release.clear()
        again = await post(transport, server)
        assert again.status == 200  # on the connection kept
        await again.aclose()  # its stream left unread
        await transport.aclose()
    assert server.connections == 1


async def test_a_stream_broken_off_ends_with_an_error_event() -> None:
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        w.write(b"transfer-encoding: chunked\r\n\r\nd\r\ndata: first\n\n\r\n")
        await w.drain()
        return False

    async with serving(answer) as server:
        transport = AiohttpTransport()
        chunks = [c async for c in (await post(transport, server)).stream or []]
        await transport.aclose()
    assert chunks[0] == b"data: first\n\n"
    assert b"the upstream connection broke off mid-stream" in chunks[-1]


async def test_the_time_out_covers_the_whole_answer() -> None:
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
        w.write(b"transfer-encoding: chunked\r\n\r\nd\r\ndata: first\n\n\r\n")
        await w.drain()
        await asyncio.sleep(5)
        return False

    async with serving(answer) as server:
        transport = AiohttpTransport()
        reply = await post(transport, server, timeout=0.3)
        chunks = [c async for c in reply.stream or []]
        await transport.aclose()
    assert b"broke off mid-stream: TimeoutError" in chunks[-1]


async def test_informational_answers_are_skipped() -> None:
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        return await always(b"HTTP/1.1 100 Continue\r\n\r\n" + OK, w)

    async with serving(answer) as server:
        transport = AiohttpTransport()
        reply = await post(transport, server)
        assert (reply.status, reply.body) == (200, b"{}")
        assert (await post(transport, server)).status == 200
        await transport.aclose()
    assert server.connections == 1


@pytest.mark.parametrize(
    "wrong",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n",
    ],
)
async def test_an_answer_that_is_not_http_is_a_502(wrong: bytes) -> None:
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        return await always(wrong, w)

    async with serving(answer) as server:
        transport = AiohttpTransport()
        with pytest.raises(UpstreamUnavailable, match="could not be reached"):
            await post(transport, server)
        await transport.aclose()


async def test_headers_cannot_add_lines_or_frame_the_body() -> None:
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        return await always(OK, w)

    async with serving(answer) as server:
        transport = AiohttpTransport()
        upstream = Upstream(base_url=server.url)
        headers = [("x-note", "a\r\nx-api-key: stolen")]
        with pytest.raises(BadRequest, match="line break"):
            await transport.send(upstream, "POST", f"{server.url}/x", headers, b"{}")
        assert server.requests == []
        framing = [("Content-Length", "999"), ("transfer-encoding", "chunked")]
        assert (await transport.send(upstream, "POST", server.url, framing, b"{}")).status == 200
        await transport.aclose()
    head = server.requests[0].lower()
    assert head.count(b"content-length") == 1 and b"transfer-encoding" not in head
    assert head.endswith(b"content-length: 2\r\n\r\n{}")


async def test_reading_pauses_while_the_client_is_slow() -> None:
    megabytes = 48
    sent = 0

    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        nonlocal sent
        size = megabytes * 1024 * 1024
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n")
        w.write(b"content-length: %d\r\n\r\n" % size)
        for _ in range(megabytes * 16):
            w.write(b"x" * 65536)
            await w.drain()
            sent += 65536
        return True

    async with serving(answer) as server:
        transport = AiohttpTransport()
        reply = await post(transport, server)
        assert reply.stream is not None
        received = len(await reply.stream.__anext__())
        await asyncio.sleep(0.5)  # the client reads nothing for a while
        # The server is stuck: what it sent waits in the proxy (at most HIGH_WATER and one
        # read) and in the kernel's socket buffers (a few MiB), not all 48 MiB.
        assert sent < 24 * 1024 * 1024
        async for chunk in reply.stream:
            received += len(chunk)
        assert received == megabytes * 1024 * 1024
        await transport.aclose()


async def test_a_stream_left_unread_does_not_go_back_to_the_pool() -> None:
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        if n == 1:
            w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
            w.write(b"transfer-encoding: chunked\r\n\r\nd\r\ndata: first\n\n\r\n")
            await w.drain()
            await asyncio.sleep(0.2)
            return False
        return await always(OK, w)

    async with serving(answer) as server:
        transport = AiohttpTransport()
        reply = await post(transport, server)
        assert reply.stream is not None
        await reply.stream.__anext__()
        await reply.aclose()  # the client went away mid-stream
        assert (await post(transport, server)).status == 200
        await transport.aclose()
    assert server.connections == 2


async def test_requests_in_flight_stay_within_the_limit() -> None:
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        await asyncio.sleep(0.05)
        return await always(OK, w)

    async with serving(answer) as server:
        transport = AiohttpTransport(max_connections=2)
        replies = await asyncio.gather(*(post(transport, server) for _ in range(6)))
        await transport.aclose()
    assert [r.status for r in replies] == [200] * 6
    assert server.most_open == 2


async def test_https_verifies_the_upstreams_certificate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS with the default context: a certificate the system trusts (here, a CA named by
    SSL_CERT_FILE) for the name in the base URL is served over one kept connection; one it does
    not trust is a 502 that says why."""
    ca = trustme.CA()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(tls)

    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        return await always(OK, w)

    async with serving(answer, tls) as server:
        base = f"https://localhost:{server.port}/v1"
        upstream = Upstream(base_url=base)
        untrusting = AiohttpTransport()
        with pytest.raises(UpstreamUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
            await untrusting.send(upstream, "POST", f"{base}/chat/completions", [], b"{}")
        await untrusting.aclose()
        ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
        transport = AiohttpTransport()
        for _ in range(3):
            reply = await transport.send(upstream, "POST", f"{base}/chat/completions", [], b"{}")
            assert (reply.status, reply.body) == (200, b"{}")
        await transport.aclose()
    assert server.connections == 1  # one kept connection (the refused handshake never served)
    assert f"host: localhost:{server.port}".encode() in server.requests[0].lower()
