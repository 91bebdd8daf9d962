"""Stored objects belong to the team that made them (proxy/edge/ownership.py): the ids a request
names, read only in the exact form ids take; the ids an answer states, claimed before the
client holds them; another team's refused, an unknown one let through, and a store that fails
never failing the request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from itertools import pairwise
from typing import Any, cast

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.edge.ownership import (
    PREFIX,
    Owners,
    answered_id,
    answered_ids,
    claiming,
    named_in_path,
    referenced,
)
from proxy.errors import BadRequest, Forbidden
from proxy.stores import GuardedStore
from proxy.stores.protocol import Store


class Blobs:
    """The two calls of a store that ownership makes, in a dict."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    async def get_blob(self, key: str) -> bytes | None:
        return self.blobs.get(key)

    async def put_blob(self, key: str, value: bytes, ttl: float, owner: str | None = "") -> None:
        self.blobs[key] = value


def owners() -> tuple[Owners, Blobs]:
    blobs = Blobs()
    return Owners(GuardedStore(cast(Store, blobs), timeout=1.0)), blobs


def test_referenced_reads_every_place_a_responses_body_names_an_id() -> None:
    payload = {
        "previous_response_id": "resp_prev01",
        "conversation": {"id": "conv_abc123"},
        "input": [
            {"type": "item_reference", "id": "msg_ref001"},
            {"id": "fc_untyped1"},  # type left out, as the API allows
            {"type": None, "id": "rs_nulltype"},
            {"role": "user", "id": "msg_inline", "content": "hi"},  # an item sent whole
            {"type": "message", "id": "msg_whole1", "role": "user", "content": "hi"},
        ],
    }
    assert referenced(payload) == [
        "resp_prev01", "conv_abc123", "msg_ref001", "fc_untyped1", "rs_nulltype",
    ]  # fmt: skip
    assert referenced({"conversation": "conv_plain1", "previous_response_id": None}) == [
        "conv_plain1"
    ]
    assert referenced({"previous_response_id": "", "input": "text"}) == []


@pytest.mark.parametrize(
    "payload, param",
    [({"previous_response_id": " resp_abc123"}, "previous_response_id"),
     ({"previous_response_id": "resp_abc123\n"}, "previous_response_id"),
     ({"conversation": {"id": 12345}}, "conversation.id"),
     ({"input": [{"type": "item_reference", "id": "msg_%61bc"}]}, "input[0].id")],
)  # fmt: skip
def test_an_id_not_in_the_exact_form_is_a_400(payload: dict[str, Any], param: str) -> None:
    with pytest.raises(BadRequest) as refused:
        referenced(payload)
    assert (refused.value.code, refused.value.param) == ("invalid_id", param)


def test_a_path_names_its_id_segments_and_refuses_one_beside_white_space() -> None:
    assert named_in_path("responses/resp_abc123/input_items") == ["resp_abc123"]
    assert named_in_path("chat/completions/chatcmpl-abc123") == ["chatcmpl-abc123"]
    assert named_in_path("embeddings") == []
    with pytest.raises(BadRequest) as refused:
        named_in_path("responses/ resp_abc123")
    assert refused.value.code == "invalid_id"


def test_an_answers_ids_are_read_and_its_response_id_is_the_resp_one() -> None:
    answer = orjson.dumps(
        {"id": "resp_made01", "output": [{"id": "msg_out001"}, {"id": "rs_reason1"}]}
    )
    assert answered_ids(answer) == {"resp_made01", "msg_out001", "rs_reason1"}
    assert answered_ids(b'{"id" : "fc_spaced1", "id":"x"}') == {"fc_spaced1"}  # "x": no id
    stream = b'event: response.created\ndata: {"response": {"id": "resp_streamed"}}\n\n'
    assert answered_id(b'{"item": {"id": "msg_first1"}}' + stream) == "resp_streamed"
    assert answered_id(b'{"id": "chatcmpl-abc123"}') is None


async def test_another_teams_object_is_refused_and_an_unknown_one_is_not() -> None:
    owned, _ = owners()
    await owned.claim("red", ["resp_red001", "msg_red001"])
    await owned.check("red", False, {"previous_response_id": "resp_red001"})
    await owned.check("blue", False, {"previous_response_id": "resp_never1"})  # nobody's
    refused_cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"previous_response_id": "resp_red001"}, []),
        ({"input": [{"id": "msg_red001"}]}, []),
        ({}, ["resp_red001"]),  # named by a forwarded path
    ]
    for payload, named in refused_cases:
        with pytest.raises(Forbidden) as refused:
            await owned.check("blue", False, payload, named)
        assert refused.value.code == "not_your_object"


async def test_a_capped_team_may_not_send_a_stateful_request() -> None:
    owned, _ = owners()
    with pytest.raises(Forbidden) as refused:
        await owned.check("red", True, {"conversation": "conv_abc123"})
    assert refused.value.code == "stateful_not_allowed"
    await owned.check("red", True, {"input": "hi"})  # stateless: the cap can be kept


async def test_a_claim_never_takes_over_another_teams_object() -> None:
    owned, blobs = owners()
    await owned.claim("red", ["resp_shared1"])
    await owned.claim("blue", ["resp_shared1", "resp_blue01"])  # a listing of old objects
    assert blobs.blobs == {PREFIX + "resp_shared1": b"red", PREFIX + "resp_blue01": b"blue"}


async def test_a_failing_store_fails_no_request() -> None:
    down = Owners(GuardedStore(None, timeout=1.0, disabled="no store in this test"))
    await down.claim("red", ["resp_abc123"])
    await down.check("blue", False, {"previous_response_id": "resp_abc123"})


async def chunks_of(data: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in data:
        yield chunk


async def relayed(chunks: list[bytes]) -> tuple[list[bytes], list[set[str]], list[int]]:
    """What ``claiming`` yields, what it claimed, and how many chunks had gone on at each
    claim."""
    out: list[bytes] = []
    claims: list[set[str]] = []
    at: list[int] = []

    async def claim(ids: set[str]) -> None:
        claims.append(ids)
        at.append(len(out))

    async for chunk in claiming(chunks_of(chunks), claim):
        out.append(chunk)
    return out, claims, at


async def test_each_id_is_claimed_once_before_the_chunk_that_states_it_goes_on() -> None:
    chunks = [b'data: {"item": {"id": "msg_one001"}}\n\n', b'data: {"id": "msg_one001"}\n\n',
              b'data: {"item": {"id": "fc_', b'two0002"}}\n\n']  # fmt: skip
    out, claims, at = await relayed(chunks)
    assert out == chunks  # byte for byte
    assert claims == [{"msg_one001"}, {"fc_two0002"}]
    assert at == [0, 3]  # before the first chunk, and before the one that completes the id


IDS = st.from_regex(r"(resp|msg|fc|rs)_[A-Za-z0-9]{6,40}", fullmatch=True)


@settings(deadline=None)  # a loaded machine must not fail an example
@given(
    st.lists(IDS, min_size=1, max_size=4, unique=True),
    st.lists(st.integers(1, 400), max_size=12),
)
async def test_every_id_of_a_stream_is_claimed_however_it_is_cut(
    ids: list[str], cuts: list[int]
) -> None:
    """Cuts of at least a whole id's length apart: each id lies across two chunks at most."""
    stream = b"".join(
        b'event: response.output_item.added\ndata: {"item": {"id": "%s"}}\n\n' % i.encode()
        for i in ids
    )
    points = sorted({0, len(stream), *[c for c in _spaced(cuts) if c < len(stream)]})
    chunks = [stream[a:b] for a, b in pairwise(points)]
    out, claims, _ = await relayed(chunks)
    assert b"".join(out) == stream
    assert set().union(*claims) == set(ids)


def _spaced(steps: list[int]) -> list[int]:
    """Cut points at least 64 bytes apart (longer than any id's ``"id": "..."``)."""
    at, points = 0, []
    for step in steps:
        at += 64 + step
        points.append(at)
    return points


async def test_an_id_spread_over_three_chunks_is_claimed() -> None:
    """A chunk shorter than the id in its middle: the carry is the tail of all read so far."""
    chunks = [b'data: {"item": {"id": "msg_', b"abc", b'def123"}}\n\n']
    out, claims, _ = await relayed(chunks)
    assert out == chunks
    assert set().union(*claims) == {"msg_abcdef123"}
