"""The upstream's own prompt count, against ours, as a drift metric."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import orjson
import pytest
import respx

from strategies.tokens import ChatCounter, count_prompt
from tests.conftest import O200K
from tests.proxy.upstreams.test_forwarding import BASE, OK, chat, config_with, running

COUNTER = ChatCounter(lambda t: len(O200K.encode_ordinary(t)))


@respx.mock
async def test_an_upstream_that_counts_more_shows_in_the_drift_metric(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        sent = orjson.loads(request.content)["messages"]
        theirs = round(count_prompt(COUNTER, sent) * 1.3)
        return httpx.Response(200, json={**OK, "usage": {"prompt_tokens": theirs}})

    respx.post(f"{BASE}/chat/completions").mock(side_effect=answer)
    async with running(config_with(monkeypatch)) as client:
        trimmed = await client.post("/v1/chat/completions", json=chat(8))
        assert trimmed.headers["x-contextwarden-count"] == "exact"
        small = await client.post("/v1/chat/completions", json=chat(0))
        assert small.headers["x-contextwarden-count"] == "bound"  # not counted: not observed
        metrics = (await client.get("/metrics")).text
    assert 'contextwarden_usage_drift_ratio_count{model="small"} 1.0' in metrics
    assert 'contextwarden_usage_drift_ratio_bucket{le="1.2",model="small"} 0.0' in metrics
    assert 'contextwarden_usage_drift_ratio_bucket{le="1.5",model="small"} 1.0' in metrics


async def test_a_streams_final_usage_is_read_from_its_tail_and_the_bytes_pass_unchanged() -> None:
    from proxy.formats.chat import CHAT
    from proxy.formats.responses import RESPONSES
    from proxy.request.usage import tapped

    chat_chunks = [
        b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n',
        b"data: " + b"x" * 70000 + b"\n\n",
        b'data: {"choices": [], "usage": {"prompt_tokens": 123, "completion_tokens": 4}}\n\n',
        b"data: [DONE]\n\n",
    ]
    responses_chunks = [
        b'event: response.created\ndata: {"type": "response.created", "response": {"usage": null}}\n\n',
        b'event: response.completed\ndata: {"type": "response.completed", "response": {"usage": {"input_tokens": 77}}}\n\n',
    ]
    for fmt, chunks, expected in ((CHAT, chat_chunks, 123), (RESPONSES, responses_chunks, 77)):
        seen: list[int] = []

        async def source(chunks: list[bytes] = chunks) -> AsyncIterator[bytes]:
            for c in chunks:
                yield c

        async def record(n: int, seen: list[int] = seen) -> None:
            seen.append(n)

        relayed = [c async for c in tapped(source(), fmt, record)]
        assert relayed == chunks
        assert seen == [expected]
