"""Anthropic's compaction (the ``compact_20260112`` edit of ``context_management``, and the
top-level ``compaction`` parameter), the wire side, for an upstream that does not implement it.
Past the edit's trigger, Anthropic's API answers with a ``compaction`` block (``{"type":
"compaction", "content": <summary>}``) first in the Message's content; with
``pause_after_compaction``, or for a request with ``compaction: {"type": "summarize"}``, that
block alone (``stop_reason`` ``"compaction"``). The client sends the block back, and the API
reads the conversation from it on: everything before the newest block is dropped, the block
stands for it.

    asked(payload)            the payload without the compaction it asks for, and the ask
    expanded(payload)         the conversation as the API reads it: from the newest compaction
                              block on, the block a user message that holds its summary
    block(summary)            the block (content null: a compaction that failed, which the API
                              treats as nothing when it comes back)
    alone(payload, block, usage)
                              the Message of a compaction that pauses: the block alone
    events(message)           that Message as an event stream
    carried_body(body, block), carried_stream(stream, block)
                              the upstream's answer with the block first in its content (the
                              stream's block events right after ``message_start``, every later
                              ``index`` one higher)
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson

from proxy.formats.base import CompactionAsk
from strategies.checkpoints.cut import SummaryText

EDIT = "compact_20260112"
FIELD = "compaction"
EDITS = "context_management"
DEFAULT_TRIGGER = 150_000  # input tokens, as Anthropic's API defaults


def asked(payload: dict[str, Any]) -> tuple[dict[str, Any], CompactionAsk | None]:
    """The payload without the compaction it asks for (the top-level parameter, the edit among
    the other edits), and what it asks (None: nothing)."""
    ask = None
    out = dict(payload)
    if isinstance(out.get(FIELD), dict):
        config = out.pop(FIELD)
        if config.get("type") == "summarize":
            ask = CompactionAsk(at=0, pause=True, only=True, instructions=_text(config))
    elif FIELD in out:
        out.pop(FIELD)  # not a parameter it can read: left out
    management = out.get(EDITS)
    edits = management.get("edits") if isinstance(management, dict) else None
    if isinstance(management, dict) and isinstance(edits, list) and any(map(_is_edit, edits)):
        edit = next(e for e in edits if _is_edit(e))
        out[EDITS] = {**management, "edits": [e for e in edits if not _is_edit(e)]}
        if ask is None:
            trigger = edit.get("trigger")
            value = trigger.get("value") if isinstance(trigger, dict) else None
            at = value if isinstance(value, int) and not isinstance(value, bool) else None
            pause = edit.get("pause_after_compaction") is True
            ask = CompactionAsk(at=at or DEFAULT_TRIGGER, pause=pause, instructions=_text(edit))
    return out, ask


def _is_edit(edit: Any) -> bool:
    return isinstance(edit, dict) and edit.get("type") == EDIT


def _text(config: dict[str, Any]) -> str | None:
    value = config.get("instructions")
    return value if isinstance(value, str) and value.strip() else None


def expanded(payload: dict[str, Any]) -> dict[str, Any]:
    """The conversation from its newest compaction block on (what the API reads), the block a
    user message that holds its summary (merged into the user message after it, when the block
    ended its message); unchanged without one. A block whose content is null (a compaction
    that failed) is dropped, as the API ignores it."""
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return payload
    found = None
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        for j, b in enumerate(content if isinstance(content, list) else []):
            if isinstance(b, dict) and b.get("type") == FIELD:
                found = (i, j)
    if found is None:
        return payload
    i, j = found
    blocks = messages[i]["content"]
    summary = blocks[j].get("content")
    rest = [b for b in blocks[j + 1 :] if not (isinstance(b, dict) and b.get("type") == FIELD)]
    later = list(messages[i + 1 :])
    out: list[Any] = []
    if isinstance(summary, str) and summary:
        text = str(SummaryText(text=summary).message()["content"])
        out.append({"role": "user", "content": [{"type": "text", "text": text}]})
    if rest:
        out.append({**messages[i], "content": rest})
    out.extend(later)
    return {**payload, "messages": _merged(out)}


def _merged(messages: list[Any]) -> list[Any]:
    """Consecutive user messages as one (the summary before the user's next turn)."""
    out: list[Any] = []
    for m in messages:
        previous = out[-1] if out else None
        if previous is not None and previous.get("role") == m.get("role") == "user":
            out[-1] = {**previous, "content": _blocks(previous) + _blocks(m)}
        else:
            out.append(m)
    return out


def _blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def block(summary: str | None) -> dict[str, Any]:
    return {"type": FIELD, "content": summary}


def alone(payload: dict[str, Any], made: dict[str, Any], usage: dict[str, int]) -> dict[str, Any]:
    """The Message of a compaction that pauses: ``made`` alone."""
    return {
        "id": f"msg_{uuid.uuid4().hex}",
        "type": "message",
        "role": "assistant",
        "model": payload.get("model"),
        "content": [made],
        "stop_reason": "compaction",
        "stop_sequence": None,
        "usage": {"input_tokens": usage["input"], "output_tokens": usage["output"]},
    }


def events(message: dict[str, Any]) -> bytes:
    """``message`` (a compaction alone) as Anthropic's event stream."""
    made = message["content"][0]
    usage = message["usage"]
    started = {**message, "content": [], "stop_reason": None,
               "usage": {**usage, "output_tokens": 0}}  # fmt: skip
    sequence: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"message": started}),
        *_block_events(0, made),
        (
            "message_delta",
            {
                "delta": {"stop_reason": "compaction", "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        ),
        ("message_stop", {}),
    ]
    return b"".join(_event(kind, data) for kind, data in sequence)


def _block_events(index: int, made: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    delta = {"type": "compaction_delta", "content": made.get("content")}
    return [
        ("content_block_start", {"index": index, "content_block": {**made, "content": None}}),
        ("content_block_delta", {"index": index, "delta": delta}),
        ("content_block_stop", {"index": index}),
    ]


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"


def carried_body(body: bytes, made: dict[str, Any]) -> bytes:
    """A Message with ``made`` first in its content (anything else left as it came)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        return body
    return orjson.dumps({**data, "content": [made, *data["content"]]})


async def carried_stream(
    stream: AsyncIterator[bytes], made: dict[str, Any]
) -> AsyncIterator[bytes]:
    """A Messages event stream with ``made`` first: its three events right after
    ``message_start``, every later ``index`` one higher; each event relayed as it is whole."""
    pending = b""
    injected = False
    async for chunk in stream:
        pending += chunk
        *whole, pending = pending.split(b"\n\n")
        out = []
        for raw in whole:
            if injected:
                out.append(_shifted(raw))
                continue
            out.append(raw + b"\n\n")
            if _kind(raw) == "message_start":
                out.extend(_event(kind, data) for kind, data in _block_events(0, made))
                injected = True
        if out:
            yield b"".join(out)
    if pending:
        yield _shifted(pending)[:-2] if injected else pending


def _kind(raw: bytes) -> Any:
    data = _data(raw)
    return data.get("type") if isinstance(data, dict) else None


def _data(raw: bytes) -> Any:
    for line in raw.split(b"\n"):
        if line.startswith(b"data:"):
            try:
                return orjson.loads(line[5:].strip())
            except orjson.JSONDecodeError:
                return None
    return None


def _shifted(raw: bytes) -> bytes:
    """One event with its ``index`` one higher (any other event as it came)."""
    data = _data(raw)
    if not isinstance(data, dict) or not isinstance(data.get("index"), int):
        return raw + b"\n\n"
    data["index"] += 1
    lines = [
        b"data: " + orjson.dumps(data) if line.startswith(b"data:") else line
        for line in raw.split(b"\n")
    ]
    return b"\n".join(lines) + b"\n\n"
