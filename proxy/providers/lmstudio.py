"""LM Studio: ``/api/v0/models/{model}`` states the loaded (or the largest) context.

    LM Studio      ``GET /api/v0/models/{model}``: ``loaded_context_length`` when loaded, else
                   ``max_context_length``, provisional likewise (a name that cannot be one
                   path segment, such as ``..`` or one with a slash, is not asked)

Its list names it nowhere: under ``auto`` it is asked in turn (after Ollama).
"""

from __future__ import annotations

from urllib.parse import quote

from proxy.providers.local import local_server
from proxy.providers.probing import LOAD_DEFAULT, Asking, Said


async def probe(asking: Asking, model: str) -> Said | None:
    segment = path_segment(model)
    if segment is None:
        return None
    data = await asking.get("GET", f"{asking.root}/api/v0/models/{segment}", None)
    if not isinstance(data, dict):
        return None
    loaded = asking.figure(data.get("loaded_context_length"))
    if data.get("state") == "loaded" and loaded:
        return Said(window=loaded, server="LM Studio", field="/api/v0/models loaded_context_length")
    most = asking.figure(data.get("max_context_length"))
    if not most:
        return None
    field = f"/api/v0/models max_context_length {most}, not loaded yet"
    return Said(window=min(most, LOAD_DEFAULT), server="LM Studio", field=field, provisional=True)


def path_segment(model: str) -> str | None:
    """``model`` as one URL path segment, percent-encoded; None for a name that cannot be one
    whatever the encoding (a server may decode ``%2F`` or resolve ``..``): a dot segment, a
    slash or backslash, a control character, or nothing."""
    if model in ("", ".", "..") or any(c in model for c in "/\\") or not model.isprintable():
        return None
    return quote(model, safe="")


PROVIDER = local_server("lmstudio", probe, turn=4)
