"""Which provider an upstream is (``provider_of``), every kind by name, and what is decided
across them (``context_management`` under ``auto``: by the host, whichever kind is configured).

The kinds are the modules of this package that define a ``PROVIDER``: adding one is adding its
module (and its name to the config's list, proxy/config/catalog.py)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Literal
from urllib.parse import urlsplit

import proxy.providers as package
from proxy.providers.base import Api, ContextMode, Provider, UpstreamConfig


def _load() -> list[Provider]:
    found = []
    for module in pkgutil.iter_modules(package.__path__):
        loaded = importlib.import_module(f"{package.__name__}.{module.name}")
        provider = getattr(loaded, "PROVIDER", None)
        if isinstance(provider, Provider):
            found.append(provider)
    return found


_ALL = _load()
# The config's ``provider:`` kinds.
PROVIDERS: dict[str, Provider] = {p.kind: p for p in _ALL if p.server is None}
# The local servers (the config's ``discovery:`` values), each refining a kind.
SERVERS: dict[str, Provider] = {p.server: p for p in _ALL if p.server is not None}


def provider_of(upstream: UpstreamConfig) -> Provider:
    """The provider that knows ``upstream``: its kind's, or the local server its
    ``discovery:`` names when its kind is one such servers refine."""
    kind = PROVIDERS[upstream.provider]
    server = SERVERS.get(upstream.discovery)
    return server if server is not None and server.kind == kind.kind else kind


def context_management(
    upstream: UpstreamConfig, mode: Literal["auto", "forward", "strip", "serve"], api: Api
) -> ContextMode:
    """What happens to an ``api`` body's ``context_management`` at ``upstream`` configured
    with ``mode``: ``auto`` forwards it to the API of the provider whose own field it is (by
    the host), and serves it elsewhere (strict servers refuse the field)."""
    if mode != "auto":
        return mode
    host = urlsplit(upstream.base_url or "").hostname or ""
    own = any(p.context_api == api and p.owns(host) for p in PROVIDERS.values())
    return "forward" if own else "serve"
