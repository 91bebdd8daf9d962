"""One Responses WebSocket connection's frames and state (proxy/edge/websocket_session.py): what
a frame asks, a follow-up's whole input rebuilt from the connection's last response, the warm-up
answered, errors and the upstream's events as frames."""

from __future__ import annotations

from collections.abc import AsyncIterator
from itertools import pairwise
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.edge.websocket_session import (
    Asked,
    PreviousNotFound,
    Session,
    error_frame,
    events,
    items_of,
    refused_frame,
    warm_up,
)
from proxy.errors import BadRequest, Forbidden

USER = {"type": "message", "role": "user", "content": "first"}
ANSWER = {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}


def frame(**body: Any) -> bytes:
    return orjson.dumps({"type": "response.create", "model": "gpt-x", **body})


@pytest.mark.parametrize(
    "raw, code",
    [(b"{not json", "invalid_json"), (b"[1, 2]", "invalid_event"),
     (b'{"type": "response.cancel"}', "invalid_event"), (b'{"model": "gpt-x"}', "invalid_event")],
)  # fmt: skip
def test_a_frame_that_is_no_request_is_a_400(raw: bytes, code: str) -> None:
    with pytest.raises(BadRequest) as refused:
        Session().asked(raw)
    assert refused.value.code == code


def test_an_acknowledgement_asks_nothing() -> None:
    assert Session().asked('{"type": "response.processed", "response_id": "resp_1"}') is None


def test_a_create_frame_is_its_body_and_every_other_field_passes_untouched() -> None:
    asked = Session().asked(frame(input=[USER], store=False, metadata={"k": "v"}, generate=False))
    assert asked == Asked(
        {"model": "gpt-x", "input": [USER], "store": False, "metadata": {"k": "v"}}, False
    )
    assert Session().asked(frame(input="hi")) == Asked({"model": "gpt-x", "input": "hi"}, True)
    with pytest.raises(BadRequest) as refused:
        Session().asked(frame(generate="no"))
    assert refused.value.param == "generate"
    with pytest.raises(BadRequest):
        Session().asked(frame(input=42))


def test_a_follow_up_gets_the_whole_input_rebuilt() -> None:
    session = Session()
    first = session.asked(frame(input="first", store=False))
    assert first is not None
    session.answered("resp_1", first, [ANSWER])
    follow = session.asked(frame(previous_response_id="resp_1", input="second", store=False))
    assert follow is not None
    assert "previous_response_id" not in follow.body  # the upstream is sent every item
    second = {"type": "message", "role": "user", "content": "second"}
    assert follow.body["input"] == [USER, ANSWER, second]
    session.answered("resp_2", follow, [ANSWER])
    third = session.asked(frame(previous_response_id="resp_2", input=[]))
    assert third is not None and third.body["input"] == [USER, ANSWER, second, ANSWER]


def test_an_unknown_previous_id_is_not_found_unless_stored() -> None:
    session = Session()
    with pytest.raises(PreviousNotFound) as refused:
        session.asked(frame(previous_response_id="resp_other", input="x", store=False))
    assert refused.value.code == "previous_response_not_found"
    assert refused.value.status == 400
    stored = session.asked(frame(previous_response_id="resp_other", input="x"))
    assert stored is not None and stored.body["previous_response_id"] == "resp_other"


def test_after_a_chained_request_the_next_one_is_not_rebuilt() -> None:
    """The upstream completed it from a stored response: the proxy never saw its whole input."""
    session = Session()
    chained = session.asked(frame(previous_response_id="resp_stored", input="x"))
    assert chained is not None
    session.answered("resp_3", chained, [ANSWER])
    assert session.input is None
    later = session.asked(frame(previous_response_id="resp_3", input="y"))
    assert later is not None and later.body["previous_response_id"] == "resp_3"
    assert later.body["input"] == "y"


def test_items_of_reads_a_string_as_one_user_message() -> None:
    assert items_of(None) == []
    assert items_of("hi") == [{"type": "message", "role": "user", "content": "hi"}]
    assert items_of([USER]) == [USER]
    with pytest.raises(BadRequest):
        items_of({"role": "user"})


def test_the_warm_up_is_an_empty_completed_response() -> None:
    created, completed = warm_up({"model": "gpt-x"})
    assert [created["type"], completed["type"]] == ["response.created", "response.completed"]
    assert created["response"]["id"] == completed["response"]["id"]
    assert created["response"]["id"].startswith("resp_")
    assert completed["response"]["status"] == "completed"
    assert completed["response"]["output"] == [] and completed["response"]["model"] == "gpt-x"
    assert warm_up({})[0]["response"]["id"] != created["response"]["id"]


def test_errors_are_frames_with_their_status() -> None:
    error = orjson.loads(error_frame(Forbidden("no", param="model")))
    assert error == {
        "type": "error",
        "status": 403,
        "error": {"type": "permission_error", "code": "model_not_allowed", "message": "no",
                  "param": "model"},
    }  # fmt: skip
    upstream = {"error": {"type": "rate_limit", "message": "slow down"}}
    assert orjson.loads(refused_frame(429, orjson.dumps(upstream))) == {
        "type": "error", "status": 429, "error": upstream["error"],
    }  # fmt: skip
    text = orjson.loads(refused_frame(502, b"Bad Gateway"))
    assert text["status"] == 502 and text["error"]["message"] == "Bad Gateway"
    assert orjson.loads(refused_frame(503, b""))["error"]["message"] == "the upstream answered 503"


async def chunks_of(data: list[bytes | str]) -> AsyncIterator[bytes | str]:
    for chunk in data:
        yield chunk


async def collected(data: list[bytes | str]) -> list[bytes]:
    return [e async for e in events(chunks_of(data))]


async def test_events_are_their_data_whatever_the_chunks_and_line_ends() -> None:
    stream: list[bytes | str] = [
        'event: response.created\r\ndata: {"a": 1}\r',
        b"\n\r\n: a comment\n\nevent: ping\n\ndata: line one\ndata:line two\n\n",
        b'data: [DONE]\n\ndata: {"last": true}',
    ]
    assert await collected(stream) == [b'{"a": 1}', b"line one\nline two", b'{"last": true}']


STREAM = b"".join(
    [
        b'event: response.created\ndata: {"type": "response.created"}\n\n',
        b'event: response.output_text.delta\ndata: {"delta": "hi"}\n\n',
        b"data: first\ndata: second\n\n",
        b": keep-alive\n\n",
        b"data: [DONE]\n\n",
    ]
)
EXPECTED = [b'{"type": "response.created"}', b'{"delta": "hi"}', b"first\nsecond"]


@settings(deadline=None)  # a loaded machine must not fail an example
@given(st.lists(st.integers(0, 2 * len(STREAM)), max_size=20), st.booleans())
async def test_events_do_not_depend_on_where_the_stream_is_cut(cuts: list[int], crlf: bool) -> None:
    stream = STREAM.replace(b"\n", b"\r\n") if crlf else STREAM
    points = sorted({0, len(stream), *[min(c, len(stream)) for c in cuts]})
    chunks: list[bytes | str] = [stream[a:b] for a, b in pairwise(points)]
    assert await collected(chunks) == EXPECTED
