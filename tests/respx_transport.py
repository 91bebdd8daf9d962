"""An upstream transport over httpx, for tests (and ``python -m bench.request_path``) that mock
the upstream with respx: the proxy itself sends with aiohttp (proxy/upstreams/aiohttp_transport.py,
BENCHMARKS.md "One upstream transport" says why)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from proxy.config.catalog import Upstream
from proxy.headers import response_headers
from proxy.upstreams.forwarding import Reply, is_small, reply_of, timed_out, unreachable


def new_client(max_connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections
    )
    client = httpx.AsyncClient(limits=limits, timeout=None, follow_redirects=False)
    client.headers.clear()  # forward the client's own headers only, no httpx defaults
    return client


class HttpxTransport:
    """The proxy's transport contract over httpx, for the in-process tests whose upstream
    respx mocks (respx mocks httpx only); injected with ``create_app(settings, transport)``."""

    def __init__(
        self, client: httpx.AsyncClient | None = None, max_connections: int = 1024
    ) -> None:
        self.client = client or new_client(max_connections)

    async def send(
        self,
        upstream: Upstream,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        content: bytes | AsyncIterator[bytes] | None,
    ) -> Reply:
        timeout = httpx.Timeout(upstream.timeout, connect=upstream.connect_timeout)
        client = self.client
        # As bytes: each header leaves with the bytes it came with (latin-1 round-trips them).
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        request = client.build_request(method, url, headers=raw, content=content, timeout=timeout)
        try:
            response = await client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise timed_out(type(exc).__name__) from exc
        except httpx.HTTPError as exc:
            raise unreachable(str(exc)) from exc
        small = is_small(
            _length(response.headers.get("content-length")), response.headers.get("content-type")
        )
        return await reply_of(
            response.status_code,
            response_headers(response.headers.multi_items()),
            response.aiter_raw(),
            response.aclose,
            httpx.HTTPError,
            small,
        )

    async def aclose(self) -> None:
        await self.client.aclose()


def _length(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None
