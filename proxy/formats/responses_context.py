"""OpenAI Responses ``context_management`` (server-side compaction: ``[{"type": "compaction",
"compact_threshold": N}]``), the wire side, for an upstream that does not implement it. Past
the threshold, OpenAI's API answers with a ``compaction`` output item before the model's reply;
the client keeps it in place of the input it stands for and sends it back. Served, the proxy
makes that item from its own summary (proxy/formats/compaction.py ``item_of``: expanded into a
user message wherever it comes back) and puts it first in the answer.

    asked(payload)              the threshold the body asks for (None: no compaction asked;
                                ``DEFAULT``: asked without one), and the body without the field
    carried_body(body, item)    a Response object with ``item`` first in its output
    carried_stream(stream, item)
                                a Responses event stream with ``item`` first: its two
                                ``output_item`` events right after ``response.in_progress`` (or
                                ``response.created``), every later ``output_index`` one higher and
                                ``sequence_number`` two higher, the final response's output with it
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

FIELD = "context_management"
DEFAULT = 0  # asked without a threshold: the proxy's own (a share of the window)
FINAL = frozenset({"response.completed", "response.incomplete"})
STARTED = ("response.created", "response.in_progress")


def asked(payload: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    """The body without ``context_management``, and the compaction threshold it asked for.
    Entries the proxy cannot read (another type, a malformed one) are left out with the field:
    an upstream without compaction would have ignored or refused them."""
    entries = payload.get(FIELD)
    rest = {k: v for k, v in payload.items() if k != FIELD}
    threshold = None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or entry.get("type") != "compaction":
            continue
        value = entry.get("compact_threshold")
        ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        threshold = value if ok else DEFAULT
    return rest, threshold


def carried_body(body: bytes, made: dict[str, Any]) -> bytes:
    """A Response object with ``made`` (the compaction item) first in its ``output`` (a body
    that is no Response object is left as it came)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if not isinstance(data, dict) or not isinstance(data.get("output"), list):
        return body
    return orjson.dumps({**data, "output": [made, *data["output"]]})


async def carried_stream(
    stream: AsyncIterator[bytes], made: dict[str, Any]
) -> AsyncIterator[bytes]:
    """A Responses event stream with ``made`` (the compaction item) first (see the module's
    docstring). Events are relayed one by one as each is whole."""
    pending = b""
    state = _State(made)
    async for chunk in stream:
        pending += chunk
        *whole, pending = pending.split(b"\n\n")
        out = b"".join(state.event(e) for e in whole)
        if out:
            yield out
    if pending:
        yield state.event(pending, last=True)


class _State:
    """Where the stream is: before the item's events, or after (every event renumbered)."""

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item
        self.injected = False
        self.started = False
        self.last: Any = None  # the sequence number of the event before the item's

    def event(self, raw: bytes, last: bool = False) -> bytes:
        end = b"" if last else b"\n\n"
        lines = raw.split(b"\n")
        at = next((i for i, line in enumerate(lines) if line.startswith(b"data:")), -1)
        data = _json(lines[at][5:]) if at >= 0 else None
        if not isinstance(data, dict):
            return raw + end
        kind = data.get("type")
        out = b""
        if not self.injected and self.started and kind not in STARTED:
            out += self._injected()  # no in_progress event: before the first that is not
        if self.injected:
            lines[at] = b"data: " + orjson.dumps(self._shifted(data))
        else:
            self.last = data.get("sequence_number")
        self.started = self.started or kind in STARTED
        out += b"\n".join(lines) + end
        if kind == "response.in_progress" and not self.injected:
            out += self._injected()
        return out

    def _injected(self) -> bytes:
        """The item's two events, numbered after the event before them."""
        self.injected = True
        out = []
        for n, kind in enumerate(("response.output_item.added", "response.output_item.done")):
            event: dict[str, Any] = {"type": kind}
            if isinstance(self.last, int):
                event["sequence_number"] = self.last + 1 + n
            event.update({"output_index": 0, "item": self.item})
            out.append(b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n")
        return b"".join(out)

    def _shifted(self, data: dict[str, Any]) -> dict[str, Any]:
        data = dict(data)
        if isinstance(data.get("sequence_number"), int):
            data["sequence_number"] += 2
        if isinstance(data.get("output_index"), int):
            data["output_index"] += 1
        response = data.get("response")
        if data.get("type") in FINAL and isinstance(response, dict):
            output = response.get("output")
            if isinstance(output, list):
                data["response"] = {**response, "output": [self.item, *output]}
        return data


def _json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw.strip())
    except orjson.JSONDecodeError:
        return None
