"""Context windows from litellm's bundled model table, read without importing litellm.

Importing litellm takes seconds; its table is a JSON file inside the package, so we read that
file directly (the same data ``litellm.model_cost`` holds with LITELLM_LOCAL_MODEL_COST_MAP=True).

A model the table does not know yet that an agent CLI asks for by default falls back to the
window the CLI's own model catalog gives it (``CLIENT_CATALOG``): the current Codex asks for
``gpt-6.2-sol`` with no ``-m``, a name litellm's table (and its bundled Codex 0.166.0 catalog)
does not have, so its requests went untrimmed and ``client-setup codex`` had no window to print.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proxy.config.environment import litellm_dir
from strategies.cost import Prices

TABLE_FILE = "model_prices_and_context_window_backup.json"


@dataclass(kw_only=True, frozen=True, slots=True)
class TableEntry:
    window: int
    max_output: int | None
    prices: Prices | None = None
    source: str | None = None  # where the window comes from, when not litellm's table


# Windows of the models agent CLIs ask for that litellm's table lacks: each model's
# ``context_window`` in the CLI's bundled catalog (Codex: codex-rs/models-manager/models.json,
# embedded in its binary), the window the CLI itself budgets and compacts against.
CODEX_CATALOG = "Codex 0.171.0's model catalog"
CLIENT_CATALOG: dict[str, tuple[int, str]] = {
    "gpt-6.2-sol": (500_000, CODEX_CATALOG),  # its default model
    "gpt-6.2-astra": (272_000, CODEX_CATALOG),
}


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
                    return TableEntry(
                        window=window,
                        max_output=out if isinstance(out, int) else None,
                        prices=_prices(entry),
                    )
        known = CLIENT_CATALOG.get(model.split("/", 1)[-1])
        return (
            TableEntry(window=known[0], max_output=None, prices=None, source=known[1])
            if known
            else None
        )


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
