"""vLLM and SGLang: ``/v1/models`` states ``max_model_len``.

    vLLM, SGLang   ``GET /v1/models``: ``data[].max_model_len`` (a LoRA adapter's card has none:
                   its ``parent``'s); vllm/entrypoints/openai/models/serving.py

Under ``auto``, a list with a card stating ``max_model_len`` is theirs (the first asked).
"""

from __future__ import annotations

from typing import Any

from proxy.providers.local import local_server
from proxy.providers.probing import Asking, Said, objects


def claims(cards: list[dict[str, Any]]) -> bool:
    return any("max_model_len" in c for c in cards)


async def probe(asking: Asking, model: str) -> Said | None:
    data = await asking.get("GET", f"{asking.base}/models", None)
    cards = objects(data.get("data")) if isinstance(data, dict) else []
    by_id = {c.get("id"): c for c in cards}
    card = by_id.get(model)
    if card is not None and card.get("max_model_len") is None and card.get("parent"):
        card = by_id.get(card["parent"])
    window = asking.figure(card.get("max_model_len")) if card is not None else None
    owner = card.get("owned_by") if card is not None else None
    server = "SGLang" if owner == "sglang" else "vLLM"
    return Said(window=window, server=server, field="/v1/models max_model_len") if window else None


PROVIDER = local_server("vllm", probe, turn=1, claims=claims)
