"""The server's edge: what a request meets before any format or window is known, and what the
client gets back.

    exchange.py     handle: the one request path of every format: read, fit, forward, retry
                    on overflow, answer, learn
    traced.py       fitted: ``handle`` inside its OpenTelemetry span, when telemetry is on
    readiness.py    whether to send this process requests (/ready), apart from /health
    sharing.py      what the processes of a shared store keep in step, every second
    origins.py      the Host and Origin checks that keep the proxy's own keys safe
    auth.py         who is calling: a team, from a contextwarden key or a passthrough header
    admission.py    what one request may cost the proxy, before its body is parsed
    intake.py       from bytes and headers to what the planner needs: the body validated by
                    its wire format, controls taken out
    passthrough.py  every other ``/v1/*`` path, forwarded untouched
    forwarded_fields.py  what a forwarded body names that the proxy acts on, whatever type it
                    declares (JSON, a form)
    shadow.py       shadow mode: a request sent as it came, what the proxy would have done
                    planned after and recorded
    background.py   work a request leaves to run after its answer (shadow plans)
    ownership.py    stored Responses belong to the team that made them
    preview.py      what the proxy would forward, without forwarding
    websockets.py   the Responses API's WebSocket mode (Codex's first transport): the handshake,
                    and each request frame sent down ``handle`` as the POST it stands for
    websocket_session.py  one connection's frames and state: the whole input of a follow-up
                    rebuilt, a warm-up answered, events and errors as frames
"""
