"""What the store may hold on disk: a total and a per-owner bound on its objects' bytes, the
oldest out first.

Every object a request makes the store keep (a checkpoint, a recall original, a sticky cut, a
prefix fingerprint, a seen mark) is charged to its **owner** (the team, or in passthrough the
caller: ``WireRequest.owner``). A write that takes an owner past ``per_owner`` bytes evicts that
owner's oldest objects; one that takes the store past ``total`` evicts the oldest of anybody's.
So one key's flood of 30 MB requests with cleared outputs stays within its own share (its own
oldest go) and never fills the disk that every team's writes need.

Eviction only loses what the proxy can do without: a recall answers that the original is no
longer kept, a conversation is cut afresh or summarized again, a prefix reads "new". Objects
kept outside the limits (``owner`` None): the records of who made each stored response
(proxy/edge/ownership.py), since one evicted would hand its object to anybody; they are small,
one per upstream answer, and expire. Locks, quota slots and learned windows are a few rows.

    Quota    the bounds, from ``checkpoints.max_bytes`` and ``checkpoints.max_bytes_per_team``
    Usage    what a backend saw of itself: bytes held, objects evicted (for /metrics)
    Blob     one blob write: key, value, TTL, owner
    charged  the bytes one object is charged
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

ROW = 64  # an object's own overhead on disk (its row, its index entries), beside key and value


@dataclass(frozen=True, slots=True, kw_only=True)
class Quota:
    total: int = 1 << 30  # bytes, every owner's objects together
    per_owner: int = 1 << 28  # bytes, one owner's objects


@dataclass(slots=True, kw_only=True)
class Usage:
    """What one process saw of the store's bytes and its own evictions (read at scrape)."""

    held: int = 0  # the store's bytes under the limits, as of this process's last write
    evicted_owner: int = 0  # objects this process evicted for an owner's bound
    evicted_total: int = 0  # and for the total's


class Blob(NamedTuple):
    key: str
    value: bytes
    ttl_seconds: float
    # Whose share it takes ("" one shared by requests of no team); None: outside the limits.
    owner: str | None = ""


def charged(*parts: str | bytes) -> int:
    """The bytes an object made of ``parts`` (its key, its value...) is charged."""
    return ROW + sum(len(p) for p in parts)
