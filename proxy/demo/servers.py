"""Running an ASGI app on a loopback port in a background thread (demo and tests)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import uvicorn

T = TypeVar("T")
GRACE = 10  # seconds a request in flight has to finish once the server is told to stop
STOPPED_WITHIN = 60  # seconds, on a loaded machine: the grace, then the app's own shutdown


class _Server(uvicorn.Server):
    """uvicorn's server, told to stop rather than polled: its main loop waits for the word
    instead of looking every tenth of a second (a test's servers stop in a few milliseconds)."""

    stop: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self.stop = asyncio.Event()
        if not self.should_exit:
            await self.stop.wait()


class BackgroundServer:
    """``with BackgroundServer(app) as server:`` serves ``app`` at ``server.url`` until exit."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            lifespan="on",
            server_header=False,
            date_header=False,
            timeout_graceful_shutdown=GRACE,
        )
        self._server = _Server(config)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._server.serve()

    def call(self, work: Callable[[], Awaitable[T]], timeout: float = 60) -> T:
        """Run ``work()`` on the server's own event loop and wait for its result."""
        if self._loop is None:
            raise RuntimeError("the server is not running")

        async def run() -> T:
            return await work()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        sockets = self._server.servers[0].sockets
        self.port = sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        stop, loop = self._server.stop, self._loop
        if stop is not None and loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: it is gone
                loop.call_soon_threadsafe(stop.set)
        self._thread.join(timeout=STOPPED_WITHIN)
        if self._thread.is_alive() and exc[0] is None:
            # Said here, by its owner: a server left running logs and drops its sockets later,
            # in whatever runs then.
            raise RuntimeError(f"the server at {self.url} did not stop in {STOPPED_WITHIN} s")
