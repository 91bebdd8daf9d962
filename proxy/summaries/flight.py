"""One summary per conversation at a time: in this process, and across replicas of a store.

In-process, concurrent requests of one conversation share one task (single-flight). Across
replicas, whoever takes the store's lock makes the checkpoint and the others poll the store
for it, until the summarizer's timeout. A store fault is never taken for "another replica is
summarizing": the request gives up at once and truncates.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from proxy.stores.protocol import Store
from strategies.checkpoint import Checkpoint

log = logging.getLogger("contextwarden.compaction")
POLL_SECONDS = 0.1

Make = Callable[[], Awaitable[Checkpoint | None]]
Found = Callable[[list[Checkpoint]], Checkpoint | None]


class Flights:
    def __init__(self, store: Store, on_fault: Callable[[Exception], None]) -> None:
        self.store = store
        self._on_fault = on_fault
        self._inflight: dict[str, asyncio.Task[Checkpoint | None]] = {}

    def running(self, key: str) -> bool:
        return key in self._inflight

    async def run(
        self, key: str, make: Make, wait: bool, newer: Found, poll: tuple[str, str], ttl: float
    ) -> Checkpoint | None:
        """``make`` once for ``key``. A request that finds one under way waits for it
        (``wait``) or leaves it be. ``newer`` picks, from a store poll of ``poll`` (scope,
        conversation), the checkpoint another replica made."""
        running = self._inflight.get(key)
        if running is not None:
            if not wait:
                return None
            made = await asyncio.shield(running)
            # Made for another request of this conversation: used only if it fits this one's
            # messages (a shorter or edited history shares the key but not the chain).
            return newer([made]) if made is not None else None
        task = asyncio.create_task(self._locked(key, make, wait, newer, poll, ttl))
        self._inflight[key] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._inflight.pop(key, None)
            else:
                task.add_done_callback(lambda _: self._inflight.pop(key, None))

    async def _locked(
        self, key: str, make: Make, wait: bool, newer: Found, poll: tuple[str, str], ttl: float
    ) -> Checkpoint | None:
        try:
            taken = await self.store.acquire(key, ttl * 3)
        except Exception as exc:  # a store fault: truncate now, never wait on a dead store
            self._on_fault(exc)
            return None
        if not taken:  # another replica summarizes this conversation
            return await self._await_other(newer, poll, ttl) if wait else None
        try:
            return await make()
        finally:
            try:
                await self.store.release(key)
            except Exception as exc:  # the lock expires by itself
                self._on_fault(exc)

    async def _await_other(
        self, newer: Found, poll: tuple[str, str], seconds: float
    ) -> Checkpoint | None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            try:
                candidates = await self.store.candidates(*poll)
            except Exception as exc:
                self._on_fault(exc)
                return None
            found = newer(candidates)
            if found is not None:
                return found
        return None
