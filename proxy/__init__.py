"""contextwarden's HTTP side: the kernel at the root, one package per layer a request meets.

The root holds what every layer shares, and what builds and serves them:

    cli.py       contextwarden serve, check-config, preview, demo
    serving.py   contextwarden serve: one process or N workers on one port, the drain
    app.py       the ASGI application: routes, lifespan, the one place errors become responses
    runtime.py   the composition root: the long-lived objects of one running proxy, built once
                 and passed explicitly (a module below takes its type for annotations only)
    wire.py      the request type every layer passes (WireRequest) and a caller's credential
    headers.py   every header the proxy reads, writes or forwards, by name
    paths.py     which request paths are accepted and which are forwarded (before routing)
    errors.py    every error a client can see, rendered in the client's own format

Imports go one way, down the README's table of layers (tests/test_layout.py checks it).

What is public: the ``contextwarden`` command, the HTTP API (the fitted routes, ``/v1/*``,
``/admin/*``, ``/metrics``, ``/health``, ``/ready`` and the ``x-contextwarden-*`` headers) and,
to embed the proxy in an ASGI server of one's own, the two names this package exports:

    load_settings(path, **overrides)   the config, from a YAML file (None: the embedded one)
    create_app(settings)               the ASGI app

Everything else is internal and moves without notice. ``contextwarden demo`` imports only
these; between turns it waits for the app's background summaries through
``app.state.runtime`` (no HTTP way to wait for them yet).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proxy.app import create_app
    from proxy.config.settings import load_settings

__all__ = ["create_app", "load_settings"]


def __getattr__(name: str) -> Any:
    # Imported when asked for, so that importing one module of the package stays light.
    if name == "create_app":
        from proxy.app import create_app

        return create_app
    if name == "load_settings":
        from proxy.config.settings import load_settings

        return load_settings
    raise AttributeError(f"module 'proxy' has no attribute {name!r}")
