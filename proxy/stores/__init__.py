"""Checkpoint stores: SQLite (embedded default) and Redis (shared by replicas)."""

from __future__ import annotations

from pathlib import Path

from proxy.config import Settings
from strategies.checkpoint import CheckpointStore


def open_store(settings: Settings) -> CheckpointStore:
    config = settings.checkpoints
    if config.backend == "redis":
        from proxy.stores.redis import RedisStore

        assert config.url is not None
        return RedisStore(config.url, config.ttl_seconds, config.max_per_conversation)
    from proxy.stores.sqlite import SqliteStore

    return SqliteStore(
        Path(settings.data_dir) / "checkpoints.sqlite3", config.ttl_seconds, config.max_entries
    )
