"""Anthropic's context editing (the Messages body's ``context_management.edits``), for an
upstream that does not implement it: served (the edits applied to the messages, as Anthropic's
API applies them before the model reads) or stripped (the field removed); forwarded as it is
to Anthropic's own API. Strict servers refuse the field ("context_management: Extra inputs are
not permitted"), and Claude Code sends it on every request.

    serve   the payload with each edit applied in order, without the field, and what each
            edit did (``applied_edits``, as Anthropic reports them)
    strip   the payload without the field
    reported_body, reported_stream
            the answer with what the served edits did, where Anthropic's API puts it: the
            Message's ``context_management``, or the stream's ``message_delta`` event's

The edits, as documented:
    clear_thinking_20251015  ``keep``: ``"all"`` (or ``{"type": "all"}``), or
                             ``{"type": "thinking_turns", "value": N}``
                             (default 1): the thinking blocks of all but the newest N assistant
                             turns are removed (an assistant turn: the assistant's messages
                             between two user prompts, tool rounds included; the newest prompt,
                             not answered yet, is none)
    clear_tool_uses_20250919 past ``trigger`` (``input_tokens``, default 100,000, or
                             ``tool_uses``), the oldest tool results are replaced by a
                             placeholder, all but the newest ``keep`` tool uses (default 3) and
                             the ``exclude_tools``; ``clear_tool_inputs`` (true, or tool names)
                             clears their calls' input too; nothing is cleared when less than
                             ``clear_at_least`` input tokens would be
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from proxy.errors import BadRequest

FIELD = "context_management"
THINKING = "clear_thinking_20251015"
TOOL_USES = "clear_tool_uses_20250919"
PLACEHOLDER = "[This tool result was cleared to save context.]"
DEFAULT_TRIGGER = {"type": "input_tokens", "value": 100_000}
DEFAULT_KEEP_TOOL_USES = 3
DEFAULT_THINKING_TURNS = 1

Count = Callable[[Any], int]  # tokens of a JSON value (a message, a block)


def strip(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k != FIELD}


def serve(payload: dict[str, Any], count: Count) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``payload`` with the edits it can apply applied, without the field, and what each did.

    An edit it does not know or cannot read (a newer type, a malformed one) is left out, not
    refused: the upstream, which has no context editing, would have ignored the field or
    refused it whole, so a 400 from the proxy is never better than no proxy."""
    messages: list[Any] = list(payload.get("messages") or [])
    applied: list[dict[str, Any]] = []
    for i, edit in enumerate(_edits(payload.get(FIELD))):
        where = f"{FIELD}.edits.{i}"
        try:
            if edit["type"] == THINKING:
                messages, report = _clear_thinking(messages, edit, where, count)
            else:
                messages, report = _clear_tool_uses(payload, messages, edit, where, count)
        except BadRequest:
            continue  # not an edit it can read: left out
        if report is not None:
            applied.append(report)
    out = strip(payload)
    out["messages"] = messages
    return out, applied


def _edits(value: Any) -> list[dict[str, Any]]:
    """The edits of a known type, in order."""
    edits = value.get("edits") if isinstance(value, dict) else None
    if not isinstance(edits, list):
        return []
    return [e for e in edits if isinstance(e, dict) and e.get("type") in (THINKING, TOOL_USES)]


def _clear_thinking(
    messages: list[Any], edit: dict[str, Any], where: str, count: Count
) -> tuple[list[Any], dict[str, Any] | None]:
    _known(edit, {"type", "keep"}, where)
    keep = edit.get("keep", {"type": "thinking_turns", "value": DEFAULT_THINKING_TURNS})
    if keep == "all" or keep == {"type": "all"}:
        return messages, None
    turns = _amount(keep, "thinking_turns", f"{where}.keep")
    starts = [i for i, m in enumerate(messages) if _prompt(m)]
    # Turn t holds the messages after the t-th user prompt. Only assistant turns count: the
    # newest prompt, not answered yet, is none, and the newest ``turns`` of them keep theirs.
    answered = [
        (i, bisect_right(starts, i))
        for i, m in enumerate(messages)
        if isinstance(m, dict) and m.get("role") == "assistant"
    ]
    assistant_turns = sorted({turn for _, turn in answered})
    kept_turns = set(assistant_turns[-turns:]) if turns else set()
    out, cleared_turns, cleared = list(messages), set(), 0
    for i, turn in answered:
        if turn in kept_turns:
            continue
        m = messages[i]
        content = m.get("content")
        if not isinstance(content, list):
            continue
        kept = [b for b in content if not _thinking(b)]
        if len(kept) == len(content) or not kept:
            continue
        cleared += sum(count(b) for b in content if _thinking(b))
        out[i] = {**m, "content": kept}
        cleared_turns.add(turn)
    if not cleared_turns:
        return messages, None
    report = {
        "type": THINKING,
        "cleared_thinking_turns": len(cleared_turns),
        "cleared_input_tokens": cleared,
    }
    return out, report


def _clear_tool_uses(
    payload: dict[str, Any], messages: list[Any], edit: dict[str, Any], where: str, count: Count
) -> tuple[list[Any], dict[str, Any] | None]:
    fields = {"type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"}
    _known(edit, fields, where)
    trigger = edit.get("trigger", DEFAULT_TRIGGER)
    if not isinstance(trigger, dict) or trigger.get("type") not in ("input_tokens", "tool_uses"):
        raise BadRequest(
            f"{where}.trigger.type: must be 'input_tokens' or 'tool_uses'", param=where
        )
    threshold = _amount(trigger, trigger["type"], f"{where}.trigger")
    keep = _amount(
        edit.get("keep", {"type": "tool_uses", "value": DEFAULT_KEEP_TOOL_USES}),
        "tool_uses",
        f"{where}.keep",
    )
    least = edit.get("clear_at_least")
    at_least = 0 if least is None else _amount(least, "input_tokens", f"{where}.clear_at_least")
    excluded = _names(edit.get("exclude_tools", []), f"{where}.exclude_tools")
    inputs = edit.get("clear_tool_inputs", False)
    if not isinstance(inputs, bool):
        inputs = _names(inputs, f"{where}.clear_tool_inputs")
    uses = [
        (i, k, b)
        for i, m in enumerate(messages)
        if isinstance(m, dict)
        and m.get("role") == "assistant"
        and isinstance(m.get("content"), list)
        for k, b in enumerate(m["content"])
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    if trigger["type"] == "tool_uses":
        reached = len(uses) > threshold
    else:
        frame = [payload.get("system"), payload.get("tools")]
        reached = count(frame) + sum(count(m) for m in messages) > threshold
    if not reached or len(uses) <= keep:
        return messages, None
    results = _results(messages)
    out = list(messages)
    changed: dict[int, list[Any]] = {}
    cleared_uses, cleared = 0, 0
    for i, k, use in uses[: len(uses) - keep]:
        name = use.get("name")
        if name in excluded:
            continue
        found = results.get(use.get("id"))
        if found is None:
            continue
        j, r = found
        block = (changed.get(j) or out[j]["content"])[r]
        if block.get("content") == PLACEHOLDER:
            continue  # cleared by an earlier request's edit, as the client resent it
        blocks = changed.setdefault(j, list(out[j]["content"]))
        cleared += count(block.get("content", "")) - count(PLACEHOLDER)
        blocks[r] = {**block, "content": PLACEHOLDER}
        if inputs is True or (not isinstance(inputs, bool) and name in inputs):
            calls = changed.setdefault(i, list(out[i]["content"]))
            cleared += count(use.get("input", {})) - count({})
            calls[k] = {**use, "input": {}}
        cleared_uses += 1
    if not cleared_uses or (at_least and cleared < at_least):
        return messages, None
    for j, blocks in changed.items():
        out[j] = {**out[j], "content": blocks}
    report = {
        "type": TOOL_USES,
        "cleared_tool_uses": cleared_uses,
        "cleared_input_tokens": max(0, cleared),
    }
    return out, report


def _results(messages: list[Any]) -> dict[Any, tuple[int, int]]:
    """Each ``tool_result``'s message and block index, by the ``tool_use_id`` it answers."""
    found: dict[Any, tuple[int, int]] = {}
    for j, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), list):
            for r, b in enumerate(m["content"]):
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    found[b.get("tool_use_id")] = (j, r)
    return found


def _prompt(m: Any) -> bool:
    """A user message that is a prompt (text, images...), not only tool results."""
    if not isinstance(m, dict) or m.get("role") != "user":
        return False
    content = m.get("content")
    if not isinstance(content, list):
        return True
    return any(not (isinstance(b, dict) and b.get("type") == "tool_result") for b in content)


def _thinking(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking")


def _known(edit: dict[str, Any], fields: set[str], where: str) -> None:
    extra = sorted(set(edit) - fields)
    if extra:
        raise BadRequest(f"{where}.{extra[0]}: Extra inputs are not permitted", param=where)


def _amount(value: Any, kind: str, where: str) -> int:
    if (
        not isinstance(value, dict)
        or value.get("type") != kind
        or not isinstance(value.get("value"), int)
        or isinstance(value.get("value"), bool)
        or value["value"] < 0
    ):
        raise BadRequest(
            f'{where}: must be {{"type": "{kind}", "value": <a non-negative integer>}}',
            param=where,
        )
    amount: int = value["value"]
    return amount


def _names(value: Any, where: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise BadRequest(f"{where}: must be an array of tool names", param=where)
    return frozenset(value)


def json_tokens(count_text: Callable[[str], int]) -> Count:
    """A ``Count`` from a text counter: a value's compact JSON."""

    def count(value: Any) -> int:
        return count_text(value if isinstance(value, str) else orjson.dumps(value).decode())

    return count


def report(applied: list[dict[str, Any]]) -> dict[str, Any]:
    """What the response says of the served edits, where Anthropic's API says it."""
    return {"applied_edits": applied}


def reported_body(body: bytes, applied: list[dict[str, Any]]) -> bytes:
    """A Message (JSON, not encoded) with ``context_management`` set; anything else as it
    is."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if not isinstance(data, dict) or data.get("type") != "message":
        return body
    return orjson.dumps({**data, FIELD: report(applied)})


async def reported_stream(
    stream: AsyncIterator[bytes], applied: list[dict[str, Any]]
) -> AsyncIterator[bytes]:
    """A Messages event stream with ``context_management`` in its ``message_delta`` event, as
    Anthropic's API streams it; every other byte as it came. Chunks are relayed as they come
    up to the ``message_delta`` event, which is held until it is whole."""
    pending = b""
    done = False
    async for chunk in stream:
        if done:
            yield chunk
            continue
        data = pending + chunk
        at = data.find(DELTA)
        if at < 0:
            # Relay all but a tail that begins the event's name (an event's end, usually:
            # nothing is held).
            keep = next((k for k in range(len(DELTA) - 1, 0, -1) if data.endswith(DELTA[:k])), 0)
            pending, out = (data[-keep:], data[:-keep]) if keep else (b"", data)
            if out:
                yield out
            continue
        end = data.find(b"\n\n", at)
        if end < 0:
            if at:
                yield data[:at]
            pending = data[at:]
            continue
        yield data[:at] + _with_report(data[at:end], applied) + data[end:]
        pending, done = b"", True
    if pending:
        yield pending


DELTA = b"event: message_delta"


def _with_report(event: bytes, applied: list[dict[str, Any]]) -> bytes:
    """One ``message_delta`` event (its lines, without the blank line that ends it) with
    ``context_management`` in its data."""
    lines = event.split(b"\n")
    for i, line in enumerate(lines):
        if line.startswith(b"data:"):
            try:
                data = orjson.loads(line[5:])
            except orjson.JSONDecodeError:
                return event
            if not isinstance(data, dict):
                return event
            lines[i] = b"data: " + orjson.dumps({**data, FIELD: report(applied)})
            return b"\n".join(lines)
    return event
