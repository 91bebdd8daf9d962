"""The counts of each conversation's last counted request, reused by its next one.

An agent resends its whole history at every step, so a request's messages are, from the
start, equal (as parsed JSON) to its conversation's last request's, in the same places.
Comparing two equal messages is a memory compare; finding a message's count in the token
cache means hashing it first. So the messages the last request also held, from its first on,
take their counts from it, and only the others are priced. The reuse is exact: the counters
are deterministic, and the key names the conversation (its caller's scope and team), the
format, the model and its calibration; the model's counter object itself must be the same.

Held for the most recent conversations, at most ``MAX_BYTES`` of their request bodies in all.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from strategies.messages import Message
from strategies.tokens import Counter, MemoCounter

MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
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
    ) -> int:
        """Give ``memo`` the counts of ``messages`` that the conversation's last request held
        in the same places, from the first on; how many it got."""
        last = self._last.get(key)
        if last is None or last.counter is not counter:
            return 0
        n = 0
        for new, old, count in zip(messages, last.messages, last.counts, strict=False):
            if new is not old and new != old:
                break
            memo.seed(new, count)
            n += 1
        return n

    def keep(
        self,
        key: Hashable,
        counter: Counter,
        messages: Sequence[Message],
        counts: list[int],
        size: int,
    ) -> None:
        """Remember ``counts``, those of ``messages``, for the next request; a request larger
        than the whole memory is not kept."""
        old = self._last.pop(key, None)
        if old is not None:
            self._held -= old.size
        if size > self._max:
            return
        self._last[key] = _Last(counter, list(messages), counts, size)
        self._held += size
        while self._held > self._max:
            _, dropped = self._last.popitem(last=False)
            self._held -= dropped.size
