"""``contextwarden serve`` as an operator runs it: a shutdown that lets a stream in flight
finish (within its grace period), and ``/ready`` apart from ``/health``."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis as redis_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from tests.e2e.topology import Redis, Replica, accepts, free_port, wait_for

CHUNKS = 30
EVERY = 0.1  # a 3-second stream


def slow_stream() -> Starlette:
    """An upstream whose every answer is a stream of ``CHUNKS`` chunks, ``EVERY`` apart."""

    async def chat(request: Request) -> Response:
        await request.body()

        async def events() -> AsyncIterator[bytes]:
            for i in range(CHUNKS):
                delta = {"index": 0, "delta": {"content": f"{i} "}}
                chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [delta]}
                yield b"data: " + orjson.dumps(chunk) + b"\n\n"
                await asyncio.sleep(EVERY)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def stream_through(url: str, first: threading.Event) -> bytes:
    """A streamed chat answer read whole; ``first`` is set at its first chunk."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    got = b""
    try:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=30) as r:
            for chunk in r.iter_bytes():
                got += chunk
                first.set()
    except httpx.HTTPError:  # cut off: what was read
        pass
    first.set()
    return got


@pytest.fixture
def upstream() -> Iterator[str]:
    with BackgroundServer(slow_stream()) as server:
        yield server.url


def shut_down_during_a_stream(replica: Replica) -> tuple[bytes, float, float]:
    """SIGTERM once a stream has begun: what the client read, how long until the port
    refused connections, and until the process had exited (seconds after the signal)."""
    first = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(stream_through, replica.url, first)
        assert first.wait(30)
        replica.signal(signal.SIGTERM)
        sent = time.monotonic()
        wait_for(lambda: not accepts(replica.port), "the port closed", 5)
        closed = time.monotonic() - sent
        got = reading.result(30)
    replica.popen.wait(30)
    return got, closed, time.monotonic() - sent


@pytest.mark.slow
def test_a_stream_in_flight_finishes_when_its_replica_shuts_down(
    upstream: str, tmp_path: Path
) -> None:
    config = {"upstreams": {"slow": {"base_url": f"{upstream}/v1"}}, "data_dir": str(tmp_path)}
    replica = Replica(config, tmp_path, "draining")
    with replica:
        wait_for(replica.ready, "ready", 60)
        got, closed, exited = shut_down_during_a_stream(replica)
    assert got.endswith(b"data: [DONE]\n\n")  # every chunk, to the end
    assert got.count(b"data: ") == CHUNKS + 1
    assert closed < CHUNKS * EVERY / 2  # new connections refused at once
    assert exited >= CHUNKS * EVERY / 2  # it waited for the stream
    # uvicorn ends by raising the signal it drained for again, its handler gone.
    assert replica.popen.returncode in (0, -signal.SIGTERM)


@pytest.mark.slow
def test_the_grace_period_bounds_the_drain(upstream: str, tmp_path: Path) -> None:
    config = {
        "upstreams": {"slow": {"base_url": f"{upstream}/v1"}},
        "data_dir": str(tmp_path),
        "shutdown_grace_seconds": 1,
    }
    replica = Replica(config, tmp_path, "impatient")
    with replica:
        wait_for(replica.ready, "ready", 60)
        got, _, exited = shut_down_during_a_stream(replica)
    assert not got.endswith(b"data: [DONE]\n\n")  # cut at the grace period
    assert exited < CHUNKS * EVERY  # not the stream's whole length


@pytest.mark.slow
def test_ready_waits_for_the_store_health_does_not(tmp_path: Path) -> None:
    """A replica whose Redis is not up yet lives (``/health``) and is not ready; once Redis
    answers it is, with the scope key every replica of that Redis shares."""
    port = free_port()
    config = {
        "upstreams": {"demo": {"base_url": "http://127.0.0.1:9/v1"}},
        "data_dir": str(tmp_path),
        "checkpoints": {"backend": "redis", "url": f"redis://127.0.0.1:{port}/0"},
    }
    app = create_app(load_settings(None, **config))
    with BackgroundServer(app) as proxy:
        assert httpx.get(f"{proxy.url}/health").status_code == 200
        answer = httpx.get(f"{proxy.url}/ready")
        assert answer.status_code == 503
        assert answer.json() == {"status": "starting", "waiting_for": "the checkpoint store"}
        with Redis(tmp_path, port) as redis:
            wait_for(lambda: ready(proxy.url), "ready", 60)  # litellm loads meanwhile
            shared = redis_client.Redis.from_url(redis.url).get("cw:scope-secret")
        assert app.state.runtime.auth.scope_secret == shared


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/ready", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


async def test_a_failing_shutdown_step_leaves_the_others_to_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A drain that fails at shutdown (a store gone, say) is logged, and the store and the
    upstream connections are closed all the same (they were left open: their sockets warned
    later, in whatever test ran then)."""
    from proxy.runtime import Runtime, new_transport

    rt = await Runtime.start(load_settings(None, data_dir=str(tmp_path)), new_transport())
    closed: list[str] = []

    async def broken() -> None:
        raise ConnectionError("the store went away")

    def noting(name: str, close: Any) -> Any:
        async def step() -> None:
            await close()
            closed.append(name)

        return step

    rt.compactor.drain = broken  # type: ignore[method-assign]
    rt.store.close = noting("store", rt.store.close)  # type: ignore[method-assign]
    rt.transport.aclose = noting("transport", rt.transport.aclose)  # type: ignore[method-assign]
    await rt.stop()
    assert closed == ["store", "transport"]
    assert "shutdown: test_a_failing_shutdown_step_leaves_the_others_to_run.<locals>.broken" in (
        caplog.text
    )
