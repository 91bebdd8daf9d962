"""Responses compaction, the wire side (Codex's "remote compaction v2"; codex-rs
core/src/compact_remote_v2.rs): a compaction request is an ordinary ``POST /responses`` whose
input ends with ``{"type": "compaction_trigger"}``; its answer must hold exactly one output item
of type ``compaction`` (``{"type": "compaction", "id": ..., "encrypted_content": ...}``), which
the client keeps in place of the history it summarizes and sends back in every later request.

For an upstream that does not implement it, the proxy answers itself: the item's content is the
proxy's own summary, marked as its own (``MARK``), and wherever such an item comes back it is
expanded into a user message the upstream understands (``expand``). An item the proxy did not
make (OpenAI's encrypted state) is never touched.
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

import orjson

from strategies.checkpoints.cut import SummaryText

TRIGGER = "compaction_trigger"
MARK = "cw-compaction-1:"  # the proxy's own compaction items' content starts with it
MARK_BYTES = b'"' + MARK.encode()


def is_trigger(payload: dict[str, Any]) -> bool:
    """Whether a Responses request asks for a compaction."""
    items = payload.get("input")
    return isinstance(items, list) and any(_kind(i) == TRIGGER for i in items)


def without_trigger(payload: dict[str, Any]) -> dict[str, Any]:
    """The request as the conversation it compacts: its trigger taken out."""
    items = [i for i in payload["input"] if _kind(i) != TRIGGER]
    return {**payload, "input": items}


def item_of(summary: str) -> dict[str, Any]:
    """The compaction item that carries ``summary``."""
    packed = base64.urlsafe_b64encode(orjson.dumps({"summary": summary})).decode()
    return {
        "type": "compaction",
        "id": f"cmp_{uuid.uuid4().hex}",
        "encrypted_content": MARK + packed,
    }


def summary_of(item: Any) -> str | None:
    """The summary a compaction item of the proxy's own carries; None for any other item."""
    if not isinstance(item, dict) or item.get("type") not in ("compaction", "compaction_summary"):
        return None
    content = item.get("encrypted_content")
    if not isinstance(content, str) or not content.startswith(MARK):
        return None
    try:
        data = orjson.loads(base64.urlsafe_b64decode(content[len(MARK) :]))
    except (ValueError, orjson.JSONDecodeError):
        return None
    summary = data.get("summary") if isinstance(data, dict) else None
    return summary if isinstance(summary, str) else None


def expand(body: bytes) -> bytes:
    """``body`` with each compaction item of the proxy's own replaced by a user message that
    holds its summary (framed as the proxy's summaries are); unchanged when it has none (the
    common case costs one scan of the bytes)."""
    if MARK_BYTES not in body:
        return body
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body  # the format's parser says what is wrong with it
    items = payload.get("input") if isinstance(payload, dict) else None
    if not isinstance(items, list):
        return body
    out = []
    for item in items:
        summary = summary_of(item)
        out.append(item if summary is None else _message(summary))
    return orjson.dumps({**payload, "input": out})


def _message(summary: str) -> dict[str, Any]:
    text = str(SummaryText(text=summary).message()["content"])
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def answer(payload: dict[str, Any], item: dict[str, Any], usage: dict[str, int]) -> dict[str, Any]:
    """The Responses object of a compaction answered: one output item, ``item``."""
    return {
        "id": f"resp_{uuid.uuid4().hex}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": payload.get("model"),
        "output": [item],
        "parallel_tool_calls": payload.get("parallel_tool_calls", True),
        "tool_choice": payload.get("tool_choice", "auto"),
        "tools": [],
        "usage": {
            "input_tokens": usage["input"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage["output"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["input"] + usage["output"],
        },
    }


def events(response: dict[str, Any]) -> bytes:
    """``response`` as the event stream the Responses API sends."""
    item = response["output"][0]
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    sequence = [
        ("response.created", {"response": started}),
        ("response.in_progress", {"response": started}),
        ("response.output_item.added", {"output_index": 0, "item": item}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": response}),
    ]
    out = []
    for number, (kind, data) in enumerate(sequence):
        event = {"type": kind, "sequence_number": number, **data}
        out.append(b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n")
    return b"".join(out)


def compacted(body: bytes) -> bool:
    """Whether an upstream's answer (read whole: a JSON object or an event stream) is a
    completed response with exactly one ``compaction`` output item, as Codex requires."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        return data.get("status") == "completed" and _one(data.get("output"))
    done: list[Any] = []
    completed = False
    for line in body.split(b"\n"):
        if not line.startswith(b"data:"):
            continue
        try:
            event = orjson.loads(line[5:].strip())
        except orjson.JSONDecodeError:
            continue
        if not isinstance(event, dict):
            continue
        if event.get("type") == "response.output_item.done":
            done.append(event.get("item"))
        completed = completed or event.get("type") == "response.completed"
    return completed and _one(done)


def _one(output: Any) -> bool:
    return isinstance(output, list) and sum(_kind(i) == "compaction" for i in output) == 1


def _kind(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else None
