"""A WebSocket handshake on a model route, answered so the client uses HTTPS at once.

Codex opens its Responses session over a WebSocket first (the Responses API's WebSocket mode) and
falls back to HTTPS when the server will not upgrade. Without a route the handshake was closed
(403): Codex took that for a dropped connection and retried five times, about 6 s, printing
"Reconnecting... 2/5" on every ``codex exec``. The proxy fits requests it can read as HTTP
bodies; the handshake is refused with an HTTP answer that says so (426 and the error in
OpenAI's shape), which Codex takes as "no WebSockets here" and sends the same request by HTTPS.
"""

from __future__ import annotations

import logging

from starlette.responses import Response
from starlette.websockets import WebSocket

from proxy.errors import error_body

MESSAGE = (
    "this gateway serves the Responses API over HTTPS only: send the request as a POST "
    "(its WebSocket mode is not proxied)"
)


async def refuse(websocket: WebSocket) -> None:
    """Answer the handshake with an HTTP 426 (the ASGI server's denial response), or close it
    before accepting where the server cannot send one."""
    body = error_body(MESSAGE, "invalid_request_error", "websocket_not_supported")
    answer = Response(body, 426, media_type="application/json")
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(answer)
    else:
        await websocket.close(code=1008)


class DenialNoise(logging.Filter):
    """Drops uvicorn's "ASGI callable returned without completing handshake." (its
    websockets-sansio protocol logs it after a denial response it has sent, 0.54): the proxy's
    only WebSocket handler is ``refuse``, so the line would follow every ``codex exec``."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing handshake."


def quiet_denials() -> None:
    """Install ``DenialNoise`` on uvicorn's error log, once."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, DenialNoise) for f in logger.filters):
        logger.addFilter(DenialNoise())
