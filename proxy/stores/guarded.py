"""Any checkpoint store, with every operation bounded in time and a fault remembered.

A dead Redis or an SQLite file held locked by another process must cost a request at most
``timeout`` seconds once, not the summarizer's whole timeout: each call is bounded, and after a
fault the store is treated as down for ``cooldown`` seconds, so the requests after it skip it at
once (truncating instead of summarizing) until it is tried again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TypeVar

from proxy.stores.protocol import Store
from proxy.stores.quota import Blob, Usage
from strategies.checkpoints.chain import Checkpoint

T = TypeVar("T")
log = logging.getLogger("contextwarden.store")


class StoreFault(Exception):
    """The store failed, timed out, or is resting after a recent fault."""


class GuardedStore:
    def __init__(
        self,
        inner: Store | None,
        timeout: float,
        cooldown: float = 5.0,
        disabled: str | None = None,
    ) -> None:
        """``inner`` None: checkpoints are disabled (``disabled`` says why); every call fails
        at once and quietly, so requests truncate instead of summarizing."""
        self.inner = inner
        self.timeout = timeout
        self.cooldown = cooldown
        self.disabled = disabled if inner is None else None
        self.errors = 0
        self._down_until = 0.0

    @property
    def down(self) -> bool:
        return time.monotonic() < self._down_until

    @property
    def usage(self) -> Usage:
        """The store's bytes and this process's evictions (proxy/stores/quota.py)."""
        return self.inner.usage if self.inner is not None else Usage()

    @property
    def _store(self) -> Store:
        if self.inner is None:
            raise StoreFault(f"checkpoints are disabled: {self.disabled}")
        return self.inner

    async def _call(self, work: Awaitable[T]) -> T:
        if self.down:
            if asyncio.iscoroutine(work):
                work.close()  # never started: nothing to wait for
            raise StoreFault("the checkpoint store is resting after a fault")
        try:
            return await asyncio.wait_for(work, self.timeout)
        except Exception as exc:  # sqlite3, redis, OS errors and time-outs alike
            self.errors += 1
            self._down_until = time.monotonic() + self.cooldown
            log.warning("checkpoint store unavailable: %s", str(exc) or type(exc).__name__)
            raise StoreFault(str(exc) or type(exc).__name__) from exc

    async def candidates(self, team: str, conversation: str) -> list[Checkpoint]:
        return await self._call(self._store.candidates(team, conversation))

    async def put(self, team: str, checkpoint: Checkpoint, owner: str = "") -> None:
        await self._call(self._store.put(team, checkpoint, owner))

    async def learned_windows(self) -> dict[str, int]:
        return await self._call(self._store.learned_windows())

    async def put_learned_window(self, model: str, window: int) -> None:
        await self._call(self._store.put_learned_window(model, window))

    async def forget_learned(self, keys: list[str]) -> None:
        await self._call(self._store.forget_learned(keys))

    async def put_setting(self, key: str, value: int) -> None:
        await self._call(self._store.put_setting(key, value))

    async def get_blob(self, key: str) -> bytes | None:
        return await self._call(self._store.get_blob(key))

    async def put_blob(
        self, key: str, value: bytes, ttl_seconds: float, owner: str | None = ""
    ) -> None:
        await self._call(self._store.put_blob(key, value, ttl_seconds, owner))

    async def put_blobs(self, items: list[Blob]) -> None:
        await self._call(self._store.put_blobs(items))

    async def acquire(self, key: str, ttl_seconds: float) -> bool:
        return await self._call(self._store.acquire(key, ttl_seconds))

    async def release(self, key: str) -> None:
        await self._call(self._store.release(key))

    async def renew(self, key: str, ttl_seconds: float) -> None:
        await self._call(self._store.renew(key, ttl_seconds))

    async def locked(self, key: str) -> bool:
        return await self._call(self._store.locked(key))

    async def take_slot(self, key: str, limit: int, window_seconds: float) -> bool:
        return await self._call(self._store.take_slot(key, limit, window_seconds))

    async def slots_taken(self, key: str, window_seconds: float) -> int:
        return await self._call(self._store.slots_taken(key, window_seconds))

    async def ping(self) -> None:
        await self._call(self._store.ping())

    async def scope_secret(self, fresh: bytes | None = None) -> bytes:
        return await self._call(self._store.scope_secret(fresh))

    async def close(self) -> None:
        if self.inner is not None:
            await self.inner.close()
