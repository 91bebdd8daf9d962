"""The store's protocol: the proxy's state, which the pure engine never touches."""

from __future__ import annotations

from typing import Protocol

from proxy.stores.quota import Blob, Usage
from strategies.checkpoints.chain import Checkpoint


class Store(Protocol):
    """What a proxy keeps between requests and shares with its replicas: checkpoints, learned
    windows and calibration settings, small expiring blobs (prefix fingerprints, cuts, seen
    conversations, response owners), locks, quotas and the scope key. SQLite for the
    processes of one machine, Redis across machines."""

    @property
    def usage(self) -> Usage:
        """Its bytes and this process's evictions (proxy/stores/quota.py)."""
        ...

    async def candidates(self, team: str, conversation: str) -> list[Checkpoint]: ...

    async def put(self, team: str, checkpoint: Checkpoint, owner: str = "") -> None:
        """Keep ``checkpoint`` for ``team`` (whose checkpoints: a scope), charged to ``owner``
        (whose share of the store's bytes: proxy/stores/quota.py; empty: ``team``)."""
        ...

    async def learned_windows(self) -> dict[str, int]: ...

    async def put_learned_window(self, model: str, window: int) -> None: ...

    async def forget_learned(self, keys: list[str]) -> None:
        """Forget learned windows and settings by key (an operator's reset)."""
        ...

    async def put_setting(self, key: str, value: int) -> None:
        """Kept with the learned windows (read back by ``learned_windows``), but overwritten:
        a calibration may go up as well as down."""
        ...

    async def get_blob(self, key: str) -> bytes | None: ...

    async def put_blob(
        self, key: str, value: bytes, ttl_seconds: float, owner: str | None = ""
    ) -> None:
        """A value that expires (prefix fingerprints, cuts, recall originals), charged to
        ``owner`` (proxy/stores/quota.py; None: outside the limits)."""
        ...

    async def put_blobs(self, items: list[Blob]) -> None:
        """``put_blob`` for each blob, in one call (proxy/stores/writer.py gathers the request
        path's writes)."""
        ...

    async def acquire(self, key: str, ttl_seconds: float) -> bool: ...

    async def renew(self, key: str, ttl_seconds: float) -> None:
        """A held lock lives ``ttl_seconds`` more (its holder is still at work)."""
        ...

    async def locked(self, key: str) -> bool:
        """Whether someone holds the lock ``key``."""
        ...

    async def take_slot(self, key: str, limit: int, window_seconds: float) -> bool:
        """One of ``key``'s ``limit`` slots per rolling ``window_seconds``, taken at once for
        every process of the store (a team's summarizer calls per hour); False when all the
        window's slots are taken."""
        ...

    async def slots_taken(self, key: str, window_seconds: float) -> int:
        """How many of ``key``'s slots were taken in the last ``window_seconds``."""
        ...

    async def ping(self) -> None:
        """Raise unless the store answers."""
        ...

    async def release(self, key: str) -> None: ...

    async def scope_secret(self, fresh: bytes | None = None) -> bytes:
        """A key made once (from ``fresh``, else random bytes) and kept with the checkpoints,
        shared by every replica of the store: it keys the hash that scopes checkpoints to a
        caller's credential. A replica that holds the key gives it as ``fresh``, so that a
        store that lost it (a Redis restarted empty) gets it back."""
        ...

    async def close(self) -> None: ...
