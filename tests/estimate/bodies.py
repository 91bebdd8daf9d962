"""The bodies a client sent, stored small: each line says what changed from the previous body
(the fields beside the conversation when they changed, how many items of the previous
conversation it kept as they were, and the items after them). Read back, they are the bodies
byte for byte as JSON values."""

from __future__ import annotations

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
        if now != fields:
            line["fields"] = now
        lines.append(orjson.dumps(line))
        fields, items = now, body[key]
    path.write_bytes(b"\n".join(lines) + b"\n")


def read(path: Path) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    fields: dict[str, Any] = {}
    items: list[Any] = []
    for raw in path.read_bytes().splitlines():
        line = orjson.loads(raw)
        fields = line.get("fields", fields)
        items = items[: line["keep"]] + line["new"]
        out.append((line["path"], {**fields, line["key"]: items}))
    return out
