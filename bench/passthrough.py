"""The floor for a Python proxy: starlette, uvicorn and one pooled ``httpx.AsyncClient``,
relaying the body as bytes without parsing it, with the caller's ``Authorization``. Measured
beside the proxy in the same run, it says how much of the proxy's added latency is its own work
and how much any Python hop costs: what a user writing the smallest proxy of their own would
get (it replaced an aiohttp floor, a little faster than what users write, so figures before
and after the change are not comparable).

``python -m bench.passthrough PORT UPSTREAM_PORT``.
"""

from __future__ import annotations

import sys

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

RELAYED = ("content-type",)
SENT = ("content-type", "authorization")


def create(upstream: str) -> Starlette:
    limits = httpx.Limits(max_connections=1024, max_keepalive_connections=1024)
    client = httpx.AsyncClient(base_url=upstream, limits=limits, timeout=None)

    async def forward(request: Request) -> Response:
        body = await request.body()
        headers = {k: v for k, v in request.headers.items() if k in SENT}
        sent = client.build_request(request.method, request.url.path, content=body, headers=headers)
        answer = await client.send(sent, stream=True)
        kept = {k: v for k, v in answer.headers.items() if k.lower() in RELAYED}
        if not answer.headers.get("content-type", "").startswith("text/event-stream"):
            data = await answer.aread()
            await answer.aclose()
            return Response(data, answer.status_code, kept)
        return StreamingResponse(
            answer.aiter_raw(), answer.status_code, kept, background=BackgroundTask(answer.aclose)
        )

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
