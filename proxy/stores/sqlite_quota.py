"""The SQLite store's bounds (proxy/stores/quota.py): each owner's bytes counted by triggers,
the oldest evicted in the write's own transaction.

Triggers keep ``usage`` (bytes per owner) right whatever deletes a row: an eviction, the TTL's
purge, ``max_entries``, the sweep of expired blobs. A file made before the bounds gets its
columns on opening (its rows charged to the shared owner "", written at 0: the oldest), and
``usage`` is counted afresh from the rows each time the file is opened.
"""

from __future__ import annotations

import sqlite3

from proxy.stores.quota import ROW, Quota, Usage

COLUMNS = (
    ("blobs", "owner", "TEXT DEFAULT ''"),  # NULL: outside the limits (quota.py)
    ("blobs", "at", "REAL NOT NULL DEFAULT 0"),  # when it was written
    ("checkpoints", "owner", "TEXT DEFAULT ''"),
)
BLOB = f"({ROW} + length({{0}}.key) + length({{0}}.value))"
CHECKPOINT = f"({ROW} + length({{0}}.id) + length({{0}}.conversation) + length({{0}}.body))"


def _triggers(table: str, size: str) -> str:
    """``usage`` follows every insert, update and delete of ``table``'s charged rows."""
    add = (
        "INSERT INTO usage SELECT NEW.owner, {new} WHERE NEW.owner IS NOT NULL "
        "ON CONFLICT(owner) DO UPDATE SET bytes = bytes + excluded.bytes;"
    ).format(new=size.format("NEW"))
    take = "UPDATE usage SET bytes = bytes - {old} WHERE owner = OLD.owner;".format(
        old=size.format("OLD")
    )
    return f"""
CREATE TRIGGER IF NOT EXISTS {table}_in AFTER INSERT ON {table} BEGIN {add} END;
CREATE TRIGGER IF NOT EXISTS {table}_out AFTER DELETE ON {table} BEGIN {take} END;
CREATE TRIGGER IF NOT EXISTS {table}_up AFTER UPDATE ON {table} BEGIN {take} {add} END;
"""


SCHEMA = f"""
CREATE TABLE IF NOT EXISTS usage (owner TEXT PRIMARY KEY, bytes INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS blobs_owner_at ON blobs (owner, at);
CREATE INDEX IF NOT EXISTS blobs_at ON blobs (at);
CREATE INDEX IF NOT EXISTS checkpoints_owner_age ON checkpoints (owner, created_at);
{_triggers("blobs", BLOB)}
{_triggers("checkpoints", CHECKPOINT)}
"""
RECOUNT = f"""
DELETE FROM usage;
INSERT INTO usage SELECT owner, sum(bytes) FROM (
    SELECT owner, {BLOB.format("blobs")} AS bytes FROM blobs WHERE owner IS NOT NULL
    UNION ALL
    SELECT owner, {CHECKPOINT.format("checkpoints")} FROM checkpoints WHERE owner IS NOT NULL
) GROUP BY owner;
"""


def prepare(db: sqlite3.Connection) -> None:
    """The bounds' columns, table, indexes and triggers on a file (made now or before them).
    Under the file's write lock: the workers of ``serve --workers`` open it at once, and the
    second finds the columns the first added."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for table, column, kind in COLUMNS:
            have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            if column not in have:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        db.execute("COMMIT")
    except BaseException:  # rolled back on any error, and re-raised
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.executescript(SCHEMA)
    db.executescript(f"BEGIN IMMEDIATE; {RECOUNT} COMMIT;")


def held(db: sqlite3.Connection) -> int:
    (total,) = db.execute("SELECT coalesce(sum(bytes), 0) FROM usage").fetchone()
    return int(total)


def evict(db: sqlite3.Connection, owners: set[str], quota: Quota, usage: Usage) -> None:
    """Within the caller's transaction: the oldest objects of each of ``owners`` past its
    bound, then the oldest of anybody's past the total."""
    for owner in owners:
        while _used(db, owner) > quota.per_owner and _drop_oldest(db, owner):
            usage.evicted_owner += 1
    while held(db) > quota.total and _drop_oldest(db, None):
        usage.evicted_total += 1
    usage.held = held(db)


def _used(db: sqlite3.Connection, owner: str) -> int:
    row = db.execute("SELECT bytes FROM usage WHERE owner=?", (owner,)).fetchone()
    return int(row[0]) if row else 0


def _drop_oldest(db: sqlite3.Connection, owner: str | None) -> bool:
    """Delete the oldest charged object (of ``owner``, or of anybody's); False when none."""
    args: tuple[str, ...] = ()
    if owner is None:
        where = "owner IS NOT NULL"
    else:
        where, args = "owner=?", (owner,)
    blob = db.execute(
        f"SELECT at, key FROM blobs WHERE {where} ORDER BY at LIMIT 1", args
    ).fetchone()
    checkpoint = db.execute(
        f"SELECT created_at, id FROM checkpoints WHERE {where} ORDER BY created_at LIMIT 1", args
    ).fetchone()
    if blob is not None and (checkpoint is None or blob[0] <= checkpoint[0]):
        db.execute("DELETE FROM blobs WHERE key=?", (blob[1],))
    elif checkpoint is not None:
        db.execute("DELETE FROM checkpoints WHERE id=?", (checkpoint[1],))
    else:
        return False
    return True
