"""OpenAI Responses (``POST /v1/responses``) for the one engine.

The view: ``instructions`` is a leading system message (the strict system tier); a user,
system or developer message item is a message; an *assistant run* (consecutive assistant
messages, reasoning items, calls and server-side calls) is one assistant message whose
``tool_calls`` are the run's calls that have outputs, so a reasoning item can never be parted
from the item after it, nor a call from its output; each output is a ``tool`` message. Opaque
items (``compaction``, ``item_reference``, unknown kinds) are units of their own. The running
turn (the newest user message and everything after it) is atomic.

Counting is an upper bound with the model's encoding: what the view shows at chat's rates, plus
every field it does not show (ids, statuses, reasoning and its encrypted content, server calls)
by its JSON text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from proxy.errors import BadRequest, Invariant
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
from proxy.formats.responses_items import (
    SHOWN,
    TEXT_OUTPUTS,
    TEXT_PARTS,
    Facts,
    Pairing,
    answered_key,
    check_input,
    facts_of,
    hidden_text,
    kind_of,
)
from proxy.formats.reused_items import Reuse
from strategies.budget import requested_output
from strategies.messages import LEADING_ROLES, SOURCE, Message

INSTRUCTIONS = "instructions"  # SOURCE of the view message standing for ``instructions``
STRING_INPUT = "input"  # SOURCE of the view message standing for a string ``input``


class ResponsesFormat:
    name = "responses"
    api = "responses"
    path = "responses"
    messages_param = "input"

    def parse(self, body: bytes, reuse: Reuse | None = None) -> dict[str, Any]:
        payload, known = load_items(body, "input", reuse)
        written = check_writable(body, payload, reuse)
        check_request_basics(payload)
        if "input" not in payload:
            raise BadRequest("'input' is required", param="input")
        items = payload["input"]
        facts = reuse.per_item(facts_of) if reuse is not None else facts_of
        resume = reuse.carried() if reuse is not None else None
        pairing = check_input(
            items, self.stateful(payload), known, facts,
            resume if isinstance(resume, Pairing) else None,
        )  # fmt: skip
        if reuse is not None:
            reuse.carry(pairing)
        instructions = payload.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise BadRequest("'instructions' must be a string", param="instructions")
        value = payload.get("max_output_tokens")
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise BadRequest("'max_output_tokens' must be an integer", param="max_output_tokens")
        if value is not None and value < 1:
            raise BadRequest("'max_output_tokens' must be positive", param="max_output_tokens")
        reject_duplicate_keys(body, payload, reuse, written)
        return payload

    def stateful(self, payload: dict[str, Any]) -> bool:
        return bool(payload.get("previous_response_id") or payload.get("conversation"))

    def requested_output(self, payload: dict[str, Any]) -> int | None:
        return requested_output(payload, ("max_output_tokens",))

    def with_output(self, payload: dict[str, Any], limit: int) -> dict[str, Any]:
        return lowered(payload, ("max_output_tokens",), limit)

    def view(self, payload: dict[str, Any], reuse: Reuse | None = None) -> View:
        messages: list[Message] = []
        instructions = payload.get("instructions")
        if isinstance(instructions, str) and instructions:
            messages.append({"role": "system", "content": instructions, SOURCE: INSTRUCTIONS})
        items = payload["input"]
        if isinstance(items, str):
            messages.append({"role": "user", "content": items, SOURCE: STRING_INPUT})
            return View(messages=messages, atomic_current=True, items=1)
        # A message item in a role the proxy does not know, or a system or developer message
        # after the conversation began, is attached to the step it follows and goes with it
        # (strategies/messages.py: units).
        messages += _lower(items, reuse)
        return View(messages=messages, atomic_current=True, items=len(items), hidden=hidden_text())

    def prompt_usage(self, usage: dict[str, Any]) -> int | None:
        return usage_int(usage, "input_tokens")

    def stream_error(self, message: str) -> bytes:
        """Responses' ``error`` event; the ``error`` object in it is what the openai SDK raises
        on."""
        error = {"type": "upstream_error", "code": "stream_interrupted", "message": message}
        event = {"type": "error", "code": "stream_interrupted", "message": message, "param": None}
        return b"\n\nevent: error\ndata: " + orjson.dumps({**event, "error": error}) + b"\n\n"

    def write(self, payload: dict[str, Any], view: View, kept: list[Message]) -> dict[str, Any]:
        originals = {id(m) for m in view.messages}
        out: dict[str, Any] = dict(payload)
        items: list[Any] | str = []
        for m in kept:
            src = m.get(SOURCE)
            if src == INSTRUCTIONS:
                out["instructions"] = m["content"]
            elif src == STRING_INPUT:
                items = m["content"] if isinstance(m["content"], str) else [_new_item(m)]
            elif isinstance(items, str):  # a string input is the one, last, message
                continue
            elif src is None:
                items.append(_new_item(m))
            elif id(m) in originals:
                items.extend(src)
            else:
                items.extend(_rewritten(m, src))
        out["input"] = items
        return out


RESPONSES = ResponsesFormat()


def _lower(items: list[dict[str, Any]], reuse: Reuse | None = None) -> list[Message]:
    facts = reuse.per_item(facts_of) if reuse is not None else facts_of
    if reuse is not None:
        reuse.viewing(items)
    first, out, answered, visible = _continued(items, reuse, facts)
    table = [facts(i) for i in items[first:]]  # each item's kind and ids, found once
    answered |= {f[2] for f in table if f[0] == "output"}
    visible |= {k for f in table for k in f[1]}
    run: list[dict[str, Any]] = []
    run_facts: list[Facts] = []
    start = 0  # the index of the run's first item
    reference: Message | None = None  # the last ``item_reference``, standing for stored items

    def earlier(i: int, item: dict[str, Any]) -> Any:
        return reuse.earlier(i, item) if reuse is not None else None

    def close_run() -> None:
        if not run:
            return
        # A run's message depends on nothing else but which of its calls have outputs.
        keys = tuple(_answer(f[1], answered) for f in run_facts if f[0] == "call")
        made = earlier(start, run[0])
        if made is None or made[0] != keys or not _same(made[1], run):
            made = (keys, tuple(run), _assistant(list(run), run_facts, keys))
        out.append(made[2])
        if reuse is not None:
            reuse.made(start, made)
        run.clear()
        run_facts.clear()

    for i, (item, f) in enumerate(zip(items[first:], table, strict=True), first):
        kind = f[0]
        if kind in ("call", "assistant") or (kind == "message" and item["role"] == "assistant"):
            if not run:
                start = i
            run.append(item)
            run_facts.append(f)
            continue
        close_run()
        if kind != "output" and item.get("type") != "item_reference":
            reference = None  # outputs answer the reference right before them, nothing later
        if kind == "message" or kind == "output":
            made = earlier(i, item)
            if made is None:
                made = _message(item) if kind == "message" else _tool(item)
            out.append(made)
            if reuse is not None:
                reuse.made(i, made)
        if kind == "output":
            key = f[2]
            if key not in visible and reference is not None:
                # Its call is a stored item the reference stands for (``store: true``): the
                # reference carries the call, so the two stay together, kept or dropped.
                stand_in = {
                    "id": key,
                    "type": "function",
                    "function": {"name": "", "arguments": ""},
                }
                reference.setdefault("tool_calls", []).append(stand_in)
        elif kind != "message":  # opaque: a unit of its own, priced whole
            # Before the first user or assistant message it is part of the application's
            # prefix (Codex's ``additional_tools`` item holds its default model's tools), and
            # the prefix is strict: a leading message, never dropped nor summarized.
            prefix = all(m["role"] in LEADING_ROLES for m in out)
            role = "developer" if prefix else "assistant"
            out.append({"role": role, "content": None, SOURCE: [item]})
            if item.get("type") == "item_reference" and role == "assistant":
                reference = out[-1]
    if reuse is not None:  # what the next request may continue from: no run or reference open
        ended = not run and reference is None
        reuse.made_whole((tuple(out), frozenset(answered), frozenset(visible)) if ended else None)
    close_run()
    return out


def _continued(
    items: list[dict[str, Any]], reuse: Reuse | None, facts: Callable[[Any], Facts]
) -> tuple[int, list[Message], set[str | None], set[str]]:
    """Where lowering ``items`` starts, the messages before, and the outputs' and calls' ids
    so far. A request that only appends to its conversation's last one starts after that
    one's items, from its messages, when what they say cannot change: nothing new answers one
    of their calls (a run names the calls that have outputs) and nothing new is a call one of
    their outputs answers (an output whose call is not in the input stands with the
    reference before it). Else from the start."""
    whole = reuse.whole() if reuse is not None else None
    if whole is None:
        return 0, [], set(), set()
    if reuse is None:
        raise Invariant("a whole prefix reused without its reuse")
    done, answered, visible = whole
    new = [facts(i) for i in items[reuse.known :]]
    if any(f[2] in visible for f in new if f[0] == "output") or any(
        k in answered for f in new for k in f[1]
    ):
        return 0, [], set(), set()
    return reuse.known, list(done), set(answered), set(visible)


def _same(a: tuple[Any, ...], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _message(item: dict[str, Any]) -> Message:
    return {"role": item["role"], "content": _content(item["content"]), SOURCE: [item]}


def _tool(item: dict[str, Any]) -> Message:
    return {"role": "tool", "tool_call_id": answered_key(item), **_output(item), SOURCE: [item]}


def _answer(keys: list[str], answered: set[str | None]) -> str | None:
    """The id by which a call's output answers it (one of its ``keys``), when one does."""
    return next((k for k in keys if k in answered), None)


def _assistant(
    run: list[dict[str, Any]], facts: list[Facts], keys: tuple[str | None, ...]
) -> Message:
    """The assistant message a run of items makes; ``keys``: by which id each of its calls is
    answered (None: not in this input), in order."""
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    answers = iter(keys)
    for item, f in zip(run, facts, strict=True):
        if f[0] == "message":
            parts += _text_parts(item["content"])
        elif f[0] == "call":
            key = next(answers)
            if key is not None:
                calls.append({"id": key, "type": "function", "function": _function(item)})
    message: Message = {"role": "assistant", "content": parts or None}
    if calls:
        message["tool_calls"] = calls
    message[SOURCE] = run
    return message


def _function(item: dict[str, Any]) -> dict[str, str]:
    kind = item["type"]
    shown = SHOWN.get(kind, ())
    args: Any = ""
    for field in shown:
        if field != "name" and item.get(field) is not None:
            args = item[field]
    if not isinstance(args, str):
        args = orjson.dumps(args).decode()
    name = item.get("name") if "name" in shown else kind
    return {"name": str(name or kind), "arguments": args}


def _content(content: Any) -> Any:
    """A message's content for the engine: text parts as chat text parts, images as chat
    image parts (priced as images), anything else as it is (priced by its JSON)."""
    if isinstance(content, str):
        return content
    return [_part(p) for p in content]


def _part(part: dict[str, Any]) -> dict[str, Any]:
    key = TEXT_PARTS.get(part["type"])
    if key is not None and isinstance(part.get(key), str):
        return {"type": "text", "text": part[key]}
    if part["type"] == "input_image":
        url = part.get("image_url") or f"file:{part.get('file_id', '')}"
        return {"type": "image_url", "image_url": {"url": url, "detail": part.get("detail")}}
    return part


def _text_parts(content: Any) -> list[dict[str, Any]]:
    """An assistant message's text as chat text parts, one per text part, in order."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [_part(p) for p in content if TEXT_PARTS.get(p.get("type", "")) is not None]


def _output(item: dict[str, Any]) -> dict[str, Any]:
    if item["type"] not in TEXT_OUTPUTS:
        return {"content": None}  # a screenshot, shell output objects: priced whole, never edited
    output = item.get("output")
    if isinstance(output, list) and all(isinstance(p, dict) for p in output):
        return {"content": [_part(p) for p in output if isinstance(p.get("type"), str)]}
    return {"content": output if isinstance(output, str) else orjson.dumps(output).decode()}


def _rewritten(m: Message, src: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items behind a view message whose content the engine rewrote."""
    new = m.get("content")
    if m.get("role") == "tool":
        item = src[0]
        if item["type"] not in TEXT_OUTPUTS:
            return src
        if isinstance(new, str):
            return [{**item, "output": new}]
        return [{**item, "output": _raise_content(item["output"], new)}]
    if m.get("role") != "assistant":
        item = src[0]
        return [{**item, "content": _raise_content(item["content"], new)}]
    texts = text_parts(new)
    out = []
    for item in src:
        if kind_of(item) != "message":
            out.append(item)
        elif isinstance(item["content"], str):
            part = next(texts, None)
            out.append({**item, "content": part["text"]} if part else item)
        else:
            out.append({**item, "content": with_texts(item["content"], texts, _said)})
    return out


def _said(part: dict[str, Any]) -> str | None:
    """The field of an assistant's part the view shows as text (``_text_parts``), or None."""
    key = TEXT_PARTS.get(part.get("type", ""))
    return key if key is not None and isinstance(part.get(key), str) else None


def _shown(part: dict[str, Any]) -> str | None:
    """The field of a part the view shows as a text part's text (``_part``), or None."""
    key = _said(part)
    return key if key is not None or part.get("type") != "text" else "text"  # as it came


def _raise_content(original: Any, new: Any) -> Any:
    if isinstance(original, str) or not isinstance(original, list) or not isinstance(new, list):
        return new
    return with_texts(original, text_parts(new), _shown)


SUMMARY_ROLES = frozenset({"user", "developer", "system"})


def _new_item(m: Message) -> dict[str, Any]:
    """A message the engine made (a summary checkpoint): a message item in the role the policy
    gave it (``summary_role``, by default ``user``: a summary of user-written text never gains
    developer authority), whose bytes depend only on its role and text."""
    content = m.get("content")
    if not isinstance(content, str):
        content = "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict))
    kind = m.get("role")
    return {
        "type": "message",
        "role": kind if kind in SUMMARY_ROLES else "user",
        "content": content,
    }
