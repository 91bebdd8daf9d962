"""Whether a load balancer should send this process requests (``/ready``), apart from whether
it lives (``/health``).

Not ready until the store has answered once: what every replica must share is read from it at
start (the key that scopes checkpoints to a caller, the learned windows), and a replica that
served without it would keep its conversations apart from the others'. Until then the store
is asked again every ``RETRY_SECONDS``. Nor until what else it waits for is done (``also``:
litellm's import, when a policy summarizes: a summary asked for meanwhile would wait for it,
or fall back to truncation). Not ready again from the moment a shutdown begins (SIGTERM or
SIGINT), while the requests in flight finish (``shutdown_grace_seconds``).

A store that fails *after* it first answered does not make the process unready: the proxy
serves without it (fresh cuts, no summaries, each store call bounded by its timeout), which a
load balancer whose replicas all turned unready at once could not. A store that is disabled
(an unwritable ``data_dir``) never answers: the process is ready, and says why in the body.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

log = logging.getLogger("contextwarden")
RETRY_SECONDS = 0.5
SHUTDOWN_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Connect = Callable[[], Awaitable[bool]]


class Readiness:
    def __init__(self) -> None:
        self.connected = False
        self.draining = False
        self.note = ""  # a fact the body states besides the status (a disabled store)
        self._task: asyncio.Task[None] | None = None
        self._waits: list[tuple[str, Callable[[], bool]]] = []

    def also(self, what: str, done: Callable[[], bool]) -> None:
        """Not ready until ``done()`` (``what`` is said while it is not)."""
        self._waits.append((what, done))

    def report(self) -> tuple[int, dict[str, Any]]:
        """``/ready``'s status code and body."""
        if self.draining:
            return 503, {"status": "draining"}
        if not self.connected:
            return 503, {"status": "starting", "waiting_for": "the checkpoint store"}
        waiting = next((what for what, done in self._waits if not done()), None)
        if waiting is not None:
            return 503, {"status": "starting", "waiting_for": waiting}
        return 200, {"status": "ready", **({"note": self.note} if self.note else {})}

    async def start(self, connect: Connect) -> None:
        """Ask the store once now; until it answers, again in the background."""
        self.connected = await connect()
        if not self.connected:
            log.warning("the checkpoint store does not answer: not ready until it does")
            self._task = asyncio.create_task(self._retry(connect))

    async def _retry(self, connect: Connect) -> None:
        while not self.connected:
            await asyncio.sleep(RETRY_SECONDS)
            self.connected = await connect()
        log.info("the checkpoint store answered: ready")

    async def stop(self) -> None:
        self.draining = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def on_shutdown_signal(self) -> None:
        """Turn unready the moment SIGTERM or SIGINT arrives, before the server begins its
        drain: the server's own handlers (uvicorn's) are kept and called after. Only the main
        thread may set handlers; a server run in another thread (the tests') has none to
        chain."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in SHUTDOWN_SIGNALS:
            previous = signal.getsignal(sig)
            if callable(previous):
                signal.signal(sig, self._chained(previous))

    def _chained(
        self, previous: Callable[[int, FrameType | None], Any]
    ) -> Callable[[int, FrameType | None], None]:
        def handler(sig: int, frame: FrameType | None) -> None:
            if not self.draining:
                log.info("shutting down: unready, draining the requests in flight")
            self.draining = True
            previous(sig, frame)

        return handler
