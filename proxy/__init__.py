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
"""
