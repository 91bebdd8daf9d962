"""The Responses WebSocket's pieces without a server: what a frame asks (the whole input of a
follow-up rebuilt per connection), an event stream as frames, and an answer that is cut short
or refused as an error frame (tests/e2e/test_responses_websocket.py serves the real thing)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from starlette.responses import Response, StreamingResponse

from proxy.edge.websocket_session import Asked, PreviousNotFound, Session, events
from proxy.edge.websockets import DenialNoise, relay
from proxy.errors import BadRequest

CALL = {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "ok"}


def frame(**body: Any) -> bytes:
    return orjson.dumps({"type": "response.create", "model": "m", **body})


def answered(session: Session, asked: Asked | None, rid: str, output: list[Any]) -> None:
    assert asked is not None
    session.answered(rid, asked, output)


def test_a_follow_up_is_rebuilt_whole_and_other_fields_pass_untouched() -> None:
    session = Session()
    first = session.asked(frame(input="hi", store=False, tools=[{"x": 1}], metadata={"k": "v"}))
    assert first is not None and first.generate
    assert first.body == {"model": "m", "input": "hi", "store": False, "tools": [{"x": 1}]} | {
        "metadata": {"k": "v"}
    }
    answered(session, first, "resp_1", [CALL])
    follow = session.asked(frame(input=[OUTPUT], previous_response_id="resp_1", store=False))
    assert follow is not None
    hi = {"type": "message", "role": "user", "content": "hi"}
    assert follow.body == {"model": "m", "input": [hi, CALL, OUTPUT], "store": False}


def test_a_warm_up_is_built_on_like_an_answer() -> None:
    session = Session()
    warm = session.asked(frame(input=[], generate=False))
    assert warm is not None and not warm.generate and "generate" not in warm.body
    answered(session, warm, "resp_warm", [])
    first = session.asked(frame(input=["a"], previous_response_id="resp_warm"))
    assert first is not None and first.body["input"] == ["a"]
    assert "previous_response_id" not in first.body


def test_an_id_the_connection_does_not_hold() -> None:
    """Not stored: nothing can hold it (Codex then sends the whole input); stored (``store``
    true or left out): the upstream's to resolve, as in a POST, and what it answers is no whole
    input to build on."""
    session = Session()
    with pytest.raises(PreviousNotFound) as refused:
        session.asked(frame(input=[], previous_response_id="resp_x", store=False))
    assert refused.value.status == 400 and refused.value.param == "previous_response_id"
    stored = session.asked(frame(input=["b"], previous_response_id="resp_x"))
    assert stored is not None and stored.body["previous_response_id"] == "resp_x"
    answered(session, stored, "resp_y", [CALL])
    chained = session.asked(frame(input=[OUTPUT], previous_response_id="resp_y"))
    assert chained is not None and chained.body["previous_response_id"] == "resp_y"
    assert chained.body["input"] == [OUTPUT]
    with pytest.raises(PreviousNotFound):
        session.asked(frame(input=[OUTPUT], previous_response_id="resp_y", store=False))


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"[1, 2]", "invalid_event"),
        (b'{"type": "session.update"}', "invalid_event"),
        (frame(input=1), None),
        (frame(input=[], generate="no"), None),
    ],
)
def test_a_frame_that_is_no_request_is_a_400(data: bytes, code: str | None) -> None:
    with pytest.raises(BadRequest) as refused:
        Session().asked(data)
    assert refused.value.status == 400
    if code is not None:
        assert refused.value.code == code


def test_an_acknowledgement_asks_nothing() -> None:
    assert Session().asked(b'{"type": "response.processed", "response_id": "resp_1"}') is None


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def test_events_are_each_data_whatever_the_chunks() -> None:
    stream = (
        b'event: response.created\r\ndata: {"a":1}\r\n\r\n: comment\n\n'
        b'data: {"b":\ndata: 2}\n\ndata: [DONE]\n\ndata: {"c":3}'
    )
    pieces = [stream[k : k + 7] for k in range(0, len(stream), 7)]

    async def read() -> list[bytes]:
        return [data async for data in events(chunks(*pieces))]

    assert asyncio.run(read()) == [b'{"a":1}', b'{"b":\n2}', b'{"c":3}']


class Socket:
    """The WebSocket's sending half: what the proxy sent, each frame parsed."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send_text(self, data: str) -> None:
        self.sent.append(orjson.loads(data))


def relayed(response: Response, session: Session | None = None) -> list[dict[str, Any]]:
    socket = Socket()
    asked = Asked({"model": "m", "input": ["q"]})
    asyncio.run(relay(socket, session or Session(), asked, response))  # type: ignore[arg-type]
    return socket.sent


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)


def test_a_completed_stream_is_built_on() -> None:
    item = {"type": "message", "role": "assistant", "content": []}
    done = {"type": "response.completed", "response": {"id": "resp_1", "output": [item]}}
    body = sse({"type": "response.output_item.done", "item": item}, done)
    session = Session()
    sent = relayed(StreamingResponse(chunks(body), 200), session)
    assert [e["type"] for e in sent] == ["response.output_item.done", "response.completed"]
    assert (session.response_id, session.input, session.output) == ("resp_1", ["q"], [item])


def test_a_stream_cut_short_ends_with_an_error_frame() -> None:
    """An upstream whose stream stops before its response does: Codex would wait out its idle
    timeout (minutes) for the rest; it is told at once."""
    body = sse({"type": "response.created", "response": {"id": "resp_1"}})
    session = Session()
    sent = relayed(StreamingResponse(chunks(body), 200), session)
    assert [e["type"] for e in sent] == ["response.created", "error"]
    assert sent[-1]["status"] == 502 and sent[-1]["error"]["code"] == "stream_incomplete"
    assert session.response_id is None


def test_a_refusal_is_one_error_frame_with_its_status() -> None:
    error = {"error": {"message": "slow down", "type": "rate_limit_error", "code": None}}
    for response in (
        Response(orjson.dumps(error), 429),
        StreamingResponse(chunks(orjson.dumps(error)), 429),
    ):
        assert relayed(response) == [{"type": "error", "status": 429, **error}]
    assert relayed(Response(b"<html>bad gateway</html>", 502))[0]["error"]["message"] == (
        "<html>bad gateway</html>"
    )


def test_an_answer_read_whole_becomes_its_events() -> None:
    item = {"type": "message", "role": "assistant", "content": []}
    answer = {"id": "resp_2", "object": "response", "output": [item]}
    sent = relayed(Response(orjson.dumps(answer), 200, media_type="application/json"))
    assert [e["type"] for e in sent] == ["response.output_item.done", "response.completed"]
    broken = relayed(Response(b"not a response", 200, media_type="application/json"))
    assert [e["type"] for e in broken] == ["error"] and broken[0]["status"] == 502


def test_only_the_denials_line_is_dropped() -> None:
    noise = DenialNoise()

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("uvicorn.error", logging.ERROR, "", 0, message, None, None)

    assert not noise.filter(record("ASGI callable returned without completing handshake."))
    assert noise.filter(record("Exception in ASGI application\n"))
