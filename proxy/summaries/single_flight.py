"""One summary per conversation at a time: in this process, and across replicas of a store.

In-process, concurrent requests of one conversation share one task (single-flight). Across
replicas, whoever takes the store's lock makes the checkpoint and the others poll the store
for it, until the summarizer's timeout. A store fault is never taken for "another replica is
summarizing": the request gives up at once and truncates.

The lock lives ``LOCK_SECONDS``, renewed every ``RENEW_SECONDS`` while its holder works: a
replica that dies while it summarizes (killed, its host gone), or a lock the store took after
its taker gave up waiting for it (a store that hung, then resumed), holds nobody up for
longer. A waiter that finds the lock gone and no checkpoint made stops waiting (the holder
failed, as a failed summary in this process leaves its waiters to truncate).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from proxy.stores.guarded import StoreFault
from proxy.stores.protocol import Store
from strategies.checkpoints.chain import Checkpoint

log = logging.getLogger("contextwarden.compaction")
POLL_SECONDS = 0.1
LOCK_SECONDS = 3.0
RENEW_SECONDS = 1.0

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
            taken = await self.store.acquire(key, LOCK_SECONDS)
        except StoreFault as exc:  # a store fault: truncate now, never wait on a dead store
            self._on_fault(exc)
            return None
        if not taken:  # another replica summarizes this conversation
            return await self._await_other(key, newer, poll, ttl) if wait else None
        renewing = asyncio.create_task(self._renew(key))
        try:
            return await make()
        finally:
            renewing.cancel()
            try:
                await self.store.release(key)
            except StoreFault as exc:  # the lock expires by itself
                self._on_fault(exc)

    async def _renew(self, key: str) -> None:
        """Keep the lock while its summary is being made."""
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            try:
                await self.store.renew(key, LOCK_SECONDS)
            except StoreFault as exc:  # it may lapse: another replica may summarize too
                self._on_fault(exc)
                return

    async def _await_other(
        self, key: str, newer: Found, poll: tuple[str, str], seconds: float
    ) -> Checkpoint | None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            try:
                found = newer(await self.store.candidates(*poll))
                if found is not None:
                    return found
                if not await self.store.locked(key):
                    # Its holder is done, or gone: the checkpoint is stored, if it was made.
                    return newer(await self.store.candidates(*poll))
            except StoreFault as exc:  # the store is down: truncate, never wait on it
                self._on_fault(exc)
                return None
        return None
