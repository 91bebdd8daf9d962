"""contextwarden's HTTP side: config, the ASGI app, forwarding and overflow recovery."""
