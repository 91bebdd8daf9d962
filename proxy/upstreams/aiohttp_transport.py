"""The default upstream transport: aiohttp, whose connection pool stays cheap under
concurrency (httpx's spent about 3 ms of CPU a request at concurrency 16 in ``python -m bench``).

Bodies are relayed raw (``auto_decompress=False``): the client gets the upstream's bytes and its
``content-encoding``. aiohttp adds no headers of its own beyond what HTTP/1.1 needs.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator

import aiohttp
from yarl import URL

from proxy.config.catalog import Upstream
from proxy.headers import response_headers
from proxy.upstreams.forwarding import Reply, is_small, reply_of, timed_out, unreachable

LARGE = 1024 * 1024
SKIP_AUTO = frozenset({"User-Agent", "Accept", "Accept-Encoding", "Content-Type"})


class AiohttpTransport:
    def __init__(self, max_connections: int = 1024) -> None:
        self._max = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:  # created on the serving loop
            connector = aiohttp.TCPConnector(limit=self._max, limit_per_host=0, ttl_dns_cache=300)
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
                headers=[(k, _as_sent(v)) for k, v in headers],
                # aiohttp copies a large bytes body on the event loop; a stream of it is sent
                # in pieces, with its length.
                data=io.BytesIO(content)
                if isinstance(content, bytes) and len(content) > LARGE
                else content,
                timeout=timeout,
                allow_redirects=False,
            )
        except TimeoutError as exc:
            raise timed_out() from exc
        except aiohttp.ClientConnectorError as exc:
            # Its own text names the TLS context ("ssl:default") even for plain http://.
            reason = exc.os_error.strerror or type(exc.os_error).__name__
            raise unreachable(f"cannot connect to {exc.host}:{exc.port} ({reason})") from exc
        except aiohttp.ClientError as exc:
            raise unreachable(str(exc)) from exc

        async def close() -> None:
            response.release()

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


def _as_sent(value: str) -> str:
    """A header value (decoded latin-1, byte for byte) as the text whose UTF-8 encoding, which
    is what aiohttp writes, gives back the bytes the client sent."""
    if value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        return value  # not UTF-8: aiohttp cannot write these bytes as they came


def _small(response: aiohttp.ClientResponse) -> bool:
    return is_small(response.content_length, response.headers.get("content-type"))
