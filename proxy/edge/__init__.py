"""The server's edge: what a request meets before any format or window is known, and what the
client gets back.

    app.py          the ASGI application: routes, lifespan, the one place errors become responses
    runtime.py      the long-lived objects of one running proxy, built once, passed explicitly
    serving.py      contextwarden serve: one process or N workers on one port, the drain
    readiness.py    whether to send this process requests (/ready), apart from /health
    sharing.py      what the processes of a shared store keep in step, every second
    paths.py        which request paths are accepted and which are forwarded (before routing)
    origins.py      the Host and Origin checks that keep the proxy's own keys safe
    auth.py         who is calling: a team, from a contextwarden key or a passthrough header
    admission.py    what one request may cost the proxy, before its body is parsed
    intake.py       from bytes and headers to what the planner needs: the body validated by
                    its wire format, controls taken out
    headers.py      every header the proxy reads, writes or forwards, by name
    errors.py       every error a client can see, rendered in the client's own format
    passthrough.py  every other ``/v1/*`` path, forwarded untouched
    ownership.py    stored Responses belong to the team that made them
    preview.py      what the proxy would forward, without forwarding
"""
