"""A JSON document made short, saying what it left out: each large array as its first and last
items, a count and the schema of what was left out; each large mapping whose values share one
shape (a package index's ``releases``) likewise; each long string as its start and its length.

Deterministic: the digest depends only on the value (key order kept).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_ITEMS = 4  # an array longer than this keeps its first and last items
MAX_ENTRIES = 8  # a mapping of same-shaped values longer than this keeps its first and last
MAX_STRING = 240  # a longer string keeps its start
LEFT_OUT = "…"


@dataclass(slots=True)
class Omitted:
    """What a digest left out, for its header."""

    items: int = 0
    entries: int = 0
    characters: int = 0

    def __bool__(self) -> bool:
        return bool(self.items or self.entries or self.characters)

    def describe(self) -> str:
        parts = []
        if self.items:
            parts.append(f"{self.items} array items")
        if self.entries:
            parts.append(f"{self.entries} mapping entries")
        if self.characters:
            parts.append(f"{self.characters} characters of long strings")
        return ", ".join(parts)


def digest(value: Any) -> tuple[str, Omitted]:
    """``value`` shortened, as compact JSON, and what was left out."""
    omitted = Omitted()
    short = _short(value, omitted)
    return _dumps(short), omitted


def schema(value: Any) -> Any:
    """The shape of a value: a type name, ``{key: shape}`` for a mapping (at most 12 keys),
    ``[shape]`` for an array (of its first item)."""
    if isinstance(value, dict):
        keys = list(value)[:12]
        return {k: schema(value[k]) for k in keys}
    if isinstance(value, list):
        return [schema(value[0])] if value else []
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "string"


def _short(value: Any, omitted: Omitted) -> Any:
    if isinstance(value, list):
        return _short_list(value, omitted)
    if isinstance(value, dict):
        return _short_dict(value, omitted)
    if isinstance(value, str) and len(value) > MAX_STRING:
        omitted.characters += len(value) - MAX_STRING
        return f"{value[:MAX_STRING]}{LEFT_OUT} ({len(value)} characters in all)"
    return value


def _short_list(value: list[Any], omitted: Omitted) -> list[Any]:
    if len(value) <= MAX_ITEMS:
        return [_short(v, omitted) for v in value]
    left = len(value) - 2
    omitted.items += left
    note = f"{LEFT_OUT} {left} more items of {len(value)}, each like {_shape(value[1:-1])}"
    return [_short(value[0], omitted), note, _short(value[-1], omitted)]


def _short_dict(value: dict[str, Any], omitted: Omitted) -> dict[str, Any]:
    keys = list(value)
    shapes = {_dumps(schema(v)) for v in value.values()}
    if len(keys) <= MAX_ENTRIES or len(shapes) > 2:
        return {k: _short(v, omitted) for k, v in value.items()}
    left = len(keys) - 2
    omitted.entries += left
    note = f"{left} more entries, keys {keys[1]!r} .. {keys[-2]!r}, values like " + _shape(
        [value[k] for k in keys[1:-1]]
    )
    return {
        keys[0]: _short(value[keys[0]], omitted),
        LEFT_OUT: note,
        keys[-1]: _short(value[keys[-1]], omitted),
    }


def _shape(values: list[Any]) -> str:
    """The schema of the first of ``values``, as compact JSON."""
    return _dumps(schema(values[0]) if values else None)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
