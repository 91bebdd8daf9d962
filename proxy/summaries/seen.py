"""Which conversations came by before. A conversation over its budget on its first sight is
truncated, not summarized (it may be a one-off: decision.py's ``first_sight_truncates``).

The store is the truth: a mark per conversation, kept as long as its checkpoints
(``checkpoints.ttl_seconds``), so that a conversation's first visit to another replica (behind
a round-robin load balancer), or to a restarted proxy, is not taken for its first sight: that
replica would truncate where the others summarize, and its truncation would become the
conversation's sticky cut. What a process keeps is a cache of the marks it has read or made,
the most recent ``limit``: a conversation once seen stays seen, so a mark found in memory
needs no store round trip. A store fault reads as "not seen", as with no store at all.
"""

from __future__ import annotations

from collections import OrderedDict
from contextlib import suppress
from typing import Protocol

STORE_PREFIX = "seen\t"
LIMIT = 65536


class Blobs(Protocol):
    async def get_blob(self, key: str) -> bytes | None: ...

    async def put_blob(self, key: str, value: bytes, ttl_seconds: float) -> None: ...


class SeenConversations:
    def __init__(self, store: Blobs | None = None, ttl: float = 0.0, limit: int = LIMIT) -> None:
        self._store = store
        self._ttl = ttl
        self._limit = limit
        self._memory: OrderedDict[str, None] = OrderedDict()  # the most recent last

    async def check(self, key: str, remember: bool = True) -> bool:
        """Whether the conversation ``key`` came by before; with ``remember``, it has now
        (marked in the store when it was not)."""
        if key in self._memory:
            self._memory.move_to_end(key)
            return True
        seen = await self._stored(key)
        if seen or remember:
            self._hold(key)
        if remember and not seen and self._store is not None:
            # A write that fails leaves it seen here all the same.
            with suppress(Exception):
                await self._store.put_blob(STORE_PREFIX + key, b"1", self._ttl)
        return seen

    async def _stored(self, key: str) -> bool:
        if self._store is None:
            return False
        try:
            return await self._store.get_blob(STORE_PREFIX + key) is not None
        except Exception:  # the store is down: a first sight, as without one
            return False

    def _hold(self, key: str) -> None:
        self._memory[key] = None
        if len(self._memory) > self._limit:
            self._memory.popitem(last=False)

    def __len__(self) -> int:
        return len(self._memory)
