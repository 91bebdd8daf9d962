"""The counts of each conversation's last counted request, reused by its next one.

An agent resends its whole history at every step, so a request's messages are, from the
start, its conversation's last request's, in the same places: mostly the very objects it held
(proxy/formats/reused_items.py), found by an identity check each, where finding a message's count in
the token cache means hashing it first. So the messages the last request also held, from its
first on, take their counts from it, and only the others are priced. The reuse is exact: the
counters are deterministic, and the key names the conversation (its caller's scope and team),
the format, the model and its calibration; the model's counter object itself must be the same.

Held for the most recent conversations, at most the memory budget's share of them in all
(proxy/observe/memory.py): an entry counts as much as the request's own in the memory of
recent items (proxy/formats/reused_items.py: ``entry_bytes``), since it keeps the same messages
alive; with a smaller share, it lets a conversation go first. A cache, per process: without
it a request is counted afresh, with the same counts.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from operator import is_

import orjson

from strategies.messages import Message
from strategies.tokens import Counter, MemoCounter

MAX_BYTES = 64 * 1024 * 1024


@dataclass(kw_only=True, frozen=True, slots=True)
class _Last:
    counter: Counter  # the model's counter the counts were made by
    messages: Sequence[Message]
    counts: list[int]
    size: int  # the request body's bytes (what the memory holds, roughly)


class RecentCounts:
    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self._last: OrderedDict[Hashable, _Last] = OrderedDict()
        self._held = 0
        self._max = max_bytes

    def seed(
        self, key: Hashable, counter: Counter, messages: Sequence[Message], memo: MemoCounter
    ) -> list[int]:
        """Give ``memo`` the counts of ``messages`` that the conversation's last request held
        in the same places, from the first on; those counts. A message is the one held when
        it is the same object (proxy/formats/reused_items.py makes them so) or is written as the
        same JSON (``1`` and ``true`` are equal in Python, not in a count)."""
        last = self._last.get(key)
        if last is None or last.counter is not counter:
            return []
        same = list(map(is_, messages, last.messages))  # as far as the shorter goes
        n = 0
        while n < len(same):  # from one message that is not the same object to the next
            try:
                i = same.index(False, n)
            except ValueError:
                n = len(same)
                break
            if not _same_json(messages[i], last.messages[i]):
                n = i
                break
            n = i + 1
        counts = last.counts[:n]
        memo.seed_many(messages[:n], counts)
        return counts

    def keep(
        self,
        key: Hashable,
        counter: Counter,
        messages: Sequence[Message],
        counts: list[int],
        size: int,
    ) -> None:
        """Remember ``counts``, those of ``messages``, for the next request (``size``: what
        the entry keeps alive); a request larger than the whole memory is not kept."""
        old = self._last.pop(key, None)
        if old is not None:
            self._held -= old.size
        if size > self._max:
            return
        self._last[key] = _Last(counter=counter, messages=list(messages), counts=counts, size=size)
        self._held += size
        while self._held > self._max:
            _, dropped = self._last.popitem(last=False)
            self._held -= dropped.size

    def resize(self, limit: int) -> None:
        """Hold at most ``limit`` bytes (the memory budget's share, proxy/observe/memory.py)."""
        self._max = limit
        while self._held > self._max and self._last:
            _, dropped = self._last.popitem(last=False)
            self._held -= dropped.size

    @property
    def limit(self) -> int:
        return self._max

    @property
    def held(self) -> int:
        return self._held

    def __len__(self) -> int:
        return len(self._last)


def _same_json(a: Message, b: Message) -> bool:
    try:
        return orjson.dumps(a) == orjson.dumps(b)
    except orjson.JSONEncodeError:
        return False
