"""Which conversations came by before. A conversation over its budget on its first sight is
truncated, not summarized (it may be a one-off: decision.py's ``first_sight_truncates``).

The store is the truth: a mark per conversation, kept as long as its checkpoints
(``checkpoints.ttl_seconds``), so that a conversation's first visit to another replica (behind
a round-robin load balancer), or to a restarted proxy, is not taken for its first sight: that
replica would truncate where the others summarize, and its truncation would become the
conversation's sticky cut. What a process keeps is a cache of the marks it has read or made,
the most recent, in the memory budget's share: a conversation once seen stays seen, so a mark
found in memory needs no store round trip. A store fault reads as "not seen", as with no store
at all.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Protocol

from proxy.stores.guarded import StoreFault
from strategies.bounded_memory import Lru

STORE_PREFIX = "seen\t"
LIMIT = 16 * 1024 * 1024  # bytes, until the memory budget gives its share
ENTRY = 300  # a mark's key object, the entry and its slot, beside the key's characters


class Blobs(Protocol):
    async def get_blob(self, key: str) -> bytes | None: ...

    async def put_blob(
        self, key: str, value: bytes, ttl_seconds: float, owner: str | None = ""
    ) -> None: ...


class SeenConversations:
    def __init__(self, store: Blobs | None = None, ttl: float = 0.0, limit: int = LIMIT) -> None:
        self._store = store
        self._ttl = ttl
        self._memory: Lru[str, bool] = Lru(limit)

    async def check(self, key: str, remember: bool = True, owner: str = "") -> bool:
        """Whether the conversation ``key`` came by before; with ``remember``, it has now
        (marked in the store, charged to ``owner``, when it was not)."""
        if self._memory.get(key):
            return True
        seen = await self._stored(key)
        if seen or remember:
            self._hold(key)
        if remember and not seen and self._store is not None:
            # A write that fails leaves it seen here all the same.
            with suppress(StoreFault):
                await self._store.put_blob(STORE_PREFIX + key, b"1", self._ttl, owner)
        return seen

    async def _stored(self, key: str) -> bool:
        if self._store is None:
            return False
        try:
            return await self._store.get_blob(STORE_PREFIX + key) is not None
        except StoreFault:  # the store is down: a first sight, as without one
            return False

    def _hold(self, key: str) -> None:
        self._memory.put(key, True, ENTRY + len(key))

    @property
    def memory(self) -> Lru[str, bool]:
        """What this process holds (proxy/observe/memory.py gives it its share)."""
        return self._memory
