"""Upstream faults through the real proxy (aiohttp transport) on loopback."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.e2e.test_checkpoints import over_budget_conversation

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def proxy_for(base_url: str, tmp_path: Path, **extra: Any) -> BackgroundServer:
    config = {
        "upstreams": {"up": {"base_url": base_url, **extra.pop("upstream", {})}},
        "default_upstream": "up",
        "models": {"m": {"context_window": 1024, "tokenizer": "o200k_base"}},
        "data_dir": str(tmp_path),
        **extra,
    }
    return BackgroundServer(create_app(load_settings(None, **config)))


def faulty_upstream() -> Starlette:
    async def rate_limited(request: Request) -> Response:
        body = {
            "error": {
                "message": "slow down",
                "type": "rate_limit_error",
                "code": "rate_limit_exceeded",
            }
        }
        return JSONResponse(
            body, 429, headers={"retry-after": "3", "x-ratelimit-remaining-requests": "0"}
        )

    async def broken(request: Request) -> Response:
        return JSONResponse({"error": {"message": "boom", "type": "server_error"}}, 503)

    async def slow(request: Request) -> Response:
        await asyncio.sleep(3)
        return JSONResponse({})

    async def cut(request: Request) -> Response:
        async def events() -> AsyncIterator[bytes]:
            yield b'data: {"choices": [{"index": 0, "delta": {"content": "partial"}}]}\n\n'
            await asyncio.sleep(0.05)
            raise ConnectionResetError("upstream died")

        return StreamingResponse(events(), media_type="text/event-stream")

    async def cut_messages(request: Request) -> Response:
        async def events() -> AsyncIterator[bytes]:
            start = {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                     "model": "m", "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 0}}  # fmt: skip
            yield b"event: message_start\ndata: " + orjson.dumps({"type": "message_start", "message": start}) + b"\n\n"  # fmt: skip
            block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}  # fmt: skip
            yield b"event: content_block_start\ndata: " + orjson.dumps(block) + b"\n\n"
            delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "partial"}}  # fmt: skip
            yield b"event: content_block_delta\ndata: " + orjson.dumps(delta) + b"\n\n"
            await asyncio.sleep(0.05)
            raise ConnectionResetError("upstream died")

        return StreamingResponse(events(), media_type="text/event-stream")

    async def cut_responses(request: Request) -> Response:
        async def events() -> AsyncIterator[bytes]:
            created = {"type": "response.created", "sequence_number": 0, "response": {
                "id": "resp_1", "object": "response", "created_at": 0, "status": "in_progress",
                "model": "m", "output": [], "tools": [], "parallel_tool_calls": True,
                "tool_choice": "auto"}}  # fmt: skip
            yield b"event: response.created\ndata: " + orjson.dumps(created) + b"\n\n"
            await asyncio.sleep(0.05)
            raise ConnectionResetError("upstream died")

        return StreamingResponse(events(), media_type="text/event-stream")

    routes = [
        Route("/cut/messages", cut_messages, methods=["POST"]),
        Route("/cut/responses", cut_responses, methods=["POST"]),
        Route("/429/chat/completions", rate_limited, methods=["POST"]),
        Route("/503/chat/completions", broken, methods=["POST"]),
        Route("/slow/chat/completions", slow, methods=["POST"]),
        Route("/cut/chat/completions", cut, methods=["POST"]),
    ]
    return Starlette(routes=routes)


@pytest.fixture(scope="module")
def upstream() -> Any:
    with BackgroundServer(faulty_upstream()) as server:
        yield server


@pytest.mark.parametrize(("path", "status"), [("429", 429), ("503", 503)])
def test_upstream_errors_pass_through_with_their_headers(
    upstream: Any, tmp_path: Path, path: str, status: int
) -> None:
    with proxy_for(f"{upstream.url}/{path}", tmp_path) as proxy:
        response = httpx.post(f"{proxy.url}/v1/chat/completions", json=BODY)
    assert response.status_code == status
    if status == 429:
        assert response.headers["retry-after"] == "3"
        assert response.headers["x-ratelimit-remaining-requests"] == "0"
        assert response.json()["error"]["code"] == "rate_limit_exceeded"


def test_connect_failure_is_502_in_openai_shape(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once closed
    with proxy_for(f"http://127.0.0.1:{port}/v1", tmp_path) as proxy:
        response = httpx.post(f"{proxy.url}/v1/chat/completions", json=BODY)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unavailable"


def test_timeout_is_504_in_openai_shape(upstream: Any, tmp_path: Path) -> None:
    with proxy_for(f"{upstream.url}/slow", tmp_path, upstream={"timeout": 0.5}) as proxy:
        started = time.monotonic()
        response = httpx.post(f"{proxy.url}/v1/chat/completions", json=BODY, timeout=10)
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"
    assert time.monotonic() - started < 2.5


def test_upstream_reset_mid_stream_ends_the_clients_stream_with_an_error_event(
    upstream: Any, tmp_path: Path
) -> None:
    with proxy_for(f"{upstream.url}/cut", tmp_path) as proxy:
        started = time.monotonic()
        with httpx.stream(
            "POST", f"{proxy.url}/v1/chat/completions", json={**BODY, "stream": True}, timeout=10
        ) as r:
            lines = [line for line in r.iter_lines() if line.startswith("data:")]
    assert time.monotonic() - started < 5, "the client was left hanging"
    assert "partial" in lines[0]
    assert "stream_interrupted" in lines[-1]


def test_a_messages_stream_broken_off_raises_in_the_anthropic_sdk(
    upstream: Any, tmp_path: Path
) -> None:
    """It ended with an OpenAI-shaped data line, which the anthropic SDK ignores: the partial
    answer came back as a whole one, with stop_reason None."""
    apis = {"apis": ["messages"]}
    with (  # noqa: SIM117 (the stream is opened inside the raises)
        proxy_for(f"{upstream.url}/cut", tmp_path, upstream=apis) as proxy,
        anthropic.Anthropic(base_url=proxy.url, api_key="sk", max_retries=0) as client,
        pytest.raises(anthropic.APIStatusError, match="broke off mid-stream"),
    ):
        with client.messages.stream(
            model="m", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            stream.get_final_message()


def test_a_responses_stream_broken_off_raises_in_the_openai_sdk(
    upstream: Any, tmp_path: Path
) -> None:
    apis = {"apis": ["responses"]}
    with (
        proxy_for(f"{upstream.url}/cut", tmp_path, upstream=apis) as proxy,
        openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk", max_retries=0) as client,
        pytest.raises(openai.APIError, match="broke off mid-stream"),
    ):
        for event in client.responses.create(model="m", input="hi", stream=True):
            assert event.type != "response.completed"


def test_redis_down_requests_still_succeed_and_the_fault_is_visible(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    app = create_upstream(window=1024)
    with BackgroundServer(app) as demo:
        config = {
            "upstreams": {"demo": {"base_url": f"{demo.url}/v1"}},
            "default_upstream": "demo",
            "models": {"demo-model": {"context_window": 1024, "tokenizer": "o200k_base"}},
            "data_dir": str(tmp_path),
            "checkpoints": {"backend": "redis", "url": f"redis://127.0.0.1:{dead}/0"},
        }
        with (
            BackgroundServer(create_app(load_settings(None, **config))) as proxy,
            openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk", max_retries=0) as client,
        ):
            raw = client.chat.completions.with_raw_response.create(
                model="demo-model",
                messages=over_budget_conversation(16),
                max_tokens=64,  # type: ignore[arg-type]
            )
            metrics = httpx.get(f"{proxy.url}/metrics").text
    assert raw.http_response.status_code == 200
    errors = next(
        line for line in metrics.splitlines() if line.startswith("contextwarden_store_errors_total")
    )
    assert float(errors.split()[-1]) >= 1


@pytest.mark.slow
def test_slow_summarizer_falls_back_to_truncation(tmp_path: Path) -> None:
    app = create_upstream(window=1024, summary_delay=3)
    with BackgroundServer(app) as demo:
        config = {
            "upstreams": {"demo": {"base_url": f"{demo.url}/v1"}},
            "default_upstream": "demo",
            "models": {"demo-model": {"context_window": 1024, "tokenizer": "o200k_base"}},
            "data_dir": str(tmp_path),
            "policies": {"default": {"summarizer": {"timeout": 0.5, "summarize_unseen": True}}},
        }
        with (
            BackgroundServer(create_app(load_settings(None, **config))) as proxy,
            openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk", max_retries=0) as client,
        ):
            started = time.monotonic()
            raw = client.chat.completions.with_raw_response.create(
                model="demo-model",
                messages=over_budget_conversation(16),
                max_tokens=64,  # type: ignore[arg-type]
            )
            elapsed = time.monotonic() - started
            metrics = httpx.get(f"{proxy.url}/metrics").text
    assert raw.http_response.status_code == 200
    assert "truncate_oldest" in raw.headers["x-contextwarden-actions"]
    assert elapsed < 2.5
    assert "contextwarden_summarizer_failures_total 1.0" in metrics
