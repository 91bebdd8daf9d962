"""The recall tool in each wire format (chat, Responses, Messages): offered to the model, its
calls read from an answer (whole or streamed), and answered by continuing the request.

    reserved(body, payload)   the tool's name in one client request: one the request does
                              not use (a client's own tool may be named as the proxy's)
    offer(fmt, payload, name) the payload with the recall tool among its tools (None: it
                              cannot be offered, as beside legacy ``functions`` or ``n`` > 1)
    scrubbed(raw, streamed, name)
                              an answer without the tool where it echoes the request's tools
                              (a Responses object)
    answer_of(fmt, raw, streamed, name)
                              the answer's recall calls and its assistant turn, from a JSON
                              body or an event stream
    continued(fmt, payload, answer, results)
                              the payload with the answer's turn (its own calls only, not the
                              client's, which were never run) and the recalled outputs appended

The client never sees any of it: the request path answers the recall calls itself and relays
only an answer that makes none (proxy/request/recall.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.formats.base import WireFormat

RECALL = "contextwarden_recall"
# The name, or a numbered one, as a whole JSON string (a tool's name, a call's, any value).
_NAMES = re.compile(rb'"(contextwarden_recall(?:_[0-9]{1,9})?)"')
DESCRIPTION = (
    "Bring back the full original of an earlier tool output of this conversation that was "
    "cleared, shortened or left out to save context. Pass the handle its placeholder names "
    "after 'recall:'; for an output no longer shown at all, pass the file, command or tool it "
    "came from. Use it instead of running the tool again."
)
PARAMETERS = {
    "type": "object",
    "properties": {
        "handle": {
            "type": "string",
            "description": "a placeholder's handle (such as r1a2b3c4d5e6), or a file name or "
            "command the output came from",
        }
    },
    "required": ["handle"],
}


# In the chat shape: what the budget reserves for the tool (proxy/request/budget.py).
RECALL_TOOL = {
    "type": "function",
    "function": {"name": RECALL, "description": DESCRIPTION, "parameters": PARAMETERS},
}


@dataclass(slots=True)
class Answer:
    """An upstream answer's recall calls ((call id, handle)) and its assistant turn: a chat
    message, Responses output items, or a Messages assistant message."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    turn: Any = None


def reserved(body: bytes, payload: dict[str, Any]) -> str:
    """The recall tool's name for one client request (and its continuations): ``RECALL``, or,
    when the request already holds that string (a client's own tool of that name, declared in
    ``tools`` or in an input item as Codex declares its tools, or a call of it in the history),
    the first of ``RECALL_2``, ``RECALL_3``... it does not hold. A client's tool was answered
    by the proxy, its calls never reaching the client (#55, F10): the proxy answers only calls
    of a name no tool of the client's has. Stable over a conversation's requests, so the tools
    the provider caches first stay the same."""
    # Without \u escapes, a string of the body appears in it as written (the name has no other
    # character JSON escapes); with them, the payload is written out again, unescaped.
    text = body if b"\\u" not in body else orjson.dumps(payload)
    used = set(_NAMES.findall(text))
    name, k = RECALL, 1
    while name.encode() in used:
        k += 1
        name = f"{RECALL}_{k}"
    return name


def offer(fmt: WireFormat, payload: dict[str, Any], name: str = RECALL) -> dict[str, Any] | None:
    """``payload`` offering the recall tool as ``name`` (None: not offered; never beside a
    tool of the client's that has that name)."""
    tools = payload.get("tools")
    if tools is not None and not isinstance(tools, list):
        return None
    tools = list(tools or [])
    if any(_tool_name(fmt, t) == name for t in tools):
        return None
    if fmt.name == "chat":
        if "functions" in payload or (payload.get("n") or 1) != 1:
            return None
        function = {"name": name, "description": DESCRIPTION, "parameters": PARAMETERS}
        tool: dict[str, Any] = {"type": "function", "function": function}
    elif fmt.name == "responses":
        tool = {"type": "function", "name": name, "description": DESCRIPTION}
        tool |= {"parameters": PARAMETERS, "strict": False}
    elif fmt.name == "anthropic":
        tool = {"name": name, "description": DESCRIPTION, "input_schema": PARAMETERS}
    else:
        return None
    return {**payload, "tools": [*tools, tool]}


def _tool_name(fmt: WireFormat, tool: Any) -> Any:
    if not isinstance(tool, dict):
        return None
    if fmt.name == "chat":
        fn = tool.get("function")
        return fn.get("name") if isinstance(fn, dict) else None
    return tool.get("name")


def answer_of(fmt: WireFormat, raw: bytes, streamed: bool, name: str = RECALL) -> Answer:
    """The calls of the recall tool, offered as ``name``, that ``raw`` (an answer's body, or
    its whole event stream) makes."""
    try:
        if fmt.name == "chat":
            message = _chat_stream(raw) if streamed else _chat_body(raw)
            return _chat_answer(message, name)
        if fmt.name == "responses":
            items = _responses_stream(raw) if streamed else orjson.loads(raw).get("output")
            return _responses_answer(items if isinstance(items, list) else [], name)
        if fmt.name == "anthropic":
            message = _anthropic_stream(raw) if streamed else orjson.loads(raw)
            return _anthropic_answer(message, name)
    except (orjson.JSONDecodeError, AttributeError, TypeError, KeyError, IndexError):
        pass  # not an answer this module can read: relayed as it is
    return Answer()


def continued(
    fmt: WireFormat, payload: dict[str, Any], answer: Answer, results: list[str]
) -> dict[str, Any]:
    ids = [c[0] for c in answer.calls]
    if fmt.name == "chat":
        outputs = [
            {"role": "tool", "tool_call_id": i, "content": r}
            for i, r in zip(ids, results, strict=True)
        ]
        return {**payload, "messages": [*payload["messages"], answer.turn, *outputs]}
    if fmt.name == "responses":
        given = payload.get("input")
        items = given if isinstance(given, list) else [{"role": "user", "content": given}]
        outputs = [
            {"type": "function_call_output", "call_id": i, "output": r}
            for i, r in zip(ids, results, strict=True)
        ]
        return {**payload, "input": [*items, *answer.turn, *outputs]}
    blocks = [
        {"type": "tool_result", "tool_use_id": i, "content": r}
        for i, r in zip(ids, results, strict=True)
    ]
    user = {"role": "user", "content": blocks}
    return {**payload, "messages": [*payload["messages"], answer.turn, user]}


def scrubbed(raw: bytes, streamed: bool, name: str = RECALL) -> bytes:
    """``raw`` (an answer's body or whole event stream) without the recall tool (offered as
    ``name``) where the answer echoes the request's tools (a Responses object does, in its body
    and in the ``response`` of its stream's events); every other byte as it came."""
    if name.encode() not in raw:
        return raw
    if not streamed:
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
        return orjson.dumps(_without_tool(data, name)) if isinstance(data, dict) else raw
    lines = raw.split(b"\n")
    for k, line in enumerate(lines):
        if line.startswith(b"data:") and name.encode() in line:
            try:
                event = orjson.loads(line[5:].strip())
            except orjson.JSONDecodeError:
                continue
            if isinstance(event, dict) and isinstance(event.get("response"), dict):
                event["response"] = _without_tool(event["response"], name)
                lines[k] = b"data: " + orjson.dumps(event)
    return b"\n".join(lines)


def _without_tool(response: dict[str, Any], name: str) -> dict[str, Any]:
    tools = response.get("tools")
    if not isinstance(tools, list):
        return response
    return {
        **response,
        "tools": [t for t in tools if not (isinstance(t, dict) and t.get("name") == name)],
    }


def _handle(arguments: Any) -> str:
    args = orjson.loads(arguments) if isinstance(arguments, str | bytes) else arguments
    handle = args.get("handle") if isinstance(args, dict) else None
    return handle if isinstance(handle, str) else ""


# chat ----------------------------------------------------------------------------------------


def _chat_body(raw: bytes) -> dict[str, Any]:
    message: dict[str, Any] = orjson.loads(raw)["choices"][0]["message"]
    return message


def _chat_answer(message: dict[str, Any], name: str) -> Answer:
    calls = [c for c in message.get("tool_calls") or [] if c["function"]["name"] == name]
    if not calls:
        return Answer()
    turn = {"role": "assistant", "content": message.get("content"), "tool_calls": calls}
    return Answer([(c["id"], _handle(c["function"].get("arguments"))) for c in calls], turn)


def _chat_stream(raw: bytes) -> dict[str, Any]:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for event in events(raw):
        choices = event.get("choices") or []
        delta = choices[0].get("delta") or {} if choices else {}
        if isinstance(delta.get("content"), str):
            text.append(delta["content"])
        for part in delta.get("tool_calls") or []:
            call = calls.setdefault(
                part.get("index", 0), {"type": "function", "function": {"arguments": ""}}
            )
            if part.get("id"):
                call["id"] = part["id"]
            fn = part.get("function") or {}
            if fn.get("name"):
                call["function"]["name"] = fn["name"]
            call["function"]["arguments"] += fn.get("arguments") or ""
    made = [calls[k] for k in sorted(calls)]
    return {"role": "assistant", "content": "".join(text) or None, "tool_calls": made}


# Responses -----------------------------------------------------------------------------------


def _responses_answer(items: list[Any], name: str) -> Answer:
    recall = [i for i in items if i.get("type") == "function_call" and i.get("name") == name]
    if not recall:
        return Answer()
    # The client's own calls were never run: they go, and the model calls them again if it
    # still wants to. Reasoning and text stay, in order.
    kept = [i for i in items if "call" not in str(i.get("type")) or i in recall]
    return Answer([(i["call_id"], _handle(i.get("arguments"))) for i in recall], kept)


def _responses_stream(raw: bytes) -> list[Any]:
    done: list[Any] = []
    for event in events(raw):
        kind = event.get("type")
        if kind in ("response.completed", "response.incomplete"):
            output = event["response"].get("output")
            if isinstance(output, list) and output:
                return output
        elif kind == "response.output_item.done":
            done.append(event["item"])
    return done


# Messages ------------------------------------------------------------------------------------


def _anthropic_answer(message: dict[str, Any], name: str) -> Answer:
    blocks = message.get("content") or []
    recall = [b for b in blocks if b.get("type") == "tool_use" and b.get("name") == name]
    if not recall:
        return Answer()
    kept = [b for b in blocks if b.get("type") != "tool_use" or b in recall]
    turn = {"role": "assistant", "content": kept}
    return Answer([(b["id"], _handle(b.get("input"))) for b in recall], turn)


def _anthropic_stream(raw: bytes) -> dict[str, Any]:
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    for event in events(raw):
        kind, index = event.get("type"), event.get("index", 0)
        if kind == "content_block_start":
            blocks[index] = dict(event["content_block"])
        elif kind == "content_block_delta":
            _apply_delta(blocks[index], event["delta"], partial.setdefault(index, []))
    for index, parts in partial.items():
        if parts and blocks[index].get("type") == "tool_use":
            blocks[index]["input"] = orjson.loads("".join(parts))
    return {"role": "assistant", "content": [blocks[k] for k in sorted(blocks)]}


def _apply_delta(block: dict[str, Any], delta: dict[str, Any], partial: list[str]) -> None:
    kind = delta.get("type")
    if kind == "text_delta":
        block["text"] = block.get("text", "") + delta["text"]
    elif kind == "thinking_delta":
        block["thinking"] = block.get("thinking", "") + delta["thinking"]
    elif kind == "signature_delta":
        block["signature"] = block.get("signature", "") + delta["signature"]
    elif kind == "input_json_delta":
        partial.append(delta.get("partial_json", ""))


def events(raw: bytes) -> list[dict[str, Any]]:
    """The JSON data of each server-sent event in ``raw`` (``[DONE]`` and other lines left
    out)."""
    out = []
    for line in raw.replace(b"\r\n", b"\n").split(b"\n"):
        if line.startswith(b"data:"):
            data = line[5:].strip()
            if data and data != b"[DONE]":
                try:
                    value = orjson.loads(data)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(value, dict):
                    out.append(value)
    return out
