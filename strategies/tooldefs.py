"""Token cost of the ``tools`` (and legacy ``functions``) definitions of a request.

OpenAI renders tool definitions into the prompt in a format it does not publish. We follow the
OpenAI cookbook's heuristic for gpt-4o-class models (func_init 7, prop_init 3, prop_key 3,
enum_init -3, enum_item 3, func_end 12) and, so that the estimate errs on the side of more tokens,
walk nested object properties and array items too and charge any schema keyword the heuristic does
not know by its JSON text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

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
        defs += [t.get("function", t) for t in tools if isinstance(t, dict)]
    if isinstance(functions, list):
        defs += [f for f in functions if isinstance(f, dict)]
    for fn in defs:
        total += _function_tokens(fn, encode)
    if defs:
        total += FUNC_END
    return total


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
