"""Where a body written as orjson writes its payload holds the items of one of its arrays.

Most clients send compact JSON, as orjson writes it (JSON.stringify, serde_json, httpx). Such a
body is, byte for byte, what orjson writes for the parsed payload: the keys before the array
(the head), the items one after the other with a comma between, then the keys after (the
tail). Checking that costs a write of the head, the tail and the items not known already; it
also shows that the body holds no duplicate key and no nesting orjson cannot write back.
Two such bodies whose arrays begin with the same bytes, through an item's end, begin with the
same items (proxy/formats/reused_items.py).
"""

from __future__ import annotations

from typing import Any

import orjson


def head_length(body: bytes, payload: dict[str, Any], key: str) -> int | None:
    """Where the items of ``payload[key]`` begin in ``body`` when it begins as orjson writes
    the payload; None when it does not."""
    try:
        head = _head(payload, key)
    except orjson.JSONEncodeError:
        return None
    return len(head) if body.startswith(head) else None


def written_after(
    body: bytes, payload: dict[str, Any], key: str, at: int, ends: list[int]
) -> list[int] | None:
    """Where each item of ``payload[key]`` ends in ``body`` (from ``at``), given where the
    first ones end (``ends``, extended in place), when the rest of the body, from there on, is
    orjson's writing of the rest of the payload; None when it is not."""
    items = payload[key]
    cursor = at + (ends[-1] if ends else 0)
    for i in range(len(ends), len(items)):
        item = items[i]
        if type(item) is not dict:  # an object's bytes end it; a number's do not
            return None
        if i:
            if not body.startswith(b",", cursor):
                return None
            cursor += 1
        try:
            raw = orjson.dumps(item)
        except orjson.JSONEncodeError:
            return None
        if not body.startswith(raw, cursor):
            return None
        cursor += len(raw)
        ends.append(cursor - at)
    try:
        tail = _tail(payload, key)
    except orjson.JSONEncodeError:
        return None
    if len(body) != cursor + len(tail) or not body.startswith(tail, cursor):
        return None
    return ends


def _head(payload: dict[str, Any], key: str) -> bytes:
    """How orjson writes ``payload`` up to the first item of its ``key`` array."""
    before: dict[str, Any] = {}
    for k, v in payload.items():
        if k == key:
            break
        before[k] = v
    written = orjson.dumps(before)[:-1]  # without its closing brace
    return written + (b"," if before else b"") + orjson.dumps(key) + b":["


def _tail(payload: dict[str, Any], key: str) -> bytes:
    """How orjson writes ``payload`` from the closing bracket of its ``key`` array on."""
    after: dict[str, Any] = {}
    seen = False
    for k, v in payload.items():
        if seen:
            after[k] = v
        seen = seen or k == key
    return b"]" + (b"," + orjson.dumps(after)[1:] if after else b"}")


def shared_items(body: bytes, at: int, old: bytes, old_at: int, ends: list[int]) -> int:
    """How many items of ``old``'s array (it begins at ``old_at``; its items end at ``ends``,
    from there) are, byte for byte, the items ``body``'s array begins with at ``at``: the same
    bytes from the array's start through an item's end are the same items (bisected; all of
    them, the usual case, in one compare)."""
    start, n, written = old_at, len(ends), memoryview(old)

    def same(i: int) -> bool:  # the first i items
        return body.startswith(written[start : start + ends[i - 1]], at)

    if n == 0 or same(n):
        return n
    low, high = 0, n  # same(low), not same(high)
    while high - low > 1:
        middle = (low + high) // 2
        if same(middle):
            low = middle
        else:
            high = middle
    return low
