"""JSON Lines, read leniently: a transcript's torn last line (a session killed mid-write) or a
line of another shape is skipped, not fatal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson


def objects(path: Path) -> Iterator[dict[str, Any]]:
    """Each line of ``path`` that is a JSON object."""
    for _, value in numbered(path):
        if value is not None:
            yield value


def numbered(path: Path) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """Each line of ``path`` that is not blank, numbered from 1, with its JSON object (None:
    not one)."""
    with path.open("rb") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                value = None
            yield number, value if isinstance(value, dict) else None
