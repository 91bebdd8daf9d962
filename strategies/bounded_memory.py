"""Bounded memories: each holds at most ``limit`` bytes of entries (its caller's measure of
what an entry keeps alive) and lets the least recently used go first.

    Generations  for memos hit per message of every request: two generations of entries; a hit
                 in the young one costs one dict look-up, a hit in the old one moves the entry
                 to the young one; when the young one holds half the limit, the old one (what
                 no request used since) goes, and the young one becomes old
    Lru          exact least-recently-used order, for entries used once or twice per request
                 (a conversation's last request, its cut, its fingerprint)
    DigestMemo   a message's digest, once made, found again by the message's written bytes
    ObjectMemo   a value per object, found again by the object's identity

Each request of a conversation digests messages its earlier requests sent (prefix fingerprints,
checkpoint chains, sticky replays): looking the bytes up costs about a third of hashing them.
Their dict operations are atomic under the GIL, so the worker threads that fit large requests
may share a memory: a race may lose an entry or misstate ``held`` until the next rotation,
never give a wrong value. ``resize`` sets the limit (the proxy's memory budget gives each its
share, proxy/observe/memory.py).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
DEFAULT_LIMIT = 64 * 1024 * 1024


class Bounded(Protocol):
    """What the memory budget reads and sets of a memory."""

    @property
    def held(self) -> int: ...

    @property
    def limit(self) -> int: ...

    def resize(self, limit: int) -> None: ...

    def __len__(self) -> int: ...


class Generations(Generic[K, V]):
    """A memo approximately least-recently-used (see the module docstring). ``weigh`` is an
    entry's size, asked when the entry is kept and when a hit moves it to the young
    generation."""

    def __init__(self, weigh: Callable[[K, V], int], limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._weigh = weigh
        self._young: dict[K, V] = {}
        self._old: dict[K, V] = {}
        self._young_held = 0
        self._old_held = 0

    def get(self, key: K) -> V | None:
        value = self._young.get(key)
        if value is None:
            value = self._old.pop(key, None)
            if value is not None:
                size = self._weigh(key, value)
                self._old_held -= size
                self._keep(key, value, size)
        return value

    def put(self, key: K, value: V) -> None:
        self._keep(key, value, self._weigh(key, value))

    def _keep(self, key: K, value: V, size: int) -> None:
        if self._young_held + size > self.limit // 2:
            self._old, self._young = self._young, {}
            self._old_held, self._young_held = self._young_held, 0
            if size > self.limit // 2:
                return  # larger than a generation: not kept
        self._young[key] = value
        self._young_held += size

    def resize(self, limit: int) -> None:
        self.limit = limit
        if self._young_held > limit // 2:
            self._old, self._young = {}, {}
            self._old_held = self._young_held = 0
        elif self._young_held + self._old_held > limit:
            self._old, self._old_held = {}, 0

    @property
    def held(self) -> int:
        return self._young_held + self._old_held

    def __len__(self) -> int:
        return len(self._young) + len(self._old)


class Lru(Generic[K, V]):
    """A mapping in least-recently-used order, holding at most ``limit`` bytes: each entry's
    size is given when it is kept. ``get`` makes an entry the most recent."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._held = 0

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def peek(self, key: K) -> V | None:
        """The value, its recency unchanged."""
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def put(self, key: K, value: V, size: int) -> None:
        self.pop(key)
        if size > self.limit:
            return  # larger than the whole memory: not kept
        self._entries[key] = (value, size)
        self._held += size
        self._evict()

    def pop(self, key: K) -> V | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self._held -= entry[1]
        return entry[0]

    def oldest(self) -> K | None:
        return next(iter(self._entries), None)

    def resize(self, limit: int) -> None:
        self.limit = limit
        self._evict()

    def _evict(self) -> None:
        while self._held > self.limit and self._entries:
            _, (_, size) = self._entries.popitem(last=False)
            self._held -= size

    @property
    def held(self) -> int:
        return self._held

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


def key_size(key: Hashable, value: Any = None) -> int:
    """What a memo's entry keyed by ``key`` keeps alive: the entry (``KEY_ENTRY``), and the
    key's bytes or characters; a key of (name, string) pairs (a message of short strings,
    strategies/tokens.py) keeps each pair and each string (``PAIR`` beside its characters)."""
    if isinstance(key, tuple):
        return KEY_ENTRY + sum(PAIR + len(v) for _, v in key)
    if isinstance(key, bytes | str):
        return KEY_ENTRY + len(key)
    return KEY_ENTRY


# A dict slot, the key object's header, the value (tests/strategies/test_bounded_memory.py).
KEY_ENTRY = 160
PAIR = 130  # a (name, value) tuple and the value string's header


def exact(raw: bytes) -> bytes:
    """``raw`` in a bytes object of its own size. orjson's output keeps the buffer it was
    written in (4 KiB at least, up to twice its length: tracemalloc finds 4,099 bytes held by a
    40-byte output, 64,939 by a 5,047-byte one), so a memory that keeps one keeps a copy."""
    return bytes(memoryview(raw))


# What an entry of the digest memos costs beside its bytes: the key's bytes object header, the
# 16-byte digest's object, a dict slot (about 100 bytes each, measured by tracemalloc in
# tests/strategies/test_bounded_memory.py).
DIGEST_ENTRY = 200


class _OverGenerations:
    """A memory kept in a ``Generations``: its size and limit are that one's."""

    _memo: Generations[Any, Any]

    def resize(self, limit: int) -> None:
        self._memo.resize(limit)

    @property
    def limit(self) -> int:
        return self._memo.limit

    @property
    def held(self) -> int:
        """Bytes held (the entries' measure and their own)."""
        return self._memo.held

    def __len__(self) -> int:
        return len(self._memo)


class DigestMemo(_OverGenerations):
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._memo: Generations[bytes, bytes] = Generations(_digest_size, limit)

    def digest(self, raw: bytes) -> bytes:
        """The 128-bit BLAKE2b of ``raw``."""
        known = self._memo.get(raw)
        if known is None:
            known = hashlib.blake2b(raw, digest_size=16).digest()
            self._memo.put(exact(raw), known)
        return known

    def get(self, raw: bytes) -> bytes | None:
        return self._memo.get(raw)

    def remember(self, raw: bytes, digest: bytes) -> None:
        """``digest`` stands for ``raw`` from now on (a digest of other bytes, when the caller
        normalizes them first)."""
        self._memo.put(exact(raw), digest)


def _digest_size(raw: bytes, digest: bytes) -> int:
    return len(raw) + DIGEST_ENTRY


class ObjectMemo(_OverGenerations):
    """A value per object, found again by the object's identity: the objects a request shares
    with its conversation's last one (proxy/formats/reused_items.py) need no serializing to be
    looked up. Each entry holds its object (so that its id is not reused while held) and
    counts its ``size`` (the caller's measure of what the object keeps alive) and ``ENTRY``
    bytes of its own. Only for objects nothing changes once made, as messages are."""

    ENTRY = 500  # beside the JSON: the object and its strings' headers, the entry, its slot

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._memo: Generations[int, tuple[Any, bytes, int]] = Generations(_object_size, limit)

    def get(self, obj: Any) -> bytes | None:
        hit = self._memo.get(id(obj))
        return hit[1] if hit is not None and hit[0] is obj else None

    def remember(self, obj: Any, value: bytes, size: int) -> None:
        self._memo.put(id(obj), (obj, value, size + self.ENTRY))


def _object_size(key: int, entry: tuple[Any, bytes, int]) -> int:
    return entry[2]
