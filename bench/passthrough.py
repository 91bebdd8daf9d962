"""The floor for a Python proxy: starlette, uvicorn and one pooled aiohttp client, relaying the
body as bytes without parsing it. Measured beside the proxy in the same run, it says how much
of the proxy's added latency is its own work and how much any Python hop costs.

``python -m bench.passthrough PORT UPSTREAM_PORT``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import aiohttp
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

RELAYED = ("content-type",)


def create(upstream: str) -> Starlette:
    session: aiohttp.ClientSession | None = None

    async def forward(request: Request) -> Response:
        nonlocal session
        if session is None:  # made on the server's own loop
            connector = aiohttp.TCPConnector(limit=1024)
            session = aiohttp.ClientSession(upstream, connector=connector, auto_decompress=False)
        body = await request.body()
        headers = {"content-type": request.headers.get("content-type", "application/json")}
        answer = await session.request(request.method, request.url.path, data=body, headers=headers)
        kept = {k: v for k, v in answer.headers.items() if k.lower() in RELAYED}
        if answer.content_type != "text/event-stream":
            data = await answer.read()
            answer.release()
            return Response(data, answer.status, kept)

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in answer.content.iter_any():
                    yield chunk
            finally:
                answer.release()

        return StreamingResponse(chunks(), answer.status, kept)

    return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])])


if __name__ == "__main__":
    uvicorn.run(
        create(f"http://127.0.0.1:{int(sys.argv[2])}"),
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="warning",
        access_log=False,
        server_header=False,
        date_header=False,
    )
