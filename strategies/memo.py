"""Digest memos: a message's digest, once made, found again by the message's written bytes
(``DigestMemo``), or by the message object itself (``ObjectMemo``).

Each request of a conversation digests messages its earlier requests sent (prefix fingerprints,
checkpoint chains, sticky replays): looking the bytes up costs about a third of hashing them.
The memo holds at most ``limit`` bytes of messages and is emptied when full; its dict
operations are atomic under the GIL, so the worker threads that fit large requests may share it.
"""

from __future__ import annotations

import hashlib
from typing import Any


class DigestMemo:
    def __init__(self, limit: int = 64 * 1024 * 1024) -> None:
        self.limit = limit
        self._digests: dict[bytes, bytes] = {}
        self._held = 0

    def digest(self, raw: bytes) -> bytes:
        """The 128-bit BLAKE2b of ``raw``."""
        known = self._digests.get(raw)
        if known is None:
            known = hashlib.blake2b(raw, digest_size=16).digest()
            self.remember(raw, known)
        return known

    def get(self, raw: bytes) -> bytes | None:
        return self._digests.get(raw)

    def remember(self, raw: bytes, digest: bytes) -> None:
        """``digest`` stands for ``raw`` from now on (a digest of other bytes, when the caller
        normalizes them first)."""
        if self._held + len(raw) > self.limit:
            self._digests.clear()
            self._held = 0
        self._digests[raw] = digest
        self._held += len(raw)

    @property
    def held(self) -> int:
        """Bytes of messages held."""
        return self._held

    def __len__(self) -> int:
        return len(self._digests)


class ObjectMemo:
    """A value per object, found again by the object's identity: the objects a request shares
    with its conversation's last one (proxy/formats/recent.py) need no serializing to be
    looked up. Each entry holds its object (so that its id is not reused while held) and
    counts its ``size`` (the caller's measure, the object's written bytes) and ``ENTRY`` bytes
    of its own against ``limit``; the memo is emptied when full. Only for objects nothing
    changes once made, as messages are."""

    ENTRY = 200  # an entry's own bytes, about: the dict slot, the tuple, the value

    def __init__(self, limit: int = 64 * 1024 * 1024) -> None:
        self.limit = limit
        self._values: dict[int, tuple[Any, bytes]] = {}
        self._held = 0

    def get(self, obj: Any) -> bytes | None:
        hit = self._values.get(id(obj))
        return hit[1] if hit is not None and hit[0] is obj else None

    def remember(self, obj: Any, value: bytes, size: int) -> None:
        size += self.ENTRY
        if self._held + size > self.limit:
            self._values.clear()
            self._held = 0
        self._values[id(obj)] = (obj, value)
        self._held += size

    @property
    def held(self) -> int:
        return self._held

    def __len__(self) -> int:
        return len(self._values)
