"""The upstream transport: aiohttp, a keep-alive pool per origin.

Chosen by ``python -m bench.variants transports`` (BENCHMARKS.md, "One upstream transport"):
beside httpx it adds 0.4-0.9 ms less a request and keeps 2.5x the throughput at concurrency
16; a hand-written HTTP/1.1 client on httptools saved 0.2 ms more, which no user of an upstream
answering in hundreds of milliseconds notices, for 470 lines a library maintains here.

- Bodies are relayed raw (``auto_decompress=False``): the client gets the upstream's bytes and
  its ``content-encoding``; aiohttp adds no headers of its own beyond what HTTP/1.1 needs.
- ``connect_timeout`` for the connection, ``timeout`` for the whole exchange, answer included:
  past it a stream breaks off (the relay ends it with an error event).
- TLS with the system's default context, made when the pool is (``SSL_CERT_FILE`` is read then).
- A request is never sent twice: a POST whose connection the upstream closed before answering
  is a 502, as RFC 9112 (9.3.1.1) asks of a method that is not idempotent.
- The body's framing is the transport's alone: a ``content-length`` or ``transfer-encoding``
  in the headers is left out, and a header holding a line break is refused (400).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import aiohttp.payload
from yarl import URL

from proxy.config.catalog import Upstream
from proxy.errors import BadRequest
from proxy.headers import response_headers
from proxy.upstreams.forwarding import Reply, is_small, reply_of, timed_out, unreachable

LARGE = 1024 * 1024
PIECE = 256 * 1024
SKIP_AUTO = frozenset({"User-Agent", "Accept", "Accept-Encoding", "Content-Type"})
FRAMING = frozenset({"content-length", "transfer-encoding"})


class AiohttpTransport:
    def __init__(self, max_connections: int = 1024) -> None:
        self._max = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:  # created on the serving loop
            connector = aiohttp.TCPConnector(
                limit=self._max,
                limit_per_host=0,
                ttl_dns_cache=300,
                ssl=ssl.create_default_context(),
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,
                skip_auto_headers=SKIP_AUTO,
                # trust_env looks proxies and netrc up in a worker thread on every request.
                trust_env=False,
            )
        return self._session

    async def send(
        self,
        upstream: Upstream,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        content: bytes | AsyncIterator[bytes] | None,
    ) -> Reply:
        timeout = aiohttp.ClientTimeout(
            total=upstream.timeout, sock_connect=upstream.connect_timeout
        )
        try:
            # encoded=True: the URL is already canonical (proxy/paths.py); yarl must neither
            # decode its escapes nor resolve dot segments again.
            response = await self._client().request(
                method,
                URL(url, encoded=True),
                headers=_sent(headers),
                data=Pieces(content)
                if isinstance(content, bytes) and len(content) > LARGE
                else content,
                timeout=timeout,
                allow_redirects=False,
            )
        except TimeoutError as exc:
            raise timed_out() from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise unreachable("the upstream closed the connection before answering") from exc
        except aiohttp.ClientConnectorError as exc:
            # Its own text names the TLS context ("ssl:default") even for plain http://.
            reason = exc.os_error.strerror or type(exc.os_error).__name__
            raise unreachable(f"cannot connect to {exc.host}:{exc.port} ({reason})") from exc
        except aiohttp.ClientError as exc:
            raise unreachable(str(exc)) from exc

        async def close() -> None:
            response.release()

        if response.status < 200:  # 101 Switching Protocols: no answer to relay
            response.close()
            raise unreachable(f"the upstream answered {response.status}, not an HTTP answer")

        raw = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers]
        return await reply_of(
            response.status,
            response_headers(raw),
            response.content.iter_any(),
            close,
            (aiohttp.ClientError, asyncio.TimeoutError),
            _small(response),
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def _sent(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out = []
    for name, value in headers:
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            raise BadRequest(f"the header {name!r} holds a line break or a colon in its name")
        if name.lower() not in FRAMING:
            out.append((name, _as_sent(value)))
    return out


def _as_sent(value: str) -> str:
    """A header value (decoded latin-1, byte for byte) as the text whose UTF-8 encoding, which
    is what aiohttp writes, gives back the bytes the client sent."""
    if value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        return value  # not UTF-8: aiohttp cannot write these bytes as they came


class Pieces(aiohttp.payload.Payload):
    """A large body, written a ``PIECE`` at a time from a view of its bytes, with its length.
    As bytes, aiohttp hands it to the socket whole and the part the socket does not take is
    copied into the transport's buffer; as ``io.BytesIO``, aiohttp takes its buffer, which
    copies it (a 32 MiB body: 20 ms of the event loop, each time it is forwarded)."""

    _autoclose = True  # bytes in memory: nothing to close

    def __init__(self, value: bytes) -> None:
        super().__init__(value)
        self._size = len(value)

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return bytes(self._value).decode(encoding, errors)

    async def as_bytes(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return bytes(self._value)

    async def write(self, writer: Any) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        view = memoryview(self._value)[:content_length]
        for start in range(0, len(view), PIECE):
            await writer.write(view[start : start + PIECE])


def _small(response: aiohttp.ClientResponse) -> bool:
    return is_small(response.content_length, response.headers.get("content-type"))
