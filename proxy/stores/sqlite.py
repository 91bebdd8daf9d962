"""The embedded checkpoint store: one SQLite file (WAL) under ``data_dir``.

sqlite3 calls block, so writes run in a worker thread, on one connection shared under a lock.
Reads (a conversation's checkpoints, a blob) run on the event loop, on a second, read-only
connection that never waits for a lock: in WAL mode a reader does not wait for the writer, and
a read of these small rows costs tens of microseconds, where a worker thread's round trip costs
about 120 us of CPU and as long again in latency. When the file is locked all the same
(another process holding it exclusively), the read goes to the worker thread and waits there.
Checkpoints older than the TTL are purged, and the oldest go when there are more than
``max_entries``; every object a request made is charged to its owner, the oldest evicted past
the store's bounds (proxy/stores/sqlite_quota.py). Locks (for single-flight summarization) are
rows with an expiry, and quota slots rows taken under the file's write lock, so the processes
of one host sharing the file (``serve --workers``) also summarize a conversation once and share
each team's quota.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from proxy.stores.codec import dump, load
from proxy.stores.quota import Blob, Quota, Usage
from proxy.stores.sqlite_quota import evict, held, prepare
from strategies.checkpoints.chain import Checkpoint

T = TypeVar("T")
BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})

SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    team TEXT NOT NULL, conversation TEXT NOT NULL, id TEXT PRIMARY KEY,
    created_at REAL NOT NULL, body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS checkpoints_conv ON checkpoints (team, conversation);
CREATE INDEX IF NOT EXISTS checkpoints_age ON checkpoints (created_at);
CREATE TABLE IF NOT EXISTS learned_windows (model TEXT PRIMARY KEY, window INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS locks (key TEXT PRIMARY KEY, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (
    key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS slots (key TEXT NOT NULL, taken_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS slots_key ON slots (key, taken_at);
"""


def _in_transaction(db: sqlite3.Connection, write: Callable[[sqlite3.Connection], None]) -> None:
    db.execute("BEGIN")
    try:
        write(db)
        db.execute("COMMIT")
    except BaseException:  # rolled back on any error, a cancellation too, and re-raised
        if db.in_transaction:  # never left open: the next BEGIN would fail
            db.execute("ROLLBACK")
        raise


class SqliteStore:
    def __init__(
        self,
        path: Path,
        ttl_seconds: float,
        max_entries: int,
        busy_timeout: float = 1.0,
        quota: Quota | None = None,
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            path, check_same_thread=False, isolation_level=None, timeout=busy_timeout
        )
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            # Commits append to the WAL without an fsync each (13x faster writes here; the file
            # is synced at checkpoints). A power cut may lose the last writes, never consistency:
            # what this store holds is rebuilt by the next requests (a summary, a fingerprint).
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            prepare(self._db)
        except sqlite3.Error:
            self._db.close()
            raise
        try:  # see the module docstring; busy_timeout 0: a lock is an error, never a wait
            self._reader = sqlite3.connect(
                f"{path.resolve().as_uri()}?mode=ro",
                uri=True,
                check_same_thread=False,
                isolation_level=None,
                timeout=0,
            )
        except sqlite3.Error:
            self._db.close()
            raise
        self._lock = threading.Lock()
        self._ttl = ttl_seconds
        self._max = max_entries
        self._quota = quota or Quota()
        self.usage = Usage(held=held(self._db))
        self.path = path

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                return fn(self._db)

        return await asyncio.to_thread(locked)

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` on the read-only connection, here on the event loop; in the worker thread
        when the file is locked (see the module docstring)."""
        try:
            return fn(self._reader)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode not in BUSY:
                raise
        return await self._run(fn)

    async def candidates(self, team: str, conversation: str) -> list[Checkpoint]:
        cutoff = time.time() - self._ttl
        rows = await self._read(
            lambda db: db.execute(
                "SELECT body FROM checkpoints WHERE team=? AND conversation=? AND created_at>=?",
                (team, conversation, cutoff),
            ).fetchall()
        )
        return [load(r[0]) for r in rows]

    async def put(self, team: str, checkpoint: Checkpoint, owner: str = "") -> None:
        charged = owner or team

        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO checkpoints (team, conversation, id, created_at, body, owner) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET team=excluded.team, "
                "conversation=excluded.conversation, created_at=excluded.created_at, "
                "body=excluded.body, owner=excluded.owner",
                (
                    team,
                    checkpoint.conversation,
                    checkpoint.id,
                    checkpoint.created_at,
                    dump(checkpoint),
                    charged,
                ),
            )
            db.execute("DELETE FROM checkpoints WHERE created_at < ?", (time.time() - self._ttl,))
            db.execute(
                "DELETE FROM checkpoints WHERE id IN (SELECT id FROM checkpoints "
                "ORDER BY created_at DESC LIMIT -1 OFFSET ?)",
                (self._max,),
            )
            evict(db, {charged}, self._quota, self.usage)

        await self._run(lambda db: _in_transaction(db, write))

    async def learned_windows(self) -> dict[str, int]:
        rows = await self._run(
            lambda db: db.execute("SELECT model, window FROM learned_windows").fetchall()
        )
        return {str(m): int(w) for m, w in rows}

    async def put_learned_window(self, model: str, window: int) -> None:
        await self._run(
            lambda db: db.execute(
                "INSERT INTO learned_windows VALUES (?, ?) ON CONFLICT(model) "
                "DO UPDATE SET window=min(window, excluded.window)",
                (model, window),
            )
        )

    async def forget_learned(self, keys: list[str]) -> None:
        """Forget learned windows and settings (an operator's reset)."""

        def forget(db: sqlite3.Connection) -> None:
            db.executemany("DELETE FROM learned_windows WHERE model=?", [(k,) for k in keys])

        await self._run(forget)

    async def put_setting(self, key: str, value: int) -> None:
        await self._run(
            lambda db: db.execute(
                "INSERT INTO learned_windows VALUES (?, ?) ON CONFLICT(model) "
                "DO UPDATE SET window=excluded.window",
                (key, value),
            )
        )

    async def get_blob(self, key: str) -> bytes | None:
        def get(db: sqlite3.Connection) -> bytes | None:
            row = db.execute(
                "SELECT value FROM blobs WHERE key=? AND expires_at>=?", (key, time.time())
            ).fetchone()
            return bytes(row[0]) if row else None

        return await self._read(get)

    async def put_blob(
        self, key: str, value: bytes, ttl_seconds: float, owner: str | None = ""
    ) -> None:
        await self.put_blobs([Blob(key, value, ttl_seconds, owner)])

    async def put_blobs(self, items: list[Blob]) -> None:
        def put(db: sqlite3.Connection) -> None:
            now = time.time()
            rows = [(b.key, b.value, now + b.ttl_seconds, b.owner, now) for b in items]
            db.executemany(
                "INSERT INTO blobs (key, value, expires_at, owner, at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value, "
                "expires_at=excluded.expires_at, owner=excluded.owner, at=excluded.at",
                rows,
            )
            if secrets.randbelow(256) < len(rows):  # one write in 256, sweep the expired
                db.execute("DELETE FROM blobs WHERE expires_at<?", (now,))
            owners = {b.owner for b in items if b.owner is not None}
            evict(db, owners, self._quota, self.usage)

        # One transaction: one commit for all of them, and their evictions.
        await self._run(lambda db: _in_transaction(db, put))

    async def acquire(self, key: str, ttl_seconds: float) -> bool:
        def take(db: sqlite3.Connection) -> bool:
            now = time.time()
            db.execute("DELETE FROM locks WHERE key=? AND expires_at<?", (key, now))
            cur = db.execute("INSERT OR IGNORE INTO locks VALUES (?, ?)", (key, now + ttl_seconds))
            return cur.rowcount == 1

        return await self._run(take)

    async def release(self, key: str) -> None:
        await self._run(lambda db: db.execute("DELETE FROM locks WHERE key=?", (key,)))

    async def renew(self, key: str, ttl_seconds: float) -> None:
        def renew(db: sqlite3.Connection) -> None:
            now = time.time()
            db.execute(  # a lock that lapsed is nobody's to renew
                "UPDATE locks SET expires_at=? WHERE key=? AND expires_at>=?",
                (now + ttl_seconds, key, now),
            )

        await self._run(renew)

    async def locked(self, key: str) -> bool:
        now = time.time()
        row = await self._read(
            lambda db: db.execute(
                "SELECT 1 FROM locks WHERE key=? AND expires_at>=?", (key, now)
            ).fetchone()
        )
        return row is not None

    async def take_slot(self, key: str, limit: int, window_seconds: float) -> bool:
        def take(db: sqlite3.Connection) -> bool:
            now = time.time()
            db.execute("BEGIN IMMEDIATE")  # the file's write lock: one process counts at once
            try:
                db.execute(
                    "DELETE FROM slots WHERE key=? AND taken_at<=?", (key, now - window_seconds)
                )
                (taken,) = db.execute("SELECT count(*) FROM slots WHERE key=?", (key,)).fetchone()
                if taken < limit:
                    db.execute("INSERT INTO slots VALUES (?, ?)", (key, now))
                db.execute("COMMIT")
            except BaseException:  # rolled back on any error, and re-raised
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            return bool(taken < limit)

        return await self._run(take)

    async def slots_taken(self, key: str, window_seconds: float) -> int:
        since = time.time() - window_seconds
        row = await self._read(
            lambda db: db.execute(
                "SELECT count(*) FROM slots WHERE key=? AND taken_at>?", (key, since)
            ).fetchone()
        )
        return int(row[0])

    async def ping(self) -> None:
        await self._read(lambda db: db.execute("SELECT 1").fetchone())

    async def scope_secret(self, fresh: bytes | None = None) -> bytes:
        def get(db: sqlite3.Connection) -> bytes:
            made = fresh or secrets.token_bytes(32)
            db.execute("INSERT OR IGNORE INTO meta VALUES ('scope_secret', ?)", (made,))
            row = db.execute("SELECT value FROM meta WHERE key='scope_secret'").fetchone()
            return bytes(row[0])

        return await self._run(get)

    async def close(self) -> None:
        self._reader.close()
        await self._run(lambda db: db.close())

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"
