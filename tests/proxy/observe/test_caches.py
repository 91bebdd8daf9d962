"""``caches: off`` (for debugging) turns every cross-request cache off (proxy/observe/memory.py
``CACHES``): they hold nothing, and the proxy answers the same bytes as with them on, and sends
the upstream the same bytes (a differential test over agent conversations in each format,
fitting and trimmed, summaries on as by default)."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench import agent_sized
from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.observe.memory import CACHES


class Recording:
    """An upstream answering each format with a body that names what it was sent, and
    recording every request; ``quiet`` waits until nothing has arrived for a while (the
    proxy's summaries are made in the background)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bytes]] = []
        self.last = time.monotonic()
        self.lock = threading.Lock()
        self.app = Starlette(routes=[Route("/v1/{path:path}", self.answer, methods=["POST"])])

    async def answer(self, request: Request) -> Response:
        body = await request.body()
        with self.lock:
            self.seen.append((request.url.path, body))
            self.last = time.monotonic()
        tag = hashlib.blake2b(body, digest_size=6).hexdigest()
        usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
        if request.url.path.endswith("/responses"):
            answer: dict[str, Any] = {
                "id": f"resp_{tag}",
                "object": "response",
                "status": "completed",
                "output": [
                    {
                        "type": "message",
                        "id": f"msg_{tag}",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": f"seen {tag}"}],
                    }
                ],
                "usage": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12},
            }
        elif request.url.path.endswith("/messages"):
            answer = {
                "id": f"msg_{tag}",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": f"seen {tag}"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 2},
            }
        else:
            message = {"role": "assistant", "content": f"seen {tag}"}
            answer = {
                "id": f"chatcmpl-{tag}",
                "object": "chat.completion",
                "created": 0,
                "model": "bench-agent",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": usage,
            }
        return Response(orjson.dumps(answer), media_type="application/json")

    def quiet(self, still: float = 0.05, limit: float = 10) -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and time.monotonic() - self.last < still:
            time.sleep(still / 2)


def config(url: str, data: Path, **extra: Any) -> dict[str, Any]:
    return {
        "upstreams": {
            "up": {"base_url": f"{url}/v1", "apis": ["chat_completions", "responses", "messages"]}
        },
        "default_upstream": "up",
        "models": {
            agent_sized.MODEL: {"context_window": agent_sized.WINDOW, "tokenizer": "o200k_base"}
        },
        "data_dir": str(data),
        **extra,
    }


def run(data: Path, **extra: Any) -> tuple[list[Any], list[tuple[str, bytes]], dict[str, Any]]:
    """Every answer's status, x-contextwarden headers and body; every request the upstream
    got; the memory figures, for one agent conversation per format."""
    upstream = Recording()
    answers: list[Any] = []
    with BackgroundServer(upstream.app) as up:
        app = create_app(load_settings(None, **config(up.url, data, **extra)))
        with BackgroundServer(app) as proxy, httpx.Client(base_url=proxy.url) as client:
            for _, path, write in agent_sized.FORMATS:
                for messages in agent_sized.passes(1)[0]:
                    r = client.post(path, content=write(messages))
                    ours = sorted(
                        (k, v) for k, v in r.headers.items() if k.startswith("x-contextwarden")
                    )
                    answers.append((r.status_code, ours, r.content))
                    upstream.quiet()
            memory = app.state.runtime.memory.figures()["caches"]
    return answers, upstream.seen, memory


@pytest.mark.slow
def test_caches_off_answers_and_forwards_the_same_bytes(tmp_path: Path) -> None:
    on, sent_on, held_on = run(tmp_path / "on")
    off, sent_off, held_off = run(tmp_path / "off", caches=False)
    assert any("truncate" in dict(h).get("x-contextwarden-actions", "") for _, h, _ in on)
    assert off == on
    assert sent_off == sent_on
    for name in CACHES:
        assert held_off[name]["entries"] == 0 and held_off[name]["limit_mb"] == 0, name
    assert all(held_on[name]["entries"] > 0 for name in CACHES), held_on


def test_caches_off_is_a_setting_a_file_may_say() -> None:
    assert load_settings(None, caches="off").caches is False
    assert load_settings(None).caches is True
