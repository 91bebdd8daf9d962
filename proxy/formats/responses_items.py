"""The Responses API's input items: what each kind is to the engine, and the request checks.

Kinds, from the ``openai`` SDK's ``ResponseInputItemParam``:
    message      user, system and developer messages stand alone; assistant messages join the
                 assistant run they belong to
    call         a client-side tool call (``function_call``, ``custom_tool_call``,
                 ``local_shell_call``, ``shell_call``, ``computer_call``, ``apply_patch_call``,
                 and the optional pairs: ``mcp_approval_request``, ``program``,
                 ``tool_search_call``); it travels with its output
    output       what answers a call (``*_output``, ``mcp_approval_response``)
    assistant    reasoning and server-side calls (web search, file search, code interpreter,
                 image generation, MCP calls): part of the assistant run, opaque
    opaque       ``compaction``, ``item_reference`` and unknown kinds: whole units, never edited

And what a view message hides of its items, priced by its JSON text (``hidden_text``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from proxy.errors import BadRequest
from strategies.messages import SOURCE, Message

Kind = Literal["message", "call", "output", "assistant", "opaque"]

# Calls the API rejects without their output ("No tool output found for function call ...").
NEEDS_OUTPUT = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "shell_call",
        "computer_call",
        "apply_patch_call",
    }
)
OPTIONAL_PAIRS = frozenset({"mcp_approval_request", "program", "tool_search_call"})
OUTPUTS = {
    "function_call_output": "function_call",
    "custom_tool_call_output": "custom_tool_call",
    "local_shell_call_output": "local_shell_call",
    "shell_call_output": "shell_call",
    "computer_call_output": "computer_call",
    "apply_patch_call_output": "apply_patch_call",
    "mcp_approval_response": "mcp_approval_request",
    "program_output": "program",
    "tool_search_output": "tool_search_call",
}
# Outputs whose ``output`` is a string or content parts, as the API requires (a number there
# was forwarded, and an upstream that did not check it answered 500).
CALL_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
# Outputs whose ``output`` may be replaced by text (a cleared tool result); the others (a
# screenshot, shell output objects) are never edited.
TEXT_OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "apply_patch_call_output",
    }
)
ASSISTANT_SIDE = frozenset(
    {
        "reasoning",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
    }
)
ROLES = frozenset({"user", "assistant", "system", "developer"})


Facts = tuple[Kind, list[str], str | None]


def kind_of(item: dict[str, Any]) -> Kind:
    kind = item.get("type", "message")
    if kind == "message":
        return "message"
    if kind in NEEDS_OUTPUT or kind in OPTIONAL_PAIRS:
        return "call"
    if kind in OUTPUTS:
        return "output"
    if kind in ASSISTANT_SIDE:
        return "assistant"
    return "opaque"


def call_keys(item: dict[str, Any]) -> list[str]:
    """The ids an output may name to answer this call."""
    if item["type"] == "mcp_approval_request":
        keys = [item.get("id")]
    else:
        keys = [item.get("call_id"), item.get("id")]
    return [k for k in keys if isinstance(k, str) and k]


def answered_key(item: dict[str, Any]) -> str | None:
    """The call id an output answers."""
    if item["type"] == "mcp_approval_response":
        key = item.get("approval_request_id")
    elif item["type"] == "local_shell_call_output":
        key = item.get("call_id") or item.get("id")
    else:
        key = item.get("call_id")
    return key if isinstance(key, str) and key else None


def facts_of(item: dict[str, Any]) -> Facts:
    """What the checks and the view read off an item: its kind, the ids an output may name
    to answer it (a call's), and the call it answers (an output's)."""
    kind = kind_of(item)
    keys = call_keys(item) if kind == "call" else []
    return kind, keys, answered_key(item) if kind == "output" else None


@dataclass(kw_only=True, slots=True)
class Pairing:
    """How the calls and outputs of an input's first ``count`` items pair: the calls by id,
    whether an ``item_reference`` came, the ids answered, the calls that need an output. A
    request that only appends to its conversation's last one resumes from that one's."""

    count: int
    stateful: bool
    calls: dict[str, str] = field(default_factory=dict)
    referenced: bool = False  # an ``item_reference`` before: a stored call the proxy cannot see
    answered: set[str] = field(default_factory=set)
    awaiting: list[tuple[int, dict[str, Any], list[str]]] = field(default_factory=list)

    def resumed(self, known: int, stateful: bool) -> Pairing | None:
        """A copy to go on from, when it covers exactly the ``known`` items."""
        if self.count != known or self.stateful != stateful:
            return None
        return Pairing(
            count=known,
            stateful=stateful,
            calls=dict(self.calls),
            referenced=self.referenced,
            answered=set(self.answered),
            awaiting=list(self.awaiting),
        )


def check_input(
    items: Any,
    stateful: bool,
    known: int = 0,
    facts: Callable[[Any], Facts] = facts_of,
    resume: Pairing | None = None,
) -> Pairing | None:
    """BadRequest naming the first thing wrong with ``input``: not a string or a list of
    objects, an item of no known shape, a call without its id, or (when the proxy sees the
    whole conversation) a call and its output apart. The first ``known`` items passed these
    checks in an earlier request (proxy/formats/reused_items.py): only how calls and outputs pair is
    checked again over them, or not even that when ``resume`` is how they paired then.
    Returns how the whole input pairs (None for a string)."""
    if isinstance(items, str):
        return None
    if not isinstance(items, list):
        raise BadRequest("'input' must be a string or an array of input items", param="input")
    state = resume.resumed(known, stateful) if resume is not None else None
    if state is None:
        state = Pairing(count=0, stateful=stateful)
    calls, answered, awaiting = state.calls, state.answered, state.awaiting
    for i in range(state.count, len(items)):
        item = items[i]
        if i >= known:
            if not isinstance(item, dict):
                raise BadRequest(f"input[{i}] must be an object", param=f"input[{i}]")
            kind = item.get("type", "message")
            if not isinstance(kind, str):
                raise BadRequest(f"input[{i}].type must be a string", param=f"input[{i}].type")
            if kind == "message":
                _check_message(item, f"input[{i}]")
                continue
        sort, keys, answers = facts(item)
        if sort == "message":
            continue
        kind = item["type"]
        if sort == "call":
            if not keys:
                missing = "id" if kind == "mcp_approval_request" else "call_id"
                raise BadRequest(
                    f"input[{i}] ({kind}) has no {missing}", param=f"input[{i}].{missing}"
                )
            for key in keys:
                calls[key] = kind
            if kind in NEEDS_OUTPUT:
                awaiting.append((i, item, keys))
        elif kind == "item_reference":
            state.referenced = True
        elif sort == "output":
            if answers is None:
                raise BadRequest(f"input[{i}] ({kind}) names no call", param=f"input[{i}].call_id")
            if kind in CALL_OUTPUTS and not isinstance(item.get("output"), str | list):
                raise BadRequest(
                    f"input[{i}].output ({kind}) must be a string or an array of content parts",
                    param=f"input[{i}].output",
                )
            if not stateful and not state.referenced and calls.get(answers) != OUTPUTS[kind]:
                raise BadRequest(
                    f"input[{i}] ({kind}) answers {answers!r}, but no {OUTPUTS[kind]} with that "
                    "id comes before it",
                    param=f"input[{i}].call_id",
                )
            answered.add(answers)
    state.count = len(items)
    if stateful:
        return state
    for i, item, keys in awaiting:
        if answered.isdisjoint(keys):
            raise BadRequest(
                f"input[{i}] ({item['type']} {item.get('call_id')!r}) has no output in the "
                "input; send each call with its output",
                param=f"input[{i}]",
            )
    # Every call has its output, and outputs are never taken back: a request resuming from
    # this one checks only the calls it appends, not the whole conversation's again.
    awaiting.clear()
    return state


def _check_message(item: dict[str, Any], where: str) -> None:
    role = item.get("role")
    # A role besides these four is the upstream's to judge: forwarded as it came, in its place
    # (the view pins it, like a Messages ``system`` message inside ``messages``).
    if not isinstance(role, str) or not role:
        raise BadRequest(f"{where}.role must be a non-empty string", param=f"{where}.role")
    content = item.get("content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise BadRequest(f"{where}.content must be a string or an array", param=f"{where}.content")
    for k, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise BadRequest(
                f"{where}.content[{k}] must be an object with a type",
                param=f"{where}.content[{k}]",
            )


# What a view message shows of an item (priced by the model's counter); the rest is hidden.
TEXT_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
SHOWN = {
    "message": ("content",),
    "function_call": ("name", "arguments"),
    "custom_tool_call": ("name", "input"),
    "local_shell_call": ("action",),
    "shell_call": ("action",),
    "computer_call": ("action",),
    "apply_patch_call": ("operation",),
}


def hidden_text() -> Callable[[Message], str]:
    """The view's hidden text: each item's fields the view does not show, as JSON, memoized
    per item for the request."""
    memo: dict[int, tuple[dict[str, Any], str]] = {}

    def hidden(message: Message) -> str:
        src = message.get(SOURCE)
        if not isinstance(src, list):
            return ""
        texts = []
        for item in src:
            hit = memo.get(id(item))
            if hit is None or hit[0] is not item:
                hit = memo[id(item)] = (item, orjson.dumps(_unshown(item)).decode())
            texts.append(hit[1])
        return "\n".join(texts)

    return hidden


def _unshown(item: dict[str, Any]) -> dict[str, Any]:
    """What a view message does not show of ``item``."""
    kind = item.get("type", "message")
    if kind == "message" or (kind in TEXT_OUTPUTS and item.get("output") is not None):
        field = "content" if kind == "message" else "output"
        rest = {k: v for k, v in item.items() if k != field}
        value = item[field]
        if isinstance(value, list):
            rest[field] = [_unshown_part(p) for p in value if isinstance(p, dict)]
        return rest
    shown = SHOWN.get(kind, ())
    if kind_of(item) == "call" and not shown:
        shown = ("name", "arguments")
    return {k: v for k, v in item.items() if k not in shown}


def _unshown_part(part: dict[str, Any]) -> dict[str, Any]:
    key = TEXT_PARTS.get(part.get("type", ""))
    if key is not None and isinstance(part.get(key), str):
        return {k: v for k, v in part.items() if k != key}
    if part.get("type") == "input_image":
        return {k: v for k, v in part.items() if k != "image_url"}
    return {}  # shown as it is


# An item's fields that say what it is and where it belongs rather than what the model reads:
# the upstream bills an item a few tokens of role markers for them, where the proxy's count
# charges their JSON (the hidden text): ids, statuses and Codex's per-item metadata came to
# 40-80 tokens an item, 3% of a Codex request at 16k and 5% with its metadata.
ENVELOPE = (
    "type",
    "id",
    "status",
    "call_id",
    "role",
    "internal_chat_message_metadata_passthrough",
)


def envelope_text(messages: list[Message]) -> str:
    """The envelope fields (``ENVELOPE``) of the items behind ``messages``, as JSON: what the
    proxy's count charges that the upstream's may not."""
    texts = []
    for message in messages:
        src = message.get(SOURCE)
        if not isinstance(src, list):
            continue
        for item in src:
            if isinstance(item, dict):
                fields = {k: item[k] for k in ENVELOPE if k in item}
                if fields:
                    texts.append(orjson.dumps(fields).decode())
    return "\n".join(texts)
