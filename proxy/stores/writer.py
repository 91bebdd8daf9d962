"""The request path's blob writes, gathered and written together, after the answer.

Each request of an agent's conversation writes its prefix fingerprint and, when it is trimmed,
its cut (proxy/request/conversations.py, proxy/request/sticky_cuts.py), and the next request of the
conversation writes them again. Written one by one, each write was a trip to a worker thread
(SQLite) or a round trip (Redis): on the 2-core benchmark machine a thread's round trip costs
about 120 us of CPU, and two of them more than the rest of a fitted agent request's work.

The writer holds what is written for ``DELAY`` seconds, the newest value per key (a
conversation's next request supersedes its last), then writes all of it in one call, one batch
at a time, in order. Reads see what waits and what is being written. What waits when the
process dies is lost, as the last writes of an SQLite file in WAL mode may be; it is what the
next requests rebuild (a fingerprint, a cut). A proxy that stops drains it first.

Processes sharing a store (replicas on Redis, ``serve --workers``) would see a write up to
``DELAY`` later, and an agent's next step may come sooner than that, to another replica. So a
request of a shared store ``flush``es before its answer leaves: what waits is written at once
(with what other requests put meanwhile), and the answer waits for that batch.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from proxy.stores.guarded import StoreFault
from proxy.stores.quota import Blob

DELAY = 0.05


class BatchStore(Protocol):
    async def get_blob(self, key: str) -> bytes | None: ...

    async def put_blobs(self, items: list[Blob]) -> None: ...


class BlobWriter:
    """A blob store (``get_blob``, ``put_blob``) whose writes wait ``delay`` seconds and go to
    ``store`` together. A failed batch is dropped: its store logs the fault, and its values are
    still in the memory of what wrote them."""

    def __init__(self, store: BatchStore, delay: float = DELAY) -> None:
        self._store = store
        self._delay = delay
        self._waiting: dict[str, Blob] = {}
        self._writing: dict[str, Blob] = {}  # the batch in flight
        self._timer: asyncio.TimerHandle | None = None
        self._flight: asyncio.Task[None] | None = None
        self._flushed: asyncio.Future[None] | None = None  # done when what waits is written
        self._hurry = False  # a flush waits for what waits: it goes as soon as it can

    async def get_blob(self, key: str) -> bytes | None:
        held = self._waiting.get(key) or self._writing.get(key)
        if held is not None:
            return held.value
        return await self._store.get_blob(key)

    async def put_blob(
        self, key: str, value: bytes, ttl_seconds: float, owner: str | None = ""
    ) -> None:
        self.put(key, value, ttl_seconds, owner)

    def put(self, key: str, value: bytes, ttl_seconds: float, owner: str | None = "") -> None:
        """Hold ``value`` for ``key`` (replacing one waiting); written within ``delay``
        seconds, or after the batch in flight."""
        self._waiting[key] = Blob(key, value, ttl_seconds, owner)
        if self._timer is None and self._flight is None:
            self._timer = asyncio.get_running_loop().call_later(self._delay, self._send)

    def _send(self) -> None:
        self._timer = None
        if not self._waiting:
            return
        self._writing, self._waiting = self._waiting, {}
        flushed, self._flushed = self._flushed, None
        self._flight = asyncio.ensure_future(self._write(flushed))

    async def _write(self, flushed: asyncio.Future[None] | None) -> None:
        batch = list(self._writing.values())
        try:
            await self._store.put_blobs(batch)
        except StoreFault:  # the store logged it; the writers keep their values in memory
            pass
        finally:
            self._writing, self._flight = {}, None
            if flushed is not None and not flushed.done():
                flushed.set_result(None)
            if self._waiting:  # what came meanwhile waits its own delay, unless flushed
                delay, self._hurry = (0.0 if self._hurry else self._delay), False
                self._timer = asyncio.get_running_loop().call_later(delay, self._send)

    async def flush(self) -> None:
        """Return once everything put so far is written (or its batch failed)."""
        if self._waiting:
            if self._flushed is None:
                self._flushed = asyncio.get_running_loop().create_future()
            flushed = self._flushed
            if self._flight is None:
                if self._timer is not None:
                    self._timer.cancel()
                self._send()
            else:
                self._hurry = True
            await asyncio.shield(flushed)
        elif self._flight is not None:
            await asyncio.shield(self._flight)

    async def drain(self) -> None:
        """Write everything that waits now (at shutdown, before the store closes)."""
        while self._waiting or self._flight is not None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._flight is None:
                self._send()
            if self._flight is not None:
                await asyncio.shield(self._flight)
