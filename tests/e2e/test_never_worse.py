"""Never worse than no proxy: the same conversations sent to the strict demo upstream with and
without the proxy (every request the upstream accepts unaided is answered through the proxy),
and an overflow's own figures answered by lowering the reply limit, not by refitting."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.conftest import assert_no_plan_fallbacks
from tests.proxy.shapes import SHAPES, requests

PATHS = {"chat": "chat/completions", "responses": "responses", "anthropic": "messages"}
APIS = ["chat_completions", "responses", "messages"]
HEADERS = {"authorization": "Bearer sk-test", "x-api-key": "sk-test"}


def post(client: httpx.Client, base: str, fmt: str, body: dict[str, Any]) -> int:
    return client.post(f"{base}/v1/{PATHS[fmt]}", json=body, headers=HEADERS).status_code


def through_proxy(
    upstream_app: Starlette, tmp_path: Path, window: int, body: dict[str, Any]
) -> httpx.Response:
    """``body`` sent to ``/v1/messages`` through a proxy that configures ``claude-x`` at
    ``window``, in front of ``upstream_app``; the proxy made no plan fallback."""
    with BackgroundServer(upstream_app) as upstream:
        config = {
            "upstreams": {"demo": {"base_url": f"{upstream.url}/v1", "apis": APIS}},
            "default_upstream": "demo",
            "data_dir": str(tmp_path / "data"),
            "models": {"claude-x": {"context_window": window}},
        }
        app = create_app(load_settings(None, **config))
        with BackgroundServer(app) as proxy:
            got = httpx.post(f"{proxy.url}/v1/messages", json=body, headers=HEADERS, timeout=60)
        assert_no_plan_fallbacks(app)
    return got


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(PATHS))
def test_every_request_the_upstream_takes_alone_is_answered_through_the_proxy(
    fmt: str, tmp_path: Path
) -> None:
    outcomes: Counter[tuple[int, int]] = Counter()
    for window in (4096, 16_000):
        with ExitStack() as stack:
            upstream = stack.enter_context(BackgroundServer(create_upstream(window=window)))
            config = {
                "upstreams": {"demo": {"base_url": f"{upstream.url}/v1", "apis": APIS}},
                "default_upstream": "demo",
                "data_dir": str(tmp_path / f"data-{window}"),
                "models": {
                    "gpt-x": {"context_window": window, "tokenizer": "o200k_base"},
                    "claude-x": {"context_window": window},
                },
            }
            app = create_app(load_settings(None, **config))
            proxy = stack.enter_context(BackgroundServer(app))
            client = stack.enter_context(httpx.Client(timeout=60))
            model = "claude-x" if fmt == "anthropic" else "gpt-x"
            for k, shape in enumerate(SHAPES):
                for n, body in enumerate(requests(shape, fmt, 24, window, k, model)):
                    if fmt == "anthropic":
                        body["max_tokens"] = 32_000 if window >= 16_000 else window // 4
                    alone = post(client, upstream.url, fmt, body)
                    through = post(client, proxy.url, fmt, body)
                    outcomes[alone, through] += 1
                    if alone == 200:
                        assert through == 200, (shape, window, n)
            assert_no_plan_fallbacks(app)
    assert outcomes[200, 200] > 0
    assert outcomes[400, 200] > 0, outcomes  # and requests it refused alone were answered


def test_an_overflow_with_figures_lowers_the_reply_limit_by_them(tmp_path: Path) -> None:
    """Anthropic's ``a + b > c``: the proxy believed the window larger (configured at 40k, the
    upstream's is 24k), so the limit went too high. The retry sends the very same prompt with
    the limit the upstream's figures leave, ``c - a``; nothing is refitted (the proxy's own
    estimate of the tool definitions could have left it no room)."""
    upstream_app = create_upstream(window=24_000)
    tools = [{"name": f"tool_{k}", "description": "Run a step of the build. " * 40,
              "input_schema": {"type": "object", "properties": {}}} for k in range(12)]  # fmt: skip
    body = {
        "model": "claude-x",
        "max_tokens": 16_000,
        "system": "You are a build agent.",
        "tools": tools,
        "messages": [{"role": "user", "content": "Build it. " + "step " * 6000}],
    }
    got = through_proxy(upstream_app, tmp_path, 40_000, body)
    assert got.status_code == 200, got.text
    first, retry = upstream_app.state.received[-2:]
    error = orjson.loads(orjson.dumps(first))  # what the upstream refused: a + b > c
    assert error["max_tokens"] == 16_000
    assert {k: v for k, v in retry.items() if k != "max_tokens"} == {
        k: v for k, v in first.items() if k != "max_tokens"
    }
    assert retry["max_tokens"] < 16_000
    assert "max-tokens-lowered 16000->" in got.headers["x-contextwarden-actions"]
    assert got.headers["x-contextwarden-retries"] == "1"


@pytest.mark.parametrize("words", [1900, 2050])
def test_before_calibration_the_reply_limit_keeps_the_floor_the_window_has_room_for(
    tmp_path: Path, words: int
) -> None:
    """A Claude-Code-sized ask (32,000) on a model the proxy only estimates, at a 24k window,
    before any answer calibrated the count: the estimate (21.6k and 23.4k) left 2,352 and 552
    tokens for the reply, where the upstream had 7,400 and 6,200 of room by its own count.
    The limit goes at the policy's floor (4,096), which the upstream takes."""
    upstream_app = create_upstream(window=24_000)
    steps = " ".join(f"module_{i % 97} compiled in {i} ms;" for i in range(words))
    body = {
        "model": "claude-x",
        "max_tokens": 32_000,
        "system": "You are a build agent.",
        "messages": [{"role": "user", "content": "Build the project and report. " + steps}],
    }
    got = through_proxy(upstream_app, tmp_path, 24_000, body)
    assert got.status_code == 200, got.text
    assert got.headers["x-contextwarden-retries"] == "0"
    (sent,) = upstream_app.state.received
    assert sent["max_tokens"] == 4096
    assert "uncertain-forwarded" in got.headers["x-contextwarden-actions"]
