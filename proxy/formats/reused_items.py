"""The wire items of each conversation's last request, reused by its next one.

An agent resends its whole history at every step, so a request's leading items (chat messages,
Responses input items, Messages messages) are, item for item, those of its conversation's last
request. Each item's JSON is compared with the last request's (a memory compare): the leading
items that match are replaced in the payload by the last request's very objects. Those were
validated then, so parsing checks them no further (what depends on the whole list, as calls and
their outputs, is still checked over all of it), and the format's view reuses the view messages
it made of them when what they depend on elsewhere in the request is the same (see each
format's ``view``). Being the same objects, they hit the identity caches that follow: a message's
digest (proxy/request/conversations.py), its count (proxy/request/reused_counts.py).

The comparison is of the JSON each item is written as, not of the parsed values: ``1`` and
``true`` parse equal in Python, and the body is written again from these objects when trimmed.
Most clients write compact JSON, as orjson does (JSON.stringify, serde_json, httpx). A body that
is, byte for byte, orjson's writing of its payload (proxy/formats/item_spans.py) is compared on its
bytes alone: the items the two bodies' item arrays begin with, byte for byte, are the same JSON
(a few memory compares, bisecting the last request's item ends), and a body that begins as a
kept one does is parsed without them; only the other items are written, to check the body and
find where they end for the next request. Such a body needs no duplicate-key scan nor a
write-back check either (``written``): it *is* its payload written out. Any other body is
parsed whole and has every item written and compared.
Sharing the objects between requests is sound because nothing changes a parsed item or a view
message in place: the engine and the formats' writers make new ones.

A conversation's entry is found by a fingerprint of its format, its caller (a team, or in
passthrough one credential: another caller's entries are never looked at, so no answer comes
faster for what someone else sent) and its first items: two conversations of one caller that
begin alike share one (each request checks every item it reuses; sharing costs only the
reuse). Held for the most recent conversations, at most the memory budget's share of them in
all (``entry_bytes`` measures an entry; proxy/observe/memory.py). A cache, per process: a
request that finds nothing here (its conversation's last request went to another replica) is
parsed whole, with the same result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from proxy.formats.item_spans import head_length, shared_items, written_after
from strategies.bounded_memory import exact

T = TypeVar("T")
MAX_BYTES = 64 * 1024 * 1024
LEADING = 3  # the items a conversation's fingerprint is made of
PROBE = 64  # a kept body is looked for by its first bytes
CANDIDATES = 64  # the kept bodies looked at per first bytes, the most recent
# Below this, a body is parsed whole: finding and keeping its items costs more (about 30 us
# for a four-message chat request) than parsing them does.
REUSE_FROM = 8 * 1024


@dataclass(kw_only=True, slots=True)
class _Entry:
    items: list[Any]  # the last request's items, as its view was made from them
    # Each item's JSON: ``raw`` when compared item by item; else the body, where its item array
    # begins (``at``) and where each item ends in it, from ``at`` (the items it ends may be
    # fewer than ``items``: nothing after them matches)
    raw: list[bytes] | None
    body: bytes
    at: int
    ends: list[int]
    derived: list[Any]  # per item, what the view made of it (None: nothing to reuse)
    size: int
    facts: dict[int, tuple[Any, Any]]  # per item object (by id, held): see Reuse.per_item
    view: Any = None  # what the view made of all of its items together (see Reuse.whole)
    space: Hashable = None  # its format and caller (see RecentItems.begin)
    carry: Any = None  # what its parse carried over all of its items (see Reuse.carried)

    def raw_of(self, i: int) -> bytes | None:
        """The ``i``-th item's JSON; None when it is not kept."""
        if self.raw is not None:
            return self.raw[i] if i < len(self.raw) else None
        if i >= len(self.ends):
            return None
        start = self.at + (self.ends[i - 1] + 1 if i else 0)  # after the comma
        return self.body[start : self.at + self.ends[i]]


class RecentItems:
    def __init__(self, max_bytes: int = MAX_BYTES, min_body: int = 0) -> None:
        self.min_body = min_body  # smaller bodies are parsed whole (the proxy's: REUSE_FROM)
        self._last: OrderedDict[Hashable, _Entry] = OrderedDict()
        # The entries kept with their bodies, by format and their bodies' first PROBE bytes:
        # where a body is looked for before it is parsed (Reuse.load)
        self._bodies: dict[tuple[Hashable, bytes], OrderedDict[Hashable, None]] = {}
        self._held = 0
        self._max = max_bytes
        self._lock = threading.Lock()  # build_request runs in worker threads for large bodies

    def begin(self, fmt: str, caller: Hashable = "") -> Reuse:
        """One request's use of the memory (see ``Reuse``), by ``caller``: its requests reuse
        only what its own requests sent (another team's would answer in less time, telling
        it what they sent)."""
        return Reuse(recent=self, fmt=fmt, caller=caller)

    def _find(self, key: Hashable) -> _Entry | None:
        with self._lock:
            return self._last.get(key)

    def _candidates(self, space: Hashable, body: bytes) -> Iterator[_Entry]:
        """The kept bodies ``body`` may continue (they begin alike), newest first, looked up
        one by one: the first is mostly the one."""
        with self._lock:
            keys = self._bodies.get((space, body[:PROBE]))
            if keys is None:
                return
            newest_first = list(reversed(keys))
        for key in newest_first:
            entry = self._last.get(key)  # one dict look-up: atomic without the lock
            if entry is not None and entry.ends:
                yield entry

    def _keep(self, key: Hashable, entry: _Entry) -> None:
        with self._lock:
            self._drop(key)
            if entry.size > self._max:
                return
            self._last[key] = entry
            self._held += entry.size
            if entry.ends:  # kept with its body
                keys = self._bodies.setdefault((entry.space, entry.body[:PROBE]), OrderedDict())
                keys[key] = None
                if len(keys) > CANDIDATES:
                    keys.popitem(last=False)
            while self._held > self._max:
                self._drop(next(iter(self._last)))

    def _drop(self, key: Hashable) -> None:
        old = self._last.pop(key, None)
        if old is None:
            return
        self._held -= old.size
        probe = (old.space, old.body[:PROBE])
        keys = self._bodies.get(probe)
        if keys is not None:
            keys.pop(key, None)
            if not keys:
                del self._bodies[probe]

    def resize(self, limit: int) -> None:
        """Hold at most ``limit`` bytes (the memory budget's share, proxy/observe/memory.py)."""
        with self._lock:
            self._max = limit
            while self._held > self._max and self._last:
                self._drop(next(iter(self._last)))

    @property
    def limit(self) -> int:
        return self._max

    @property
    def held(self) -> int:
        return self._held

    def __len__(self) -> int:
        return len(self._last)


@dataclass(kw_only=True, slots=True)
class Reuse:
    """A request's use of ``RecentItems``: the format's parse calls ``match`` on the items
    (before checking them), its view ``earlier`` and ``made`` per item, and ``commit`` keeps
    the request's items for the next one, once the request is valid and viewed."""

    recent: RecentItems
    fmt: str
    caller: Hashable = ""
    known: int = 0  # the leading items that are the last request's objects
    known_bytes: int = 0  # their JSON's bytes
    written: bool = False  # the body is, byte for byte, orjson's writing of its payload
    _key: Hashable = None
    _earlier: _Entry | None = None
    _raw: list[bytes] | None = None  # compared item by item: each item's JSON
    _body: bytes = b""  # compared on the body's bytes: where its items are (see _Entry)
    _at: int = 0
    _ends: list[int] = field(default_factory=list)
    _parsed: list[Any] = field(default_factory=list)  # the items as matched
    _items: list[Any] | None = None
    _derived: list[Any] = field(default_factory=list)
    _facts: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    _view: Any = None
    _carry: Any = None

    def load(self, body: bytes, key: str) -> dict[str, Any] | None:
        """``body`` parsed, when it begins as a body kept from a recent request does, up to
        that request's leading items at least: the items the two share byte for byte are that
        request's objects, and only the rest of the body is parsed (the body with those items
        cut out). None when no kept body begins so, or when the body is not its payload
        written out (then it is parsed whole and ``match`` compares its items)."""
        for entry in self.recent._candidates((self.fmt, self.caller), body):
            lead = entry.at + entry.ends[min(LEADING, len(entry.ends)) - 1]
            if len(body) <= lead:
                continue
            # The bytes before the lead's end first: bodies of one client share their first
            # bytes up to its first message, often a long system prompt, and part there.
            if body[max(0, lead - PROBE) : lead] != entry.body[max(0, lead - PROBE) : lead]:
                continue
            if not body.startswith(memoryview(entry.body)[:lead]):
                continue
            known = shared_items(body, entry.at, entry.body, entry.at, entry.ends)
            cut = entry.at + entry.ends[known - 1]
            after = cut + 1 if body.startswith(b",", cut) else cut  # the next item, or "]"
            try:
                payload = orjson.loads(body[: entry.at] + body[after:])
            except orjson.JSONDecodeError:
                return None  # parsed whole, for the error
            if type(payload) is not dict or type(payload.get(key)) is not list:
                return None
            items = payload[key] = entry.items[:known] + payload[key]
            ends = None
            if head_length(body, payload, key) == entry.at:
                ends = written_after(body, payload, key, entry.at, entry.ends[:known])
            if ends is None:  # a key twice, say: parsed whole
                return None
            self._key, self._earlier = self._key_of(items), entry
            self._found(body, entry.at, ends, known)
            self._parsed = list(items)
            return payload
        return None

    def match(self, body: bytes, payload: dict[str, Any], key: str) -> int:
        """Replace the leading items of ``payload[key]`` (a list) whose JSON is the last
        request's by its objects; how many were. What the next request compares with is kept:
        where the items are in ``body``, or each one's JSON."""
        items = payload[key]
        self._key = self._key_of(items)
        earlier = self._earlier = self.recent._find(self._key)
        if not self._match_bytes(body, payload, key, earlier):
            self._match_items(items, earlier)
        self._parsed = list(items)
        return self.known

    def _key_of(self, items: list[Any]) -> Hashable:
        """The conversation's entry: its format, its caller and its first items."""
        return (self.fmt, self.caller, *(_fingerprint(item) for item in items[:LEADING]))

    def _match_bytes(
        self, body: bytes, payload: dict[str, Any], key: str, earlier: _Entry | None
    ) -> bool:
        """The match when ``body`` is orjson's writing of ``payload``, byte for byte: its
        items' array begins after the keys before ``key`` written out, the leading items are
        those whose bytes are the last request's, and every other item, and the keys after,
        are found written where they must be. False (and nothing done) for any other body."""
        items = payload[key]
        at = head_length(body, payload, key)
        if at is None:
            return False
        n = min(len(items), len(earlier.ends)) if earlier is not None else 0
        known = (
            shared_items(body, at, earlier.body, earlier.at, earlier.ends[:n])
            if earlier is not None and n
            else 0
        )
        first = earlier.ends[:known] if earlier is not None else []
        ends = written_after(body, payload, key, at, first)
        if ends is None:
            return False
        if earlier is not None and known:
            items[:known] = earlier.items[:known]
        self._found(body, at, ends, known)
        return True

    def _found(self, body: bytes, at: int, ends: list[int], known: int) -> None:
        """The body is its payload written out, its items ending at ``ends`` (from ``at``), the
        first ``known`` of them the last request's objects."""
        self.known, self.known_bytes, self.written = known, ends[known - 1] if known else 0, True
        self._body, self._at, self._ends, self._raw = body, at, ends, None

    def _match_items(self, items: list[Any], earlier: _Entry | None) -> None:
        """The match item by item: each one written and compared with the last request's."""
        try:
            raw = [orjson.dumps(item) for item in items]
        except orjson.JSONEncodeError:  # the format's parse refuses it as too deep: no reuse
            return
        self._raw = raw
        known = 0
        if earlier is not None:
            for i, new in enumerate(raw):
                kept = earlier.raw_of(i)
                if new != kept:
                    break
                items[i] = earlier.items[i]
                raw[i] = kept  # the kept bytes (orjson's own keep a larger buffer: memo.exact)
                known = i + 1
        self.known, self.known_bytes = known, sum(map(len, raw[:known]))

    def carried(self) -> Any:
        """What the last request's parse carried over all of its items (``carry``), when this
        request only appends to them (they are all among its leading items); else None."""
        entry = self._earlier
        if entry is None or not entry.items or self.known != len(entry.items):
            return None
        return entry.carry

    def carry(self, value: Any) -> None:
        """What the parse found over all of the items, for the next request (``carried``)."""
        self._carry = value

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

    def whole(self) -> Any:
        """What the last request's view made of all of its items together (``made_whole``),
        when every one of them is among the leading items this request shares with it: the
        request only appends. The per-item values and facts of those items are carried over
        for the next request, as if this view had made them again."""
        entry = self._earlier
        if entry is None or entry.view is None or self.known != len(entry.items) or not entry.items:
            return None
        self._derived[: self.known] = entry.derived[: self.known]
        self._facts.update(entry.facts)
        return entry.view

    def made_whole(self, value: Any) -> None:
        """What the view made of all of the items together, for the next request."""
        self._view = value

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
        view saw replaced (markers taken out) are kept with no JSON, so nothing matches them
        (compared on the body's bytes, nothing from the first of them on)."""
        items = self._items
        if items is None or self._key is None or len(items) != len(self._parsed):
            return
        same = [a is b for a, b in zip(items, self._parsed, strict=True)]
        kept = list(items)
        if self._raw is not None:  # the known items' bytes are kept already, the others copied
            raw = [
                (r if i < self.known else exact(r)) if same else b""
                for i, (r, same) in enumerate(zip(self._raw, same, strict=True))
            ]
            held = entry_bytes(self.fmt, size, len(kept))
            entry = _Entry(
                items=kept,
                raw=raw,
                body=b"",
                at=0,
                ends=[],
                derived=self._derived,
                size=held,
                facts=self._facts,
            )
        else:
            ends = self._ends if all(same) else self._ends[: same.index(False)]
            body, at, derived = self._body, self._at, self._derived
            held = entry_bytes(self.fmt, size, len(kept))
            entry = _Entry(
                items=kept,
                raw=None,
                body=body,
                at=at,
                ends=ends,
                derived=derived,
                size=held,
                facts=self._facts,
            )
        entry.space, entry.view, entry.carry = (self.fmt, self.caller), self._view, self._carry
        self.recent._keep(self._key, entry)


def entry_bytes(fmt: str, body: int, items: int) -> int:
    """What a request of ``body`` bytes and ``items`` items keeps alive when it is kept: its
    bytes (or its items' JSON), and per item the parsed item, what the view made of it and
    its facts (measured by tracemalloc over agents' requests and chats: 430-700 bytes an item
    in chat, 1,100-1,400 in Responses, 930-1,650 in Messages; tests/proxy/formats/
    test_reused_items.py holds it to that measure)."""
    return ENTRY_BYTES + body + ITEM_BYTES.get(fmt, max(ITEM_BYTES.values())) * items


ITEM_BYTES = {"chat": 900, "responses": 1600, "anthropic": 1900}
ENTRY_BYTES = 2000


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
