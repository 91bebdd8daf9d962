"""One Responses WebSocket connection's frames and state (the Responses API's WebSocket mode,
which Codex uses first): what a client frame asks, the whole request body it stands for, and
the upstream's event stream as the frames the client reads.

A ``response.create`` frame holds a Responses request body (its ``type`` aside). A later one on
the same connection may name the previous response (``previous_response_id``) and send only the
items that came after it: the connection keeps the last request's whole input and the output
items relayed for it, so the proxy rebuilds the whole input and fits it as it fits an HTTPS
request (the upstream is sent every item, never the id). Any other id is the request's own, as
in a POST: with ``"store": false`` nothing can hold it, and it is
``previous_response_not_found`` (on which Codex sends the whole input again); a stored one is
left for the upstream, which keeps stored responses. A frame with ``"generate": false``
(Codex's warm-up) is answered with an empty completed response and calls no upstream.
``response.processed`` (an acknowledgement) is ignored. Every other field is the request's,
passed on untouched.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.errors import BadRequest, ProxyError

CREATE = "response.create"
IGNORED = frozenset({"response.processed"})


class PreviousNotFound(BadRequest):
    code = "previous_response_not_found"


@dataclass(slots=True)
class Asked:
    """What a ``response.create`` frame asks: the whole body, and whether to generate."""

    body: dict[str, Any]
    generate: bool = True


@dataclass(slots=True)
class Session:
    """The connection's last response: its id, the whole input it answered (None when the
    upstream was sent a ``previous_response_id`` of its own: the proxy never saw the whole)
    and the output items relayed for it (only the last: a follow-up names the response just
    before it)."""

    response_id: str | None = None
    input: list[Any] | None = None
    output: list[Any] = field(default_factory=list)

    def asked(self, frame: str | bytes) -> Asked | None:
        """The request a frame stands for, its whole input rebuilt; None for a frame that
        asks nothing (an acknowledgement). A frame that is no request is a 400."""
        try:
            data = orjson.loads(frame)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"the frame is not JSON: {exc}", code="invalid_json") from None
        if not isinstance(data, dict):
            raise BadRequest("a frame must be a JSON object", code="invalid_event")
        kind = data.get("type")
        if kind in IGNORED:
            return None
        if kind != CREATE:
            raise BadRequest(
                f"unknown frame type {kind!r}: send {CREATE!r}", param="type", code="invalid_event"
            )
        body = {k: v for k, v in data.items() if k != "type"}
        generate = body.pop("generate", True)
        if not isinstance(generate, bool):
            raise BadRequest("'generate' must be a boolean", param="generate")
        items_of(body.get("input"))  # a string or items: what the next frame may build on
        previous = body.get("previous_response_id")
        if previous is None:
            return Asked(body, generate)
        if previous == self.response_id and self.input is not None:
            del body["previous_response_id"]
            body["input"] = [*self.input, *self.output, *items_of(body.get("input"))]
            return Asked(body, generate)
        if body.get("store") is False:
            raise PreviousNotFound(
                f"Previous response with id {previous!r} not found on this connection; "
                "send the whole input",
                param="previous_response_id",
            )
        return Asked(body, generate)  # a stored response's id: the upstream's to resolve

    def answered(self, response_id: str, asked: Asked, output: list[Any]) -> None:
        """``response_id`` answered ``asked`` with ``output``: what the next frame may build on
        (only a whole input: one the upstream completes from a stored response is not)."""
        chained = asked.body.get("previous_response_id") is not None
        whole = None if chained else items_of(asked.body.get("input"))
        self.response_id, self.input, self.output = response_id, whole, output


def items_of(value: Any) -> list[Any]:
    """A request's ``input`` as items: a string is one user message."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if isinstance(value, list):
        return value
    raise BadRequest("'input' must be a string or an array of items", param="input")


def warm_up(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of an empty completed response (the answer to ``"generate": false``)."""
    response: dict[str, Any] = {
        "id": f"resp_{uuid.uuid4().hex}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": body.get("model"),
        "output": [],
        "usage": None,
    }
    done = {**response, "status": "completed"}
    return [
        {"type": "response.created", "sequence_number": 0, "response": response},
        {"type": "response.completed", "sequence_number": 1, "response": done},
    ]


def error_frame(exc: ProxyError) -> bytes:
    """A refusal, as the WebSocket mode says it: the HTTP status beside OpenAI's error."""
    error = {"type": exc.type, "code": exc.code, "message": exc.message, "param": exc.param}
    return orjson.dumps({"type": "error", "status": exc.status, "error": error})


def refused_frame(status: int, body: bytes) -> bytes:
    """An upstream's (or the proxy's) error answer, as an error frame with its status."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        text = body.decode("utf-8", "replace")[:2000] or f"the upstream answered {status}"
        error = {"type": "upstream_error", "code": None, "message": text, "param": None}
    return orjson.dumps({"type": "error", "status": status, "error": error})


async def events(chunks: AsyncIterable[Any]) -> AsyncIterator[bytes]:
    """An event stream's events, each the bytes of its ``data`` (what a frame carries)."""
    buffer = b""
    async for chunk in chunks:
        buffer += chunk.encode() if isinstance(chunk, str) else bytes(chunk)
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
        *blocks, buffer = buffer.split(b"\n\n")
        for block in blocks:
            data = data_of(block)
            if data is not None:
                yield data
    data = data_of(buffer)
    if data is not None:
        yield data


def data_of(block: bytes) -> bytes | None:
    """One event's ``data`` lines, joined; None for an event without data, or ``[DONE]``."""
    lines = [
        line[5:].removeprefix(b" ") for line in block.split(b"\n") if line.startswith(b"data:")
    ]
    data = b"\n".join(lines)
    return data if lines and data.strip() and data.strip() != b"[DONE]" else None
