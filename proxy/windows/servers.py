"""The seam between window discovery (proxy/windows/discovery.py) and the local servers: what a
server says of a model's window is asked by its provider's probe, which knows that server's
endpoints and fields as its own source defines them (proxy/providers/: vllm.py, llamacpp.py,
ollama.py, lmstudio.py; what a probe is given and gives back: probing.py). This module names
no server: it hands a probe the ``Asking`` (the server's URLs, ``get``, and the sane range of a
window, proxy/windows/sane.py), and under ``auto`` picks which servers are asked.
"""

from __future__ import annotations

from typing import Any

from proxy.providers.probing import Asking, Get, Probe, Said, objects
from proxy.providers.registry import SERVERS
from proxy.windows.sane import sane_window

__all__ = ["Get", "Said", "probe", "roots"]

# The local servers in the order ``auto`` asks them.
IN_TURN = sorted(SERVERS.values(), key=lambda server: server.turn)


def roots(base_url: str) -> tuple[str, str]:
    """(the OpenAI-compatible base, ending in /v1 or whatever was configured; the server's
    root, where its own API lives)."""
    base = base_url.rstrip("/")
    return base, base.removesuffix("/v1")


async def probe(get: Get, base_url: str, model: str, own: Probe | None = None) -> Said | None:
    """What the server at ``base_url`` says of ``model``'s window: asked by ``own``, the probe
    of the one server the upstream's ``discovery:`` names (its provider's), or, under ``auto``
    (None), by the local servers': the OpenAI-compatible list first, where a server may state
    the window or name itself (the first whose cards it ``claims`` is the one asked), else each
    that never names itself there, in turn."""
    base, root = roots(base_url)
    if own is not None:
        return await own(Asking(get=get, base=base, root=root, sane=sane_window), model)
    listed = await get("GET", f"{base}/models", None)
    cards = objects(listed.get("data")) if isinstance(listed, dict) else []
    asking = Asking(
        get=_answered(get, f"{base}/models", listed), base=base, root=root, sane=sane_window
    )
    for server in IN_TURN:
        if server.claims is not None and server.claims(cards) and server.probe is not None:
            return await server.probe(asking, model)
    for server in IN_TURN:
        if server.claims is None and server.probe is not None:
            said = await server.probe(asking, model)
            if said is not None:
                return said
    return None


def _answered(get: Get, url: str, data: Any) -> Get:
    """``get``, with ``url``'s answer already in hand."""

    async def again(method: str, asked: str, body: Any) -> Any:
        return data if method == "GET" and asked == url else await get(method, asked, body)

    return again
