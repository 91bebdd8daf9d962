"""Anthropic Messages (``POST /v1/messages``) for the one engine.

The view: ``system`` is a leading system message (the strict tier). An assistant message is one
assistant message whose ``tool_calls`` are its ``tool_use`` blocks; its thinking, redacted
thinking, server tool and compaction blocks ride along, hidden and never edited. A user message
becomes one ``tool`` message per leading ``tool_result`` block, then one user message for the
rest of its blocks, so a ``tool_use`` and its result stand or fall together and the results stay
first in their message. The running turn (the newest user text and everything after it: the tool
loop still running, with its thinking) is atomic.

Writing back regroups the kept view messages into the messages they came from. A
``cache_control`` breakpoint on a block that was dropped moves to the nearest kept block before
it; no request leaves with more than four. Counting is an upper bound (see ``README``: a
cl100k estimate times a ratio, calibrated per model from the responses' ``usage``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import orjson

from proxy.errors import BadRequest, Invariant
from proxy.formats.anthropic_cache import attach, cap_breakpoints, marks_of
from proxy.formats.anthropic_checks import check_messages, check_system
from proxy.formats.base import (
    View,
    check_request_basics,
    check_writable,
    load_items,
    lowered,
    reject_duplicate_keys,
    text_parts,
    usage_int,
    with_texts,
)
from proxy.formats.reused_items import Reuse
from strategies.budget import requested_output
from strategies.messages import SOURCE, Message

SYSTEM = "system"  # SOURCE of the view message standing for ``system``


class AnthropicFormat:
    name = "anthropic"
    api = "messages"
    path = "messages"
    messages_param = "messages"

    def parse(self, body: bytes, reuse: Reuse | None = None) -> dict[str, Any]:
        payload, known = load_items(body, "messages", reuse)
        written = check_writable(body, payload, reuse)
        check_request_basics(payload, anthropic=True)
        value = payload.get("max_tokens")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise BadRequest("max_tokens: must be a positive integer", param="max_tokens")
        check_system(payload.get("system"))
        check_messages(payload.get("messages"), known)
        reject_duplicate_keys(body, payload, reuse, written)
        return payload

    def stateful(self, payload: dict[str, Any]) -> bool:
        return False

    def requested_output(self, payload: dict[str, Any]) -> int | None:
        return requested_output(payload, ("max_tokens",))

    def with_output(self, payload: dict[str, Any], limit: int) -> dict[str, Any]:
        """``max_tokens`` lowered; a thinking ``budget_tokens`` must stay below it, so it is
        lowered too (never under the API's minimum of 1024)."""
        out = lowered(payload, ("max_tokens",), limit)
        thinking = payload.get("thinking")
        if isinstance(thinking, dict):
            budget = thinking.get("budget_tokens")
            if isinstance(budget, int) and not isinstance(budget, bool) and budget >= limit:
                out["thinking"] = {**thinking, "budget_tokens": max(1024, limit - 1)}
        return out

    def view(self, payload: dict[str, Any], reuse: Reuse | None = None) -> View:
        messages: list[Message] = []
        system = payload.get("system")
        if system:
            messages.append({"role": "system", "content": _content(system), SOURCE: SYSTEM})
        wire = _lower(payload["messages"], reuse)
        messages += wire
        count = len(payload["messages"]) + 1
        # A role other than user and assistant (Claude Code's mid-conversation ``system``
        # messages: its reminders, and the files it re-attaches after its own compaction) is
        # attached to the step it follows, and goes with it (strategies/messages.py: units).
        # The text after a message's tool results continues the tool loop (Claude Code's
        # reminders): not a new task.
        after = frozenset(
            id(m)
            for k, m in enumerate(wire)
            if m["role"] == "user" and k and _same_source(m, wire[k - 1])
        )
        return View(
            messages=messages,
            atomic_current=True,
            items=count,
            hidden=_hidden_text(),
            continuing=after,
        )

    def stream_error(self, message: str) -> bytes:
        """Anthropic's ``error`` event (an ``api_error``), which the anthropic SDK raises."""
        error = {"type": "api_error", "message": message}
        body = orjson.dumps({"type": "error", "error": error})
        return b"\n\nevent: error\ndata: " + body + b"\n\n"

    def prompt_usage(self, usage: dict[str, Any]) -> int | None:
        return usage_int(
            usage, "input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"
        )

    def write(self, payload: dict[str, Any], view: View, kept: list[Message]) -> dict[str, Any]:
        originals = {id(m) for m in view.messages}
        out: list[dict[str, Any]] = []  # {"_of": the original message, "content": blocks}
        marks: list[Any] = []  # breakpoints of dropped blocks, for the nearest kept one before
        pending = iter(view.messages)
        for m in kept:
            if m.get(SOURCE) == SYSTEM:
                continue  # the system prefix is never changed
            src: dict[str, Any] | None = m.get(SOURCE)
            if src is None:  # a message the engine made (a summary checkpoint)
                block = {"type": "text", "text": _text(m)}
                out.append({"_of": None, "role": "user", "content": [block]})
                continue
            for skipped in pending:  # the view messages up to this one; those before it went
                if skipped.get(SOURCE) is src:
                    break
                marks += marks_of(skipped)
            if marks:
                attach(out, marks)
            if src is None:
                raise Invariant("a block of the source message without its source")
            original, source_blocks = src["m"], src["b"]
            blocks = [m["content"]] if source_blocks is None else source_blocks
            if id(m) not in originals:
                blocks = _rewritten(m, source_blocks)
            if out and out[-1]["_of"] is original:
                out[-1]["content"] += blocks
            else:
                out.append({"_of": original, "content": list(blocks)})
        for skipped in pending:
            marks += marks_of(skipped)
        attach(out, marks)
        messages = [_message(o) for o in out]
        cap_breakpoints(payload, messages)
        return {**payload, "messages": messages}


ANTHROPIC = AnthropicFormat()


def _lower(messages: list[dict[str, Any]], reuse: Reuse | None = None) -> list[Message]:
    if reuse is not None:
        reuse.viewing(messages)
    first, out, answered, uses = _continued(messages, reuse)
    answered |= _results(messages[first:])
    for i in range(first, len(messages)):
        m = messages[i]
        # A message's view depends on nothing else but which of its tool uses have results.
        mine = _answered_uses(m, answered)
        made = reuse.earlier(i, m) if reuse is not None else None
        if made is None or made[0] != mine:
            made = (mine, _lower_one(m, answered))
        out += made[1]
        if reuse is not None:
            reuse.made(i, made)
    if reuse is not None:
        uses |= _uses(messages[first:])
        reuse.made_whole((tuple(out), frozenset(answered), frozenset(uses)))
    return out


def _continued(
    messages: list[dict[str, Any]], reuse: Reuse | None
) -> tuple[int, list[Message], set[Any], set[Any]]:
    """Where lowering ``messages`` starts, the view messages before, and the tool results'
    and uses' ids so far. A request that only appends to its conversation's last one starts
    after that one's messages, from its view, unless a new result answers one of their tool
    uses (an assistant message names its answered uses) or a new use is one their results
    answer. Else from the start."""
    whole = reuse.whole() if reuse is not None else None
    if whole is None:
        return 0, [], set(), set()
    if reuse is None:
        raise Invariant("a whole prefix reused without its reuse")
    done, answered, uses = whole
    new = messages[reuse.known :]
    if not _results(new).isdisjoint(uses) or not _uses(new).isdisjoint(answered):
        return 0, [], set(), set()
    return reuse.known, list(done), set(answered), set(uses)


def _results(messages: list[dict[str, Any]]) -> set[Any]:
    """The ids of the tool uses the tool results in ``messages`` answer."""
    return _block_ids(messages, "user", "tool_result", "tool_use_id")


def _uses(messages: list[dict[str, Any]]) -> set[Any]:
    """The ids of the tool uses in ``messages``."""
    return _block_ids(messages, "assistant", "tool_use", "id")


def _block_ids(messages: list[dict[str, Any]], role: str, kind: str, key: str) -> set[Any]:
    return {
        b.get(key)
        for m in messages
        if m["role"] == role and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == kind
    }


def _answered_uses(m: dict[str, Any], answered: set[Any]) -> tuple[bool, ...]:
    if m["role"] != "assistant" or not isinstance(m["content"], list):
        return ()
    return tuple(b.get("id") in answered for b in m["content"] if b.get("type") == "tool_use")


def _lower_one(m: dict[str, Any], answered: set[Any]) -> list[Message]:
    """The view messages of one wire message."""
    content = m["content"]
    if m["role"] not in ("user", "assistant"):  # an opaque instruction, as it came
        blocks = content if isinstance(content, list) else None
        view = _content(content) if blocks is not None else content
        return [{"role": "system", "content": view, SOURCE: {"m": m, "b": blocks}}]
    if isinstance(content, str):
        return [{"role": m["role"], "content": content, SOURCE: {"m": m, "b": None}}]
    if m["role"] == "assistant":
        return [_assistant(m, answered)]
    out: list[Message] = []
    results = 0
    while results < len(content) and content[results].get("type") == "tool_result":
        block = content[results]
        result: Message = {
            "role": "tool",
            "tool_call_id": block.get("tool_use_id"),
            "content": _content(block.get("content", "")),
        }
        if block.get("is_error") is True:
            result["is_error"] = True  # never cleared (strategies/microcompact.py)
        result[SOURCE] = {"m": m, "b": [block]}
        out.append(result)
        results += 1
    rest = content[results:]
    if rest or not results:
        out.append({"role": "user", "content": _content(rest), SOURCE: {"m": m, "b": rest}})
    return out


def _same_source(a: Message, b: Message) -> bool:
    """Whether two view messages come from the same wire message."""
    return bool(a[SOURCE]["m"] is b[SOURCE]["m"])


def _assistant(m: dict[str, Any], answered: set[Any]) -> Message:
    blocks = m["content"]
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {
                "name": b.get("name", ""),
                "arguments": orjson.dumps(b.get("input")).decode(),
            },
        }
        for b in blocks
        if b.get("type") == "tool_use" and b.get("id") in answered
    ]
    view: Message = {"role": "assistant", "content": _content(blocks) or None}
    if calls:
        view["tool_calls"] = calls
    view[SOURCE] = {"m": m, "b": blocks}
    return view


def _content(content: Any) -> Any:
    """Blocks for the engine: text as chat text parts, images as image parts; thinking, tool
    use and every other block are left out (tool use is in ``tool_calls``; the rest hidden)."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            source = block.get("source") or {}
            url = (
                source.get("url") or f"data:{source.get('media_type')};base64,{source.get('data')}"
            )
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _rewritten(m: Message, blocks: list[dict[str, Any]] | None) -> list[Any]:
    """The blocks behind a view message whose text the engine rewrote."""
    new = m.get("content")
    if blocks is None:  # string content
        return [new]
    if m.get("role") == "tool":
        block = blocks[0]
        if isinstance(new, str) or not isinstance(block.get("content"), list):
            return [{**block, "content": new if isinstance(new, str) else _text(m)}]
        return [{**block, "content": with_texts(block["content"], text_parts(new), _text_block)}]
    return with_texts(blocks, text_parts(new), _text_block)


def _text_block(block: dict[str, Any]) -> str | None:
    """A text block is a text part in the view (``_content``)."""
    return "text" if block.get("type") == "text" else None


def _message(o: dict[str, Any]) -> dict[str, Any]:
    original = o["_of"]
    content = o["content"]
    if original is None:
        return {"role": o["role"], "content": content}
    same: dict[str, Any] = original
    if isinstance(same["content"], str):
        text = content[0] if len(content) == 1 and isinstance(content[0], str) else content
        return same if text is same["content"] else {**same, "content": text}
    if len(content) == len(same["content"]) and all(map(operator.is_, content, same["content"])):
        return same  # every block kept as it came
    return {**same, "content": content}


def _text(m: Message) -> str:
    content = m.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def _hidden_text() -> Callable[[Message], str]:
    """Each block the view does not show (thinking and its signature, server tool blocks, ids,
    cache marks), as JSON, memoized per message for the request."""
    memo: dict[int, tuple[Any, str]] = {}

    def hidden(message: Message) -> str:
        src = message.get(SOURCE)
        if not isinstance(src, dict) or src["b"] is None:
            return ""
        key = id(src["b"])
        hit = memo.get(key)
        if hit is None or hit[0] is not src["b"]:
            hit = memo[key] = (src["b"], orjson.dumps([_unshown(b) for b in src["b"]]).decode())
        return hit[1]

    return hidden


def _unshown(block: dict[str, Any]) -> Any:
    kind = block.get("type")
    if kind == "text":
        return {k: v for k, v in block.items() if k != "text"}
    if kind == "tool_use":
        return {k: v for k, v in block.items() if k not in ("input", "name")}
    if kind == "tool_result":
        rest = {k: v for k, v in block.items() if k != "content"}
        content = block.get("content")
        if isinstance(content, list):
            rest["content"] = [_unshown(b) for b in content if isinstance(b, dict)]
        return rest
    if kind == "image":
        return {"type": "image"}
    return block  # thinking, redacted thinking, server tools, documents: whole
