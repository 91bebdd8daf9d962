"""The bodies a client sent, stored small: each line says what changed from the previous body
(the fields beside the conversation that changed, how many items of the previous
conversation it kept as they were, and the items after them). Read back, they are the bodies
byte for byte as JSON values."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import orjson


def conversation_key(body: dict[str, Any]) -> str:
    return "input" if "input" in body else "messages"


def write(path: Path, bodies: list[tuple[str, dict[str, Any]]]) -> None:
    lines: list[bytes] = []
    fields: dict[str, Any] = {}
    items: list[Any] = []
    for at, body in bodies:
        key = conversation_key(body)
        now = {k: v for k, v in body.items() if k != key}
        keep = 0
        while keep < min(len(items), len(body[key])) and items[keep] == body[key][keep]:
            keep += 1
        line: dict[str, Any] = {"path": at, "key": key, "keep": keep, "new": body[key][keep:]}
        changed = {k: v for k, v in now.items() if k not in fields or fields[k] != v}
        edits = {k: _edits(fields[k], v) for k, v in changed.items() if k in fields}
        edits = {k: e for k, e in edits.items() if e is not None}
        if edits:
            line["edit"] = edits
        if changed.keys() - edits.keys():
            line["set"] = {k: v for k, v in changed.items() if k not in edits}
        if fields.keys() - now.keys():
            line["unset"] = sorted(fields.keys() - now.keys())
        lines.append(orjson.dumps(line))
        fields, items = now, body[key]
    path.write_bytes(b"\n".join(lines) + b"\n")


def read(path: Path) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    fields: dict[str, Any] = {}
    items: list[Any] = []
    for raw in path.read_bytes().splitlines():
        line = orjson.loads(raw)
        fields = {k: v for k, v in fields.items() if k not in line.get("unset", ())}
        fields |= {k: _edited(fields[k], e) for k, e in line.get("edit", {}).items()}
        fields |= line.get("set", {})
        items = items[: line["keep"]] + line["new"]
        out.append((line["path"], {**fields, line["key"]: items}))
    return out


def _edits(old: Any, new: Any) -> list[tuple[int, int, str]] | None:
    """``new`` as a few edits of ``old``'s JSON text (a field that changed by a few words:
    Claude Code's system prompt and tools after ``/compact``); None when that is no smaller."""
    before, after = orjson.dumps(old).decode(), orjson.dumps(new).decode()
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    edits = [
        (i1, i2, after[j1:j2]) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"
    ]
    return edits if len(orjson.dumps(edits)) * 4 < len(after) else None


def _edited(old: Any, edits: list[tuple[int, int, str]]) -> Any:
    text = orjson.dumps(old).decode()
    for start, end, replacement in reversed(edits):
        text = text[:start] + replacement + text[end:]
    return orjson.loads(text)
