"""The wire items of each conversation's last request, reused by its next one.

An agent resends its whole history at every step, so a request's leading items (chat messages,
Responses input items, Messages messages) are, item for item, those of its conversation's last
request. Each item's JSON is compared with the last request's (a memory compare): the leading
items that match are replaced in the payload by the last request's very objects. Those were
validated then, so parsing checks them no further (what depends on the whole list, as calls and
their outputs, is still checked over all of it), and the format's view reuses the view messages
it made of them when what they depend on elsewhere in the request is the same (see each
format's ``view``). Being the same objects, they hit the identity caches that follow: a message's
digest (proxy/request/conversations.py), its count (proxy/request/recent.py).

The comparison is of the JSON each item is written as, not of the parsed values: ``1`` and
``true`` parse equal in Python, and the body is written again from these objects when trimmed.
Sharing the objects between requests is sound because nothing changes a parsed item or a view
message in place: the engine and the formats' writers make new ones.

A conversation's entry is found by a fingerprint of its format and first items: two
conversations that begin alike share one (each request checks every item it reuses; sharing
costs only the reuse). Held for the most recent conversations, at most ``MAX_BYTES`` in all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

T = TypeVar("T")
MAX_BYTES = 64 * 1024 * 1024
LEADING = 3  # the items a conversation's fingerprint is made of


@dataclass(slots=True)
class _Entry:
    items: list[Any]  # the last request's items, as its view was made from them
    raw: list[bytes]  # each one's JSON
    derived: list[Any]  # per item, what the view made of it (None: nothing to reuse)
    size: int
    facts: dict[int, tuple[Any, Any]]  # per item object (by id, held): see Reuse.per_item


class RecentItems:
    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self._last: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._held = 0
        self._max = max_bytes
        self._lock = threading.Lock()  # build_request runs in worker threads for large bodies

    def begin(self, fmt: str) -> Reuse:
        """One request's use of the memory (see ``Reuse``)."""
        return Reuse(self, fmt)

    def _find(self, key: Hashable) -> _Entry | None:
        with self._lock:
            return self._last.get(key)

    def _keep(self, key: Hashable, entry: _Entry) -> None:
        with self._lock:
            old = self._last.pop(key, None)
            if old is not None:
                self._held -= old.size
            if entry.size > self._max:
                return
            self._last[key] = entry
            self._held += entry.size
            while self._held > self._max:
                _, dropped = self._last.popitem(last=False)
                self._held -= dropped.size

    def __len__(self) -> int:
        return len(self._last)


@dataclass(slots=True)
class Reuse:
    """A request's use of ``RecentItems``: the format's parse calls ``match`` on the items
    (before checking them), its view ``earlier`` and ``made`` per item, and ``commit`` keeps
    the request's items for the next one, once the request is valid and viewed."""

    recent: RecentItems
    fmt: str
    known: int = 0  # the leading items that are the last request's objects
    known_bytes: int = 0  # their JSON's bytes
    _key: Hashable = None
    _earlier: _Entry | None = None
    _raw: list[bytes] = field(default_factory=list)
    _parsed: list[Any] = field(default_factory=list)  # the items as matched
    _items: list[Any] | None = None
    _derived: list[Any] = field(default_factory=list)
    _facts: dict[int, tuple[Any, Any]] = field(default_factory=dict)

    def match(self, items: list[Any]) -> int:
        """Replace the leading items whose JSON is the last request's by its objects; how many
        were. Every item's JSON is kept for the next request's comparison."""
        try:
            raw = [orjson.dumps(item) for item in items]
        except orjson.JSONEncodeError:  # parse_json writes bodies back: not expected; no reuse
            return 0
        self._key = (self.fmt, *(_fingerprint(item) for item in items[:LEADING]))
        self._raw = raw
        earlier = self._earlier = self.recent._find(self._key)
        known = 0
        if earlier is not None:
            for i, (new, old) in enumerate(zip(raw, earlier.raw, strict=False)):
                if new != old:
                    break
                items[i] = earlier.items[i]
                known = i + 1
        self.known = known
        self.known_bytes = sum(map(len, raw[:known]))
        self._parsed = list(items)
        return known

    def viewing(self, items: list[Any]) -> None:
        """The view is made from ``items`` (the parsed ones, or a copy with markers taken
        out): what it makes is kept per item of that list."""
        self._items = items
        self._derived = [None] * len(items)

    def earlier(self, i: int, item: Any) -> Any:
        """What the last request's view made of ``item``, the ``i``-th item, when it is the
        very object that view saw in that place; else None."""
        entry = self._earlier
        if entry is None or i >= self.known or i >= len(entry.items):
            return None
        return entry.derived[i] if entry.items[i] is item else None

    def made(self, i: int, value: Any) -> None:
        """What the view made of the ``i``-th item, for the next request."""
        self._derived[i] = value

    def per_item(self, make: Callable[[Any], T]) -> Callable[[Any], T]:
        """``make`` (what a format reads off one item, the same for equal items), remembered
        per item object for this request and found again by the next one for the objects it
        shares. A format uses one ``make``."""
        mine = self._facts
        earlier = self._earlier.facts if self._earlier is not None else {}

        def of(item: Any) -> T:
            hit = mine.get(id(item))
            if hit is None or hit[0] is not item:
                hit = earlier.get(id(item))
                if hit is None or hit[0] is not item:
                    hit = (item, make(item))
                mine[id(item)] = hit
            value: T = hit[1]
            return value

        return of

    def commit(self, size: int) -> None:
        """Keep this request's items (its body was ``size`` bytes) for the next one. Items the
        view saw replaced (markers taken out) are kept with no JSON, so nothing matches them."""
        items = self._items
        if items is None or self._key is None or len(items) != len(self._parsed):
            return
        raw = [r if a is b else b"" for r, a, b in zip(self._raw, items, self._parsed, strict=True)]
        entry = _Entry(list(items), raw, self._derived, 2 * size, self._facts)
        self.recent._keep(self._key, entry)


def _fingerprint(value: Any, depth: int = 0) -> Hashable:
    """A short, cheap stand-in for an item: equal items give equal fingerprints (the entry's
    key; different items that give the same one only share the entry)."""
    if isinstance(value, str):
        return value if len(value) <= 64 else (len(value), value[:32], value[-32:])
    if isinstance(value, dict):
        if depth >= 2:
            return ("{}", len(value))
        return tuple((k, _fingerprint(v, depth + 1)) for k, v in value.items())
    if isinstance(value, list):
        if depth >= 2 or not value:
            return ("[]", len(value))
        return ("[]", len(value), _fingerprint(value[0], depth + 1))
    return (type(value).__name__, value) if isinstance(value, int | float | bool) else None
