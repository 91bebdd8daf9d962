"""A digest memo: a message's digest, once made, found again by the message's written bytes.

Each request of a conversation digests messages its earlier requests sent (prefix fingerprints,
checkpoint chains, sticky replays): looking the bytes up costs about a third of hashing them.
The memo holds at most ``limit`` bytes of messages and is emptied when full; its dict
operations are atomic under the GIL, so the worker threads that fit large requests may share it.
"""

from __future__ import annotations

import hashlib


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
