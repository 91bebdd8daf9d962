"""JSON Lines, read leniently: a transcript's torn last line (a session killed mid-write) or a
line of another shape is skipped, not fatal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson


def objects(path: Path) -> Iterator[dict[str, Any]]:
    """Each line of ``path`` that is a JSON object."""
    with path.open("rb") as lines:
        for line in lines:
            if not line.strip():
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict):
                yield value
