"""What the processes of a shared store (replicas on Redis, ``serve --workers``) keep in step,
every ``EVERY_SECONDS``, besides what each request reads and writes itself.

    scope key     the key that scopes checkpoints to a caller: a store that lost it (a Redis
                  restarted empty) gets this process's back, so that a replica started after
                  the restart reads the one every running replica holds; if the store holds
                  another (replicas started while it had none made their own), every
                  process takes the store's, and they agree again
    learned windows  what another process learned (a window from an overflow, a calibration's
                  fit) or an operator forgot (``DELETE /admin/learned-windows/…``, which reaches
                  one replica through a load balancer): the store's, compared with what it held
                  a step ago; what came or changed is applied here, what went is forgotten.
                  The store is the truth: a Redis restarted empty makes every replica forget
                  what it had learned (the next overflow teaches it again, and is answered)

A step that finds the store down is skipped until the next; nothing here is on a request's
path.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from proxy.edge.auth import Authenticator
from proxy.edge.readiness import Readiness
from proxy.stores import GuardedStore, StoreFault
from proxy.windows.calibration import SETTING_KEYS
from proxy.windows.discovery import STORE_KEY as DISCOVERED_KEY
from proxy.windows.knowledge import PREFIXES, WindowKnowledge
from proxy.windows.learned import from_store_key, store_key
from proxy.windows.models import Models

log = logging.getLogger("contextwarden")
EVERY_SECONDS = 1.0

Step = Callable[[], Awaitable[None]]


class Sharing:
    """Runs ``steps`` every ``EVERY_SECONDS`` once the store has answered (``readiness``)."""

    def __init__(self, steps: list[Step], readiness: Readiness) -> None:
        self._steps = steps
        self._readiness = readiness
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._steps:  # a store of this process's own: nothing to keep in step
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(EVERY_SECONDS)
            for step in self._steps if self._readiness.connected else ():
                try:
                    await step()
                except StoreFault as exc:  # the store's fault, logged by it: next time
                    log.debug("keeping in step with the store: %s", exc)
                except Exception:  # fault boundary: a bug in a step is logged; the loop goes on
                    log.exception("keeping in step with the store failed")

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


def learned_windows(store: GuardedStore, windows: WindowKnowledge) -> Step:
    """The step that brings into this process the learned windows, bounds, calibration fits
    and windows read from servers that other processes wrote, and forgets those an operator
    deleted through another one."""
    models = windows.models
    last: dict[str, int] | None = None  # the store's, a step ago (None: not read yet)

    async def step() -> None:
        nonlocal last
        stored = await store.learned_windows()
        before, last = last, stored
        if before is None:  # the first read since the start's (Runtime.connect): all of it
            windows.restore(stored)
            return
        for key in before.keys() - stored.keys():
            _forget(models, key)
        changed = {k for k, v in stored.items() if before.get(k) != v}
        came = {s for s in (_scoped(k) for k in changed) if s}
        for team, model in came:
            window, held = stored.get(store_key(team, model)), models.learned.get(team, model)
            if window is not None and held is not None and held < window:
                models.learned.forget(team, model)  # deleted, then learned larger: the store's
        windows.restore(
            {
                k: v
                for k, v in stored.items()
                if _scoped(k) in came or (k in changed and k.startswith(DISCOVERED_KEY))
            }
        )

    return step


def _scoped(key: str) -> tuple[str, str] | None:
    """The team and model a learned window's, bound's or calibration setting's key is about
    (None for a window read from a server: it is the upstream's, not a team's)."""
    if key.startswith(DISCOVERED_KEY):
        return None
    prefix = next((p for p in PREFIXES if key.startswith(p)), "")
    return from_store_key(key.removeprefix(prefix))


def _forget(models: Models, key: str) -> None:
    scoped = _scoped(key)
    if scoped is None:
        return
    if any(key.startswith(p) for p in SETTING_KEYS):
        models.calibration.forget(*scoped)
    else:  # the window or one of its bounds: forgetting the window drops its bounds too
        models.learned.forget(*scoped)
