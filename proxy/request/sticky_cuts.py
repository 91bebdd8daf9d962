"""Each conversation's last cut, remembered so that its next request replays it (sticky cuts,
strategies/sticky.py) instead of cutting afresh.

A recipe is kept in memory (the most recent conversations', in the memory budget's share)
and, with the prefix fingerprints' TTL, in the checkpoint store beside the conversation's
checkpoints and fingerprint, so replicas sharing a store (and a restarted proxy) replay each
other's cuts.
Without a recipe (a store fault, an expired one, another conversation) the request is cut
afresh, as before sticky cuts: a missing recipe only costs the cached prefix.

A store ``shared`` with other processes is the truth: the conversation's newest cut may have
been made by another replica, so only the store's recipe is replayed. A replica's own may be
several cuts old: when the store has none (it restarted empty) or does not answer, the request
is cut afresh, as without a store. A cut made afresh because the store did not answer is not
written (its truncation, made without the summary the store holds, would be replayed by the
next requests, on every replica, as the conversation's cut).
"""

from __future__ import annotations

import asyncio
import hashlib

from proxy.request.conversations import TTL_SECONDS, BlobStore, key_of
from proxy.stores.guarded import StoreFault
from proxy.wire import WireRequest
from strategies.bounded_memory import Lru, exact
from strategies.sticky import Recipe, decode, encode

IN_MEMORY = 64 * 1024 * 1024  # bytes, until the memory budget gives its share
ENTRY = 400  # a recipe's key, its bytes object's header, the entry, its slot
MAX_RECIPE_BYTES = 4 << 20  # a recipe larger than this is not kept (it would be a huge prompt)
STORE_PREFIX = "cut\t"
UNREAD = 4096  # conversations whose recall failed, remembered at most


class CutMemory:
    def __init__(self, store: BlobStore | None = None, shared: bool = False) -> None:
        self._recent: Lru[str, bytes] = Lru(IN_MEMORY)
        self._store = store
        self._shared = shared
        self._writes: set[asyncio.Task[None]] = set()
        self._unread: set[str] = set()  # conversations whose recall the store failed

    async def recall(self, conversation: str) -> Recipe | None:
        raw = None if self._shared else self._recent.get(conversation)
        if raw is None and self._store is not None:
            try:
                raw = await self._store.get_blob(STORE_PREFIX + conversation)
            except StoreFault:  # the store is down: cut afresh this time, and keep it to itself
                if self._shared:
                    if len(self._unread) >= UNREAD:
                        self._unread.clear()
                    self._unread.add(conversation)
                return None
            self._unread.discard(conversation)
            recipe = decode(raw) if raw else None
            if recipe is not None and raw is not None and not self._shared:
                self._hold(conversation, raw)  # its next requests replay from memory
            return recipe
        return decode(raw) if raw else None

    def remember(self, conversation: str, recipe: Recipe, owner: str = "") -> None:
        """Keep ``recipe`` as the conversation's cut, in the store charged to ``owner``
        (proxy/stores/quota.py)."""
        if conversation in self._unread:  # cut without the store: not the conversation's cut
            self._unread.discard(conversation)
            return
        try:
            raw = exact(encode(recipe))
        except TypeError:  # a message that cannot be stored: cut afresh next time
            self._recent.pop(conversation)
            return
        if len(raw) > MAX_RECIPE_BYTES:
            self._recent.pop(conversation)
            return
        if not self._shared:  # else the store alone holds it
            self._hold(conversation, raw)
        if self._store is not None:
            task = asyncio.ensure_future(self._write(self._store, conversation, raw, owner))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)

    def _hold(self, conversation: str, raw: bytes) -> None:
        self._recent.put(conversation, raw, ENTRY + len(raw))

    @property
    def memory(self) -> Lru[str, bytes]:
        """What this process holds (proxy/observe/memory.py gives it its share)."""
        return self._recent

    async def _write(self, store: BlobStore, conversation: str, raw: bytes, owner: str) -> None:
        try:
            await store.put_blob(STORE_PREFIX + conversation, raw, TTL_SECONDS, owner)
        except StoreFault:  # kept in memory all the same
            return

    async def drain(self) -> None:
        """Wait for the background writes (at shutdown, before the store closes)."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)


def sticky_key(cuts: CutMemory | None, req: WireRequest) -> str | None:
    """The conversation whose last cut this request replays, when the policy cuts
    cache-friendly (strategies/sticky.py); None: no cut is replayed or remembered."""
    if cuts is None or req.policy.engine.cache_cut_share <= 0:
        return None
    key = key_of(req)
    if req.session_memory:  # the client's own summary: a new one is a new cut
        memory = hashlib.blake2b(req.session_memory.encode(), digest_size=8).hexdigest()
        key = f"{key}:{memory}"
    return key
