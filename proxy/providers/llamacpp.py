"""llama.cpp's server: ``/props`` states a slot's context.

    llama.cpp      ``GET /props``: ``default_generation_settings.n_ctx``, a slot's context (the
                   ``-c`` total divided among the ``--parallel`` slots); tools/server

Under ``auto``, a list with a card ``owned_by`` llamacpp is its own (asked after vLLM's).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from proxy.providers.local import local_server
from proxy.providers.probing import Asking, Said


def claims(cards: list[dict[str, Any]]) -> bool:
    return any(c.get("owned_by") == "llamacpp" for c in cards)


async def probe(asking: Asking, model: str) -> Said | None:
    data = await asking.get("GET", f"{asking.root}/props?model={quote(model, safe='')}", None)
    settings = data.get("default_generation_settings") if isinstance(data, dict) else None
    window = asking.figure(settings.get("n_ctx")) if isinstance(settings, dict) else None
    field = "/props default_generation_settings.n_ctx (a slot's context)"
    return Said(window=window, server="llama.cpp", field=field) if window else None


PROVIDER = local_server("llama.cpp", probe, turn=2, claims=claims)
