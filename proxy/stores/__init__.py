"""Checkpoint stores: SQLite (embedded default) and Redis (shared by replicas), always behind
:class:`GuardedStore`, so an outage costs a request a bounded time and never its answer.

A store that cannot be opened does not stop the proxy: a corrupt SQLite file is moved aside and
recreated; an unwritable ``data_dir`` starts the proxy with checkpoints disabled, loudly (a
warning, and ``contextwarden_checkpoints_disabled`` in /metrics).

    protocol.py  the Store protocol: checkpoints, learned windows, calibration, prefixes, locks
    sqlite.py    the embedded store: one SQLite file under ``data_dir``
    redis.py     the shared store, for several replicas
    sentinel.py  its Redis found through Redis Sentinel, followed through failovers
    guarded.py   any store, each call bounded in time and a fault remembered
    writer.py    the request path's blob writes, gathered and written together
    codec.py     checkpoints to and from JSON, one format for every backend
    quota.py     what the store may hold: a total and a per-team bound, the oldest out first
    sqlite_quota.py  the bounds in SQLite: triggers count, the write's transaction evicts
    redis_quota.py   the bounds in Redis: one script per write counts and evicts
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

from proxy.config.settings import Settings
from proxy.errors import Invariant
from proxy.stores.guarded import GuardedStore, StoreFault
from proxy.stores.quota import Quota

if TYPE_CHECKING:
    from proxy.stores.sentinel import SentinelTarget
    from proxy.stores.sqlite import SqliteStore

__all__ = ["GuardedStore", "StoreFault", "open_store"]
log = logging.getLogger("contextwarden.store")


def open_store(settings: Settings) -> GuardedStore:
    config = settings.checkpoints
    timeout = config.timeout_seconds
    if config.backend == "redis":
        from proxy.stores.redis import RedisStore

        at, ttl, most = _redis_at(settings), config.ttl_seconds, config.max_per_conversation
        redis = RedisStore(at, ttl, most, timeout, quota(settings))
        return GuardedStore(redis, timeout)
    path = Path(settings.data_dir) / "checkpoints.sqlite3"
    try:
        return GuardedStore(_sqlite(path, settings, timeout), timeout)
    except (OSError, sqlite3.Error) as exc:
        reason = f"cannot open {path}: {exc}"
        log.warning("CHECKPOINTS DISABLED (summaries fall back to truncation): %s", reason)
        return GuardedStore(None, timeout, disabled=reason)


def quota(settings: Settings) -> Quota:
    """The store's bounds: ``checkpoints.max_bytes``, and per team ``max_bytes_per_team`` (a
    quarter of the total when unset)."""
    config = settings.checkpoints
    return Quota(
        total=config.max_bytes, per_owner=config.max_bytes_per_team or config.max_bytes // 4
    )


def _redis_at(settings: Settings) -> str | SentinelTarget:
    """The Redis of ``checkpoints``: its url, or the Sentinels that name the primary."""
    from proxy.stores.sentinel import SentinelTarget

    config = settings.checkpoints
    if config.url is not None:
        return config.url
    if config.service_name is None:  # validated with sentinel_nodes (proxy/config)
        raise Invariant("a Sentinel store without its service name")
    return SentinelTarget(
        nodes=config.sentinel_nodes,
        service_name=config.service_name,
        sentinel_password=config.sentinel_password,
        password=config.password,
        db=config.db,
    )


def _sqlite(path: Path, settings: Settings, timeout: float) -> SqliteStore:
    from proxy.stores.sqlite import SqliteStore

    config = settings.checkpoints
    try:
        return SqliteStore(path, config.ttl_seconds, config.max_entries, timeout, quota(settings))
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) or not path.exists():
            raise
        aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
        path.rename(aside)
        log.warning("%s is not a usable database (%s); moved to %s", path, exc, aside)
        return SqliteStore(path, config.ttl_seconds, config.max_entries, timeout, quota(settings))
