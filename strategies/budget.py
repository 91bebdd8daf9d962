"""How many tokens a request's messages may use.

``budget = window - reply reserve - tool definitions - safety margin``. The reply reserve is the
request's own ``max_completion_tokens`` / ``max_tokens`` when it sets one, else a default capped
by the model's output limit and by a quarter of the window (so small local models keep room for
their prompt).

**Tool definitions' cost** (``tools_tokens``, for ``tools`` and legacy ``functions``). OpenAI
renders tool definitions into the prompt in a format it does not publish. We follow the OpenAI
cookbook's heuristic for gpt-4o-class models (func_init 7, prop_init 3, prop_key 3, enum_init
-3, enum_item 3, func_end 12) and, so that the estimate errs on the side of more tokens, walk
nested object properties and array items too and charge any schema keyword the heuristic does
not know by its JSON text.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

PER_MESSAGE_BOUND = 4
PER_TOOL_CALL_BOUND = 12


@dataclass(kw_only=True, frozen=True, slots=True)
class Budget:
    window: int
    reserve: int
    tools: int
    margin: int

    @property
    def messages(self) -> int:
        return self.window - self.reserve - self.tools - self.margin

    def explain(self) -> str:
        return (
            f"window {self.window} - reply reserve {self.reserve} - tool definitions "
            f"{self.tools} - safety margin {self.margin} = {self.messages} tokens for messages"
        )


CHAT_OUTPUT_KEYS = ("max_completion_tokens", "max_tokens")


def requested_output(
    payload: Mapping[str, Any], keys: tuple[str, ...] = CHAT_OUTPUT_KEYS
) -> int | None:
    """The request's own reply limit: the first of ``keys`` set to a positive integer."""
    for key in keys:
        value = payload.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def reply_reserve(asked: int | None, default: int, max_output: int | None, window: int) -> int:
    if asked is not None:
        return asked
    cap = min(default, window // 4)
    return min(cap, max_output) if max_output else cap


def byte_bound(
    body_len: int,
    messages: list[dict[str, Any]],
    tokens_per_byte: float,
    worst_image: int,
    priming: int,
) -> int:
    """An upper bound on the messages' tokens that needs no tokenizer.

    Every BPE token spans at least one byte and JSON text is never shorter than the UTF-8 text it
    encodes, so the body's length bounds the text; images, per-message and per-call overheads are
    added on top, all scaled by the counter's worst tokens per byte, plus 3 a message for the
    template markers an estimating counter adds. The result is >= the exact count.
    ``messages`` must have passed validation (dicts; content parts are dicts).
    """
    overhead = 0
    images = 0
    for message in messages:
        overhead += PER_MESSAGE_BOUND
        if not isinstance(message, dict):
            continue
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            overhead += PER_TOOL_CALL_BOUND * len(calls)
        content = message.get("content")
        if isinstance(content, list):
            images += sum(
                1 for p in content if isinstance(p, dict) and p.get("type") == "image_url"
            )
    scaled = math.ceil((body_len + overhead) * tokens_per_byte)
    return scaled + 3 * len(messages) + worst_image * images + priming


# Tool definitions' cost (see the module docstring).
FUNC_INIT = 7
PROP_INIT = 3
PROP_KEY = 3
ENUM_INIT = -3
ENUM_ITEM = 3
FUNC_END = 12

_KNOWN_PROP_KEYS = frozenset({"type", "description", "enum", "properties", "items"})

Encode = Callable[[str], int]


def tools_tokens(tools: object, functions: object, encode: Encode) -> int:
    """Tokens for a request's ``tools`` plus legacy ``functions`` lists (0 when absent)."""
    total = 0
    defs: list[Any] = []
    if isinstance(tools, list):
        # A tool whose ``function`` is not an object (null, say) is priced whole, as its text.
        defs += [_definition(t) for t in tools if isinstance(t, dict)]
    if isinstance(functions, list):
        defs += [f for f in functions if isinstance(f, dict)]
    for fn in defs:
        total += _function_tokens(fn, encode)
    if defs:
        total += FUNC_END
    return total


def _definition(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function")
    return fn if isinstance(fn, dict) else tool


def _function_tokens(fn: dict[str, Any], encode: Encode) -> int:
    name = fn.get("name", "")
    desc = fn.get("description", "")
    n = FUNC_INIT + encode(f"{name}:{desc}")
    params = fn.get("parameters")
    if isinstance(params, dict):
        n += _schema_tokens(params, encode)
    extra = {k: v for k, v in fn.items() if k not in ("name", "description", "parameters")}
    if extra:
        n += encode(orjson.dumps(extra).decode())
    return n


def _schema_tokens(schema: dict[str, Any], encode: Encode) -> int:
    n = 0
    props = schema.get("properties")
    if isinstance(props, dict) and props:
        n += PROP_INIT
        for key, prop in props.items():
            n += PROP_KEY + _property_tokens(str(key), prop, encode)
    items = schema.get("items")
    if isinstance(items, dict):
        n += _schema_tokens(items, encode)
    rest = {k: v for k, v in schema.items() if k not in _KNOWN_PROP_KEYS}
    if rest:
        n += encode(orjson.dumps(rest).decode())
    return n


def _property_tokens(key: str, prop: object, encode: Encode) -> int:
    if not isinstance(prop, dict):
        return encode(f"{key}:{orjson.dumps(prop).decode()}")
    p_type = prop.get("type", "")
    p_desc = prop.get("description", "")
    n = 0
    enum = prop.get("enum")
    if isinstance(enum, list):
        n += ENUM_INIT
        for item in enum:
            n += ENUM_ITEM + encode(str(item))
    type_text = p_type if isinstance(p_type, str) else orjson.dumps(p_type).decode()
    n += encode(f"{key}:{type_text}:{p_desc}")
    return n + _schema_tokens(prop, encode)
