"""Work a request leaves to run after its answer (a shadow plan: proxy/edge/shadow.py), run
when the proxy is quiet, which shutdown and tests wait for.

The event loop runs one thing at a time: a plan started as soon as its answer left held the
next request that arrived while it ran (in the bench's back-to-back requests, 0.1-0.2 ms of
a small request's p50). So each one waits, in the order they came (a conversation's plans
build on each other's cut and fingerprint), until no request has arrived for ``QUIET``
seconds: in an agent's traffic, the seconds its requests wait for the model. Under traffic
that never pauses that long, the oldest runs once it has waited ``MOST_SECONDS``, or once
more than ``MOST`` plans (or ``MOST_BYTES`` of their bodies) wait: one at a time, so a plan
still lands on a request then, as it did when each ran at once, and a backlog stays bounded.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Coroutine
from time import monotonic
from typing import Any

log = logging.getLogger("contextwarden")

QUIET = 0.002  # seconds without a request before waiting work runs
MOST = 64  # pieces of work waiting, at most, before the oldest runs anyway
MOST_BYTES = 16 << 20  # bytes of their requests' bodies waiting, at most, likewise
MOST_SECONDS = 1.0  # how long the oldest may wait


class Background:
    def __init__(self) -> None:
        self._waiting: deque[tuple[Coroutine[Any, Any, None], int, float]] = deque()
        self._bytes = 0
        self._last = 0.0  # when the last request arrived (monotonic)
        self._worker: asyncio.Task[None] | None = None
        self._now = False  # draining: no waiting for quiet

    def arrived(self) -> None:
        """A request arrived: waiting work waits for the next quiet."""
        self._last = monotonic()

    def start(self, work: Coroutine[Any, Any, None], size: int = 0) -> None:
        """``work`` (of a request whose body is ``size`` bytes) run after the work before it,
        when the proxy is quiet."""
        self._waiting.append((work, size, monotonic()))
        self._bytes += size
        if self._worker is None:  # the loop keeps only a weak reference: held here
            self._worker = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            while self._waiting:
                work, size, queued = self._waiting[0]
                now = monotonic()
                quiet = self._last + QUIET - now
                due = (
                    self._now
                    or quiet <= 0
                    or len(self._waiting) > MOST
                    or self._bytes > MOST_BYTES
                    or now - queued >= MOST_SECONDS
                )
                if not due:
                    await asyncio.sleep(quiet)
                    continue
                self._waiting.popleft()
                self._bytes -= size
                try:
                    await work
                except Exception:  # its own to log; the ones after it still run
                    log.exception("work left for after an answer failed")
        finally:
            self._worker = None
            if self._waiting:  # cancelled mid-way: never run, closed (no "never awaited")
                for work, _, _ in self._waiting:
                    work.close()
                self._waiting.clear()
                self._bytes = 0

    async def drain(self) -> None:
        """Every waiting piece of work run, without waiting for quiet."""
        self._now = True
        try:
            while self._worker is not None:
                await asyncio.gather(self._worker, return_exceptions=True)
        finally:
            self._now = False
