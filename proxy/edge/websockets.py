"""The Responses API's WebSocket mode on ``/v1/responses``: the transport Codex opens first.

The handshake is the caller's one set of headers: who it is (a team key or the credential it
forwards) is checked before the upgrade is accepted (a refusal is an HTTP answer, 401 or 403,
in OpenAI's shape; the Host, Origin and path checks are the middleware's, as for a request),
and the same headers are each frame's. Each ``response.create`` frame is admitted as a posted
body is (its byte limit and JSON node cap, before it is parsed), its whole input rebuilt
(proxy/edge/websocket_session.py), and becomes the HTTPS request it stands for: ``POST`` of its
body with the handshake's headers, down the one request path (proxy/edge/exchange.py
``handle``: admission, the plan, sticky cuts, the overflow retry, recall, metrics). The
upstream is reached by HTTPS as for any request: it need not speak WebSockets. The answer's
events go back one text frame each; a refusal (the proxy's, the upstream's, an upstream that
cannot be reached or does not serve the Responses API), a frame that is no request and a stream
that ends before its response does are each an error frame (``{"type": "error", "status": N,
"error": {...}}``), and the connection stays open for the next frame. Frames are served one at
a time, in order, as Codex sends them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketDisconnect

from proxy.edge.traced import fitted
from proxy.edge.websocket_session import (
    Asked,
    Session,
    error_frame,
    events,
    refused_frame,
    warm_up,
)
from proxy.errors import NoRoute, PayloadTooLarge, ProxyError, error_body
from proxy.formats.responses import RESPONSES
from proxy.paths import query_of
from proxy.upstreams.forwarding import decoded, is_event_stream

if TYPE_CHECKING:
    from proxy.config.settings import Limits
    from proxy.edge.admission import Admission
    from proxy.edge.auth import Authenticator
    from proxy.runtime import Runtime

log = logging.getLogger("contextwarden")
BETA = "responses_websockets"
# The handshake's own headers, which no frame's request carries; and no compression asked of
# the upstream: the events are read to be framed.
HANDSHAKE_ONLY = frozenset({b"upgrade", b"connection", b"accept-encoding", b"content-length"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Frames:
    """What a connection's frames are admitted and answered with: who the caller is
    (proxy/edge/auth.py), the admission and its limits (proxy/edge/admission.py), and the
    request path (proxy/edge/traced.py ``fitted``, for the Responses API)."""

    auth: Authenticator
    admission: Admission
    limits: Limits
    answer: Callable[[Request], Awaitable[Response]]


async def serve(websocket: WebSocket) -> None:
    """One connection: the handshake, then each frame in turn until the client closes."""
    rt: Runtime = websocket.app.state.runtime
    try:
        rt.auth.team(websocket.headers, query_of(websocket.scope))
    except ProxyError as exc:
        await deny(websocket, exc)
        return
    answer = partial(fitted, rt=rt, fmt=RESPONSES)
    frames = Frames(auth=rt.auth, admission=rt.admission, limits=rt.settings.limits, answer=answer)
    await websocket.accept()
    session = Session()
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            await frame(websocket, frames, session, message)
    except WebSocketDisconnect:
        return


async def elsewhere(websocket: WebSocket) -> None:
    """A WebSocket on any other path: only the Responses API has a WebSocket mode. Refused
    with a 404 in the client's shape, as an HTTP request to an unknown path is (it was a 403
    with no body)."""
    await deny(websocket, NoRoute(404, "WebSocket", websocket.url.path))


async def deny(websocket: WebSocket, exc: ProxyError) -> None:
    """The handshake refused with an HTTP answer (the ASGI server's denial response), or
    closed before it is accepted where the server cannot send one."""
    answer = Response(exc.body(), exc.status, media_type="application/json")
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(answer)
    else:
        await websocket.close(code=1008)


async def frame(websocket: WebSocket, frames: Frames, session: Session, message: Message) -> None:
    """One client frame answered: its events, or an error frame."""
    try:
        asked = await admitted(websocket, frames, session, frame_bytes(message))
        if asked is None:
            return
        if not asked.generate:
            created, completed = warm_up(asked.body)
            for event in (created, completed):
                await websocket.send_text(orjson.dumps(event).decode())
            session.answered(completed["response"]["id"], asked, [])
            return
        asked.body["stream"] = True
        body = orjson.dumps(asked.body)
        response = await frames.answer(as_request(websocket, body))
        await relay(websocket, session, asked, response)
    except ProxyError as exc:
        await websocket.send_text(error_frame(exc).decode())
    except WebSocketDisconnect:
        raise
    except Exception:  # no traceback to the client, and the connection stays
        log.exception("unexpected error on a Responses WebSocket frame")
        refused = ProxyError("internal proxy error; see the proxy's log", code="internal_error")
        await websocket.send_text(error_frame(refused).decode())


def frame_bytes(message: Message) -> bytes:
    """A client frame's payload, text or binary, as bytes."""
    text = message.get("text")
    if text is not None:
        return str(text).encode()
    return bytes(message.get("bytes") or b"")


async def admitted(
    websocket: WebSocket, frames: Frames, session: Session, data: bytes
) -> Asked | None:
    """What a frame asks, read as a posted body is (proxy/edge/admission.py): within the byte
    limit and the JSON node cap, a large one holding a slot of its team's and parsed off the
    event loop. The request it stands for is admitted again in ``handle``, as a whole."""
    limit = frames.limits.max_body_bytes
    if len(data) > limit:
        raise PayloadTooLarge(f"the frame of {len(data)} bytes is over the {limit}-byte limit")
    team = frames.auth.team(websocket.headers, query_of(websocket.scope)).team
    async with frames.admission.admit(as_request(websocket, data), team) as body:
        return await frames.admission.run(body, session.asked, body)


async def relay(websocket: WebSocket, session: Session, asked: Asked, response: Response) -> None:
    """The answer as frames: each event of a stream (or of a body read whole), or an error
    frame for a refusal or a stream that ended before its response did; the output items of a
    completed response are kept for the connection's next request."""
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers]
    chunks: AsyncIterable[Any]
    if response.status_code >= 400:
        body = decoded(await whole_body(response), headers)
        await websocket.send_text(refused_frame(response.status_code, body).decode())
        return
    if isinstance(response, StreamingResponse):
        chunks = response.body_iterator
    else:
        body = decoded(bytes(response.body), headers)
        chunks = once(body if is_event_stream(headers) else completed_events(body))
    output: list[Any] = []
    ended = False
    try:
        async for data in events(chunks):
            await websocket.send_text(data.decode("utf-8", "replace"))
            event = parsed(data)
            kind = event.get("type")
            ended = ended or kind in TERMINAL
            if kind == "response.output_item.done":
                output.append(event.get("item"))
            elif kind == "response.completed":
                done = event.get("response")
                if isinstance(done, dict) and isinstance(done.get("id"), str):
                    items = output or list(done.get("output") or [])
                    session.answered(done["id"], asked, items)
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()
    if not ended:
        message = "the upstream's stream ended before its response did"
        cut = refused_frame(502, error_body(message, "upstream_error", "stream_incomplete"))
        await websocket.send_text(cut.decode())


# The events after which a response has no more: Codex reads on until one comes.
TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete", "error"})


def parsed(data: bytes) -> dict[str, Any]:
    """An event as a JSON object (empty for one that is not)."""
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError:
        return {}
    return event if isinstance(event, dict) else {}


async def whole_body(response: Response) -> bytes:
    """A refusal's body, streamed or not."""
    if not isinstance(response, StreamingResponse):
        return bytes(response.body)
    chunks = response.body_iterator
    try:
        return b"".join([c.encode() if isinstance(c, str) else bytes(c) async for c in chunks])
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


async def once(body: bytes) -> AsyncIterator[bytes]:
    yield body


def completed_events(body: bytes) -> bytes:
    """A response object read whole (an answer the proxy made, not streamed), as the events of
    its stream: each output item done, then the response completed; anything else an error."""
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("output"), list):
        message = "the upstream's answer holds no response"
        frame = refused_frame(502, error_body(message, "upstream_error", "invalid_response"))
        return b"data: " + frame + b"\n\n"
    out = [
        {"type": "response.output_item.done", "output_index": k, "item": item}
        for k, item in enumerate(answer["output"])
    ]
    out.append({"type": "response.completed", "response": answer})
    return b"".join(b"data: " + orjson.dumps(event) + b"\n\n" for event in out)


def as_request(websocket: WebSocket, body: bytes) -> Request:
    """A frame's body as the HTTPS request it stands for: ``POST`` on the handshake's path, with
    its headers (the Responses WebSocket beta taken out of ``OpenAI-Beta``)."""
    headers: list[tuple[bytes, bytes]] = []
    for name, value in websocket.scope["headers"]:
        if name in HANDSHAKE_ONLY or name.startswith(b"sec-websocket-"):
            continue
        if name == b"openai-beta":
            kept = [v for v in value.split(b",") if not v.strip().startswith(BETA.encode())]
            if not kept:
                continue
            value = b",".join(kept).strip()
        headers.append((name, value))
    headers += [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    scope = {
        **websocket.scope,
        "type": "http",
        "method": "POST",
        "headers": headers,
        "scheme": "https" if websocket.scope.get("scheme") == "wss" else "http",
    }
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:  # the body was whole; the request is over
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(scope, receive)


class DenialNoise(logging.Filter):
    """Drops uvicorn's "ASGI callable returned without completing handshake." (its
    websockets-sansio protocol logs it after a denial response it has sent, 0.54): a refused
    handshake (a caller without a credential, a Host or Origin not trusted) is answered in
    full, with its own status."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing handshake."


def quiet_denials() -> None:
    """Install ``DenialNoise`` on uvicorn's error log, once."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, DenialNoise) for f in logger.filters):
        logger.addFilter(DenialNoise())
