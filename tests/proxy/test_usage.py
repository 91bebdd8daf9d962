"""The upstream's own prompt count, against ours, as a drift metric."""

from __future__ import annotations

import httpx
import orjson
import pytest
import respx

from strategies.tokens import ChatCounter, count_prompt
from tests.conftest import O200K
from tests.proxy.test_forwarding import BASE, OK, chat, config_with, running

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
