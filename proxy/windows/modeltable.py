"""Context windows from litellm's bundled model table, read without importing litellm.

Importing litellm takes seconds; its table is a JSON file inside the package, so we read that
file directly (the same data ``litellm.model_cost`` holds with LITELLM_LOCAL_MODEL_COST_MAP=True).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proxy.config.environment import litellm_dir
from strategies.cost import Prices

TABLE_FILE = "model_prices_and_context_window_backup.json"


@dataclass(frozen=True, slots=True)
class TableEntry:
    window: int
    max_output: int | None
    prices: Prices | None = None


class ModelTable:
    def __init__(self, entries: dict[str, Any]) -> None:
        self._entries = entries

    @classmethod
    def bundled(cls) -> ModelTable:
        base = litellm_dir()
        path = base / TABLE_FILE if base else None
        if path is None or not path.exists():
            return cls({})
        return cls(orjson.loads(path.read_bytes()))

    def names(self) -> list[str]:
        """Every model the table knows."""
        return list(self._entries)

    def lookup(self, model: str) -> TableEntry | None:
        for key in (model, model.split("/", 1)[-1]):
            entry = self._entries.get(key)
            if isinstance(entry, dict):
                window = entry.get("max_input_tokens") or entry.get("max_tokens")
                if isinstance(window, int) and window > 0:
                    out = entry.get("max_output_tokens")
                    return TableEntry(window, out if isinstance(out, int) else None, _prices(entry))
        return None


def _prices(entry: dict[str, Any]) -> Prices | None:
    """Input, cache-read and cache-write prices per token, when the table has an input price."""

    def price(key: str) -> float | None:
        value = entry.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            return None
        return float(value)

    base = price("input_cost_per_token")
    if base is None:
        return None
    return Prices(
        base, price("cache_read_input_token_cost"), price("cache_creation_input_token_cost")
    )
