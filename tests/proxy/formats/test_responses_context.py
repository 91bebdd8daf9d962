"""The wire side of Responses ``context_management`` served (proxy/formats/responses_context.py):
what is asked, the item put first in a whole answer and in a stream cut anywhere, and which
upstreams it is served for."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.config.catalog import Upstream
from proxy.formats.responses_context import DEFAULT, asked, carried_body, carried_stream

ITEM = {"type": "compaction", "id": "cmp_1", "encrypted_content": "cw-compaction-1:x"}


def event(kind: str, number: int, **data: Any) -> bytes:
    body = {"type": kind, "sequence_number": number, **data}
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(body) + b"\n\n"


MESSAGE = {"type": "message", "id": "m1", "role": "assistant", "content": []}
STREAM = b"".join([
    event("response.created", 0, response={"id": "r", "output": []}),
    event("response.in_progress", 1, response={"id": "r", "output": []}),
    event("response.output_item.added", 2, output_index=0, item=MESSAGE),
    event("response.output_text.delta", 3, output_index=0, content_index=0, delta="hi"),
    event("response.output_item.done", 4, output_index=0, item=MESSAGE),
    event("response.completed", 5, response={"id": "r", "output": [MESSAGE]}),
])  # fmt: skip


def test_what_is_asked() -> None:
    body = {"model": "m", "input": "hi", "context_management": [{"type": "compaction",
            "compact_threshold": 5000}], "store": False}  # fmt: skip
    rest, at = asked(body)
    assert at == 5000 and rest == {"model": "m", "input": "hi", "store": False}
    assert asked({"context_management": [{"type": "compaction"}]})[1] == DEFAULT
    assert asked({"context_management": [{"type": "other"}]})[1] is None
    assert asked({"context_management": "nonsense"}) == ({}, None)


def test_a_whole_answer_has_the_item_first() -> None:
    body = orjson.dumps({"id": "r", "output": [MESSAGE], "status": "completed"})
    assert orjson.loads(carried_body(body, ITEM))["output"] == [ITEM, MESSAGE]
    assert carried_body(b"not json", ITEM) == b"not json"


async def relayed(chunks: list[bytes]) -> bytes:
    async def source() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return b"".join([c async for c in carried_stream(source(), ITEM)])


def parsed(raw: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: ")]


def test_a_stream_has_the_item_first_and_is_renumbered() -> None:
    events = parsed(asyncio.run(relayed([STREAM])))
    assert [e["sequence_number"] for e in events] == list(range(8))
    assert events[2]["type"] == "response.output_item.added" and events[2]["item"] == ITEM
    assert events[3]["type"] == "response.output_item.done" and events[3]["output_index"] == 0
    assert [e.get("output_index") for e in events[4:7]] == [1, 1, 1]
    assert events[-1]["response"]["output"] == [ITEM, MESSAGE]
    assert asyncio.run(relayed([STREAM])).startswith(STREAM.split(b"\n\n")[0])  # as it came


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, len(STREAM) - 1), max_size=12, unique=True))
def test_a_stream_cut_anywhere_gives_the_same_events(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(STREAM)]
    chunks = [STREAM[a:b] for a, b in itertools.pairwise(points)]
    assert asyncio.run(relayed(chunks)) == asyncio.run(relayed([STREAM]))


def test_served_for_upstreams_without_it() -> None:
    def upstream(url: str, mode: str = "auto") -> str:
        return Upstream(base_url=url, context_management=mode).responses_context  # type: ignore[arg-type]

    assert upstream("https://api.openai.com/v1") == "forward"
    assert upstream("https://team.openai.azure.com/openai/v1") == "forward"
    assert upstream("http://127.0.0.1:11434/v1") == "serve"
    assert upstream("https://api.openai.com/v1", "serve") == "serve"
    assert upstream("http://127.0.0.1:8000/v1", "strip") == "strip"
