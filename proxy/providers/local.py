"""The local servers: OpenAI-compatible ones that state a model's window on endpoints of their
own. Each refines the OpenAI-compatible provider with its name (the config's ``discovery:``)
and the probe that asks it (proxy/windows/servers.py)."""

from __future__ import annotations

from dataclasses import replace

from proxy.providers.base import Provider
from proxy.providers.openai import PROVIDER as OPENAI_COMPATIBLE


def local_server(name: str, probe: str) -> Provider:
    """The OpenAI-compatible provider, as the local server ``name`` asked with ``probe`` (not
    OpenAI's own API: none of its hosts)."""
    return replace(OPENAI_COMPATIBLE, server=name, probe=probe, hosts=(), context_api=None)
