"""The local servers: OpenAI-compatible ones that state a model's window on endpoints of their
own. Each refines the OpenAI-compatible provider with its name (the config's ``discovery:``)
and the probe that asks it, in its own module (what a probe is given: probing.py)."""

from __future__ import annotations

from dataclasses import replace

from proxy.providers.base import Provider
from proxy.providers.openai import PROVIDER as OPENAI_COMPATIBLE
from proxy.providers.probing import Claim, Probe


def local_server(name: str, probe: Probe, turn: int, claims: Claim | None = None) -> Provider:
    """The OpenAI-compatible provider, as the local server ``name`` asked with ``probe`` (not
    OpenAI's own API: none of its hosts); under ``auto``, asked alone when ``claims`` says
    the list's cards are its own, else at its ``turn``."""
    return replace(
        OPENAI_COMPATIBLE,
        server=name,
        probe=probe,
        claims=claims,
        turn=turn,
        hosts=(),
        context_api=None,
    )
