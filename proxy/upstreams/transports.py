"""The transports by name: a provider names the one that sends to it (proxy/providers/), the
runtime holds one of each."""

from __future__ import annotations

from proxy.providers.base import TransportName
from proxy.upstreams.forwarding import Transport
from proxy.upstreams.litellm_client import LitellmTransport


def transports(http: Transport) -> dict[TransportName, Transport]:
    """Every named transport: ``http`` (the pooled one), and litellm's."""
    return {"http": http, "litellm": LitellmTransport()}
