"""What the processes of a shared store (replicas on Redis, ``serve --workers``) keep in step,
every ``EVERY_SECONDS``, besides what each request reads and writes itself.

    scope key     the key that scopes checkpoints to a caller: a store that lost it (a Redis
                  restarted empty) gets this process's back, so that a replica started after
                  the restart reads the one every running replica holds; if the store holds
                  another (replicas started while it had none made their own), every
                  process takes the store's, and they agree again

A step that finds the store down is skipped until the next; nothing here is on a request's
path.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from proxy.edge.auth import Authenticator
from proxy.stores import GuardedStore

log = logging.getLogger("contextwarden")
EVERY_SECONDS = 1.0

Step = Callable[[], Awaitable[None]]


class Sharing:
    """Runs ``steps`` every ``EVERY_SECONDS`` once ``ready()`` (the store has answered)."""

    def __init__(self, steps: list[Step], ready: Callable[[], bool]) -> None:
        self._steps = steps
        self._ready = ready
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(EVERY_SECONDS)
            for step in self._steps if self._ready() else ():
                try:
                    await step()
                except Exception as exc:  # the store's fault, logged by it: next time
                    log.debug("keeping in step with the store: %s", exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def scope_key(store: GuardedStore, auth: Authenticator) -> Step:
    """The step that keeps the scope key one for every process of the store."""

    async def step() -> None:
        held = await store.scope_secret(auth.scope_secret)
        if held != auth.scope_secret:
            log.warning("the store holds another scope key than this process: taking it")
            auth.scope_secret = held

    return step
