"""Streams are relayed chunk by chunk: the client sees an event before the upstream ends."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer


def held_stream_upstream(release: threading.Event) -> Starlette:
    async def chat(request: Request) -> StreamingResponse:
        await request.body()

        async def events() -> AsyncIterator[bytes]:
            yield b'data: {"n": 1}\n\n'
            deadline = time.monotonic() + 10
            while not release.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            yield b'data: {"n": 2}\n\ndata: [DONE]\n\n'

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def test_first_event_arrives_while_the_upstream_is_still_streaming(tmp_path: Path) -> None:
    release = threading.Event()
    with BackgroundServer(held_stream_upstream(release)) as upstream:
        config = {
            "upstreams": {"up": {"base_url": f"{upstream.url}/v1"}},
            "default_upstream": "up",
            "models": {"m": {"context_window": 4096}},
            "data_dir": str(tmp_path),
        }
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
            started = time.monotonic()
            with httpx.stream(
                "POST", f"{proxy.url}/v1/chat/completions", json=body, timeout=30
            ) as r:
                lines = r.iter_lines()
                first = next(line for line in lines if line)
                waited = time.monotonic() - started
                release.set()
                rest = [line for line in lines if line]
    assert first == 'data: {"n": 1}'
    assert waited < 5, "the proxy buffered the stream instead of relaying the first event"
    assert rest == ['data: {"n": 2}', "data: [DONE]"]
