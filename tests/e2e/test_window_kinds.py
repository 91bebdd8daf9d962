"""The windows issue's case 2, end to end: a learned window must not spoil other kinds of
request, nor survive a restart to do so.

Thinking-heavy requests carry long signatures, which the upstream does not count and the
proxy's estimate does: their ratio of the upstream's count to the proxy's is far below a plain
request's. Then a plain request overflows the upstream's 4,096 window. Before windows were kept
in the upstream's units and the calibration told hidden tokens from shown ones, the retry
learned a window in the plain request's units from a ratio set by the thinking requests; it
persisted, and after a restart a plain conversation the upstream counts at a fraction of its
window was truncated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from tests.proxy.windows.test_mixed_kinds import answer_for, conversation, truth

WINDOW = 4096


def strict_upstream() -> Starlette:
    """Messages with a 4,096 window, counting thinking text but never a signature."""

    async def messages(request: Request) -> Response:
        payload = orjson.loads(await request.body())
        request.app.state.received.append(payload)
        status, body = answer_for(payload, WINDOW)
        return Response(orjson.dumps(body), status, media_type="application/json")

    app = Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])
    app.state.received = []
    return app


def ask(proxy_url: str, payload: dict[str, Any]) -> Any:
    with anthropic.Anthropic(base_url=proxy_url, api_key="sk-ant-x", max_retries=0) as client:
        return client.messages.with_raw_response.create(**payload)


def test_thinking_heavy_and_plain_requests_each_get_the_true_window_before_and_after_a_restart(
    tmp_path: Path,
) -> None:
    upstream_app = strict_upstream()
    received = upstream_app.state.received

    def goes_whole(proxy_url: str, payload: dict[str, Any]) -> None:
        assert truth(payload) + payload["max_tokens"] <= WINDOW * 0.6
        raw = ask(proxy_url, payload)
        assert raw.status_code == 200
        assert received[-1]["messages"] == payload["messages"], raw.headers
        assert raw.headers["x-contextwarden-retries"] == "0"

    with BackgroundServer(upstream_app) as upstream:
        config = {
            "upstreams": {"claude": {"base_url": f"{upstream.url}/v1", "apis": ["messages"]}},
            "default_upstream": "claude",
            "models": {"claude-x": {"context_window": WINDOW, "tokenizer": "estimate"}},
            "data_dir": str(tmp_path),
            "policies": {"default": {"summarize": False}},
        }
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            for seed in range(4):  # samples: the upstream counts a tenth of the estimate
                assert ask(proxy.url, conversation("thinking", 6 + seed, seed)).status_code == 200
            plain = conversation("plain", 60, 99)
            assert truth(plain) > WINDOW  # overflows, whatever the proxy believed
            assert ask(proxy.url, plain).status_code == 200
            for turns in (8, 10):  # 10 to 15 times the window by the proxy's own estimate
                goes_whole(proxy.url, conversation("thinking", turns, 40 + turns))
        with BackgroundServer(create_app(load_settings(None, **config))) as proxy:
            for turns in (6, 12, 16):
                goes_whole(proxy.url, conversation("plain", turns, 5))
            for turns in (7, 9):
                goes_whole(proxy.url, conversation("thinking", turns, 60 + turns))
