"""The proxy's HTTP behaviour against respx-mocked upstreams, through the ASGI app."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import pytest
import respx

from proxy.app import create_app
from proxy.config.settings import load_settings
from tests.conftest import assert_no_plan_fallbacks
from tests.respx_transport import HttpxTransport

BASE = "http://upstream.test/v1"
OK = {
    "id": "c1",
    "object": "chat.completion",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}


@asynccontextmanager
async def running(
    config: dict[str, Any], fallbacks: bool = False
) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan run, reached in-process through httpx's ASGI transport; no
    plan may fall back to the safe plan in its life, unless the test is about ``fallbacks``."""
    with tempfile.TemporaryDirectory() as data:
        config = {"data_dir": data, **config}
        async with _running(config, fallbacks) as client:
            yield client


@asynccontextmanager
async def _running(
    config: dict[str, Any], fallbacks: bool = False
) -> AsyncIterator[httpx.AsyncClient]:
    # respx mocks httpx, so these in-process tests send with the httpx transport.
    app = create_app(load_settings(None, **config), HttpxTransport())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            yield c
        if not fallbacks:
            assert_no_plan_fallbacks(app)


def config_with(monkeypatch: pytest.MonkeyPatch, **extra: Any) -> dict[str, Any]:
    monkeypatch.setenv("DEMO_UPSTREAM_KEY", "sk-upstream-secret")
    return {
        "upstreams": {"demo": {"base_url": BASE, "api_key_env": "DEMO_UPSTREAM_KEY"}},
        "default_upstream": "demo",
        "models": {"small": {"context_window": 600, "tokenizer": "o200k_base"}},
        # These tests are about forwarding; summaries have their own (tests/e2e/test_checkpoints).
        "policies": {"default": {"summarize": False}},
        **extra,
    }


@pytest.fixture
async def client(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    async with running(config_with(monkeypatch)) as c:
        yield c


def chat(n: int = 1, **extra: Any) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for i in range(n):
        msgs += [
            {"role": "user", "content": f"q{i} " + "word " * 40},
            {"role": "assistant", "content": "a " * 40},
        ]
    msgs.append({"role": "user", "content": "last"})
    return {"model": "small", "messages": msgs, "max_tokens": 50, **extra}


@respx.mock
async def test_upstream_key_replaces_client_authorization_and_hop_headers_are_dropped(
    client: httpx.AsyncClient,
) -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    await client.post(
        "/v1/chat/completions",
        json=chat(),
        headers={
            "authorization": "Bearer sk-client",
            "connection": "keep-alive, x-hop",
            "x-hop": "1",
            "x-trace": "t1",
        },
    )
    sent = route.calls.last.request
    assert sent.headers["authorization"] == "Bearer sk-upstream-secret"
    assert "x-hop" not in sent.headers
    assert sent.headers["x-trace"] == "t1"
    assert sent.url.host == "upstream.test"


@respx.mock
async def test_client_authorization_passes_through_without_an_upstream_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DEMO_UPSTREAM_KEY", raising=False)
    config: dict[str, Any] = {
        "upstreams": {"demo": {"base_url": BASE}},
        "default_upstream": "demo",
        "policies": {"default": {"summarize": False}},
    }
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    async with running(config) as c:
        await c.post(
            "/chat/completions", json=chat(), headers={"authorization": "Bearer sk-client"}
        )
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-client"


@respx.mock
async def test_host_header_never_steers_the_upstream(client: httpx.AsyncClient) -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(return_value=httpx.Response(200, json=OK))
    answer = await client.post(
        "/v1/chat/completions", json=chat(), headers={"host": "evil.example"}
    )
    if answer.status_code == 403:  # a proxy holding a key answers only to its own host names
        assert not route.called
    else:
        assert route.calls.last.request.url.host == "upstream.test"


@respx.mock
async def test_upstream_errors_pass_through_with_their_headers(client: httpx.AsyncClient) -> None:
    body = (
        b'{"error": {"message": "slow down", "type": "rate_limit", "code": "rate_limit_exceeded"}}'
    )
    respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(
            429, content=body, headers={"retry-after": "7", "content-type": "application/json"}
        )
    )
    response = await client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert response.content == body


@respx.mock
async def test_connect_failure_is_502_and_timeout_is_504(client: httpx.AsyncClient) -> None:
    route = respx.post(f"{BASE}/chat/completions")
    route.side_effect = httpx.ConnectError("refused")
    response = await client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unavailable"
    route.side_effect = httpx.ReadTimeout("slow")
    response = await client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"


VLLM_OVERFLOW = (
    b'{"object": "error", "message": "This model\'s maximum context length is 400 tokens. However, you '
    b"requested 700 tokens (650 in the messages, 50 in the completion). Please reduce the length of "
    b'the messages or completion.", "type": "BadRequestError", "param": null, "code": 400}'
)


@respx.mock
async def test_vllm_overflow_is_retried_smaller_and_the_window_learned(
    client: httpx.AsyncClient,
) -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(
        side_effect=[
            httpx.Response(400, content=VLLM_OVERFLOW),
            httpx.Response(200, json=OK),
            httpx.Response(200, json=OK),
        ]
    )
    response = await client.post("/v1/chat/completions", json=chat(4))
    assert response.status_code == 200
    assert response.headers["x-contextwarden-retries"] == "1"
    first, second = (orjson.loads(c.request.content) for c in route.calls)
    assert len(second["messages"]) < len(first["messages"])
    assert second["messages"][-1] == {"role": "user", "content": "last"}
    # The learned window (400 upstream tokens) is applied to the next request up front.
    await client.post("/v1/chat/completions", json=chat(4))
    third = orjson.loads(route.calls[2].request.content)
    assert len(third["messages"]) <= len(second["messages"])


@respx.mock
async def test_recovery_that_cannot_succeed_returns_the_upstreams_own_error(
    client: httpx.AsyncClient,
) -> None:
    route = respx.post(f"{BASE}/chat/completions").mock(
        return_value=httpx.Response(400, content=VLLM_OVERFLOW)
    )
    response = await client.post("/v1/chat/completions", json=chat(4))
    assert response.status_code == 400
    assert response.content == VLLM_OVERFLOW
    assert route.call_count <= 3  # the first try plus max_overflow_retries (2)


@respx.mock
async def test_gzip_error_body_is_inspected_but_relayed_raw(client: httpx.AsyncClient) -> None:
    import gzip

    packed = gzip.compress(VLLM_OVERFLOW)
    respx.post(f"{BASE}/chat/completions").mock(
        side_effect=[
            httpx.Response(400, content=packed, headers={"content-encoding": "gzip"}),
            httpx.Response(200, json=OK),
        ]
    )
    response = await client.post("/v1/chat/completions", json=chat(4))
    assert response.status_code == 200
    assert response.headers["x-contextwarden-retries"] == "1"


@respx.mock
async def test_sglang_overflow_inside_a_200_stream_is_retried(client: httpx.AsyncClient) -> None:
    error = b'data: {"error": {"message": "The input (700 tokens) is longer than the model\'s context length (400 tokens).", "code": 400}}\n\n'
    good = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\ndata: [DONE]\n\n'
    sse = {"content-type": "text/event-stream"}
    respx.post(f"{BASE}/chat/completions").mock(
        side_effect=[
            httpx.Response(200, content=error, headers=sse),
            httpx.Response(200, content=good, headers=sse),
        ]
    )
    response = await client.post("/v1/chat/completions", json=chat(4, stream=True))
    assert response.status_code == 200
    assert response.content == good
    assert response.headers["x-contextwarden-retries"] == "1"


@respx.mock
async def test_passthrough_keeps_method_path_query_and_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The proxy holds the key, so an org-wide path goes only when the operator lists it.
    config = config_with(monkeypatch, forward_paths=["files/*", "batches"])
    route = respx.delete(f"{BASE}/files/file-1?purge=true").mock(
        return_value=httpx.Response(200, json={"deleted": True})
    )
    up = respx.post(f"{BASE}/batches").mock(return_value=httpx.Response(200, content=b"raw-bytes"))
    async with running(config) as client:
        deleted = await client.delete("/v1/files/file-1?purge=true")
        assert deleted.json() == {"deleted": True}
        assert deleted.headers["x-contextwarden-actions"] == "not-fitted"
        assert route.called
        sent = await client.post("/v1/batches", content=b'{"x": 1}')
        assert sent.content == b"raw-bytes"
    assert up.calls.last.request.content == b'{"x": 1}'


async def test_body_over_the_limit_is_413(monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(config_with(monkeypatch, limits={"max_body_bytes": 1000})) as c:
        response = await c.post("/v1/chat/completions", content=b"x" * 2000)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
