"""The quick start's proxy (the embedded default: OpenAI and Anthropic, each caller's own key)
sends a caller's key only to the provider it addressed: the upstream of the model it asked for,
or, for a request that names no model (``GET /v1/models``, a forwarded path), the one its API
speaks to (an Anthropic client's ``anthropic-version``). The key goes in the header it came in:
an Anthropic key is never re-sent as a bearer token."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest
from starlette.responses import Response

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from tests.conftest import assert_no_plan_fallbacks
from tests.security.conftest import Capture, Seen, serving

ANTHROPIC = {"x-api-key": "sk-ant-caller", "anthropic-version": "2023-06-01"}
OPENAI = {"authorization": "Bearer sk-openai-caller"}


@dataclass
class QuickStart:
    url: str
    openai: Capture
    anthropic: Capture

    def credentials(self, capture: Capture) -> set[tuple[str, str]]:
        return {
            (name, value)
            for seen in capture.seen
            for name, value in seen.headers.items()
            if name in ("authorization", "x-api-key", "api-key")
        }


def anthropic_answer(seen: Seen) -> Response:
    if seen.method == "GET":
        listed = {"data": [{"type": "model", "id": "claude-sonnet-4-6"}], "has_more": False}
        return Response(orjson.dumps(listed), media_type="application/json")
    content = [{"type": "text", "text": "ok"}]
    usage = {"input_tokens": 5, "output_tokens": 1}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
               "content": content, "stop_reason": "end_turn", "usage": usage}  # fmt: skip
    return Response(orjson.dumps(message), media_type="application/json")


@pytest.fixture
def quick_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[QuickStart]:
    with ExitStack() as stack:
        openai = stack.enter_context(contextmanager(serving)())
        anthropic = stack.enter_context(contextmanager(serving)())
        anthropic.answer = anthropic_answer
        monkeypatch.setenv("OPENAI_BASE_URL", f"{openai.url}/v1")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        monkeypatch.setenv("CONTEXTWARDEN_DATA_DIR", str(tmp_path))
        app = create_app(load_settings())
        url = stack.enter_context(BackgroundServer(app)).url
        yield QuickStart(url, openai, anthropic)
        assert_no_plan_fallbacks(app)


def test_each_key_reaches_only_the_provider_it_addressed(quick_start: QuickStart) -> None:
    with httpx.Client(base_url=quick_start.url, timeout=60) as client:
        message = {"model": "claude-sonnet-4-6", "max_tokens": 16,
                   "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
        assert client.post("/v1/messages", json=message, headers=ANTHROPIC).status_code == 200
        count = {k: v for k, v in message.items() if k != "max_tokens"}
        assert client.post("/v1/messages/count_tokens", json=count, headers=ANTHROPIC).is_success
        listed = client.get("/v1/models", params={"limit": 5}, headers=ANTHROPIC)
        assert listed.json()["data"][0]["id"] == "claude-sonnet-4-6"  # Anthropic's own list
        chat = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}
        assert client.post("/v1/chat/completions", json=chat, headers=OPENAI).status_code == 200
        assert client.get("/v1/models", headers=OPENAI).status_code == 200
        # A Claude model in OpenAI's format: its upstream serves Messages only; nothing is sent.
        wrong = client.post("/v1/chat/completions", json={**chat, "model": "claude-sonnet-4-6"},
                            headers=ANTHROPIC)  # fmt: skip
        assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "unsupported_api"
    assert [s.raw_path for s in quick_start.anthropic.seen] == [
        b"/v1/messages",
        b"/v1/messages/count_tokens",
        b"/v1/models",
    ]
    # Before the chat request, the proxy asks the server (a local one, here) for gpt-4.1's
    # window (proxy/windows/discovery.py): GETs, no body; no key but the caller's own.
    paths = [s.raw_path for s in quick_start.openai.seen]
    chat_at = paths.index(b"/v1/chat/completions")
    assert paths[chat_at:] == [b"/v1/chat/completions", b"/v1/models"]
    assert all(s.method == "GET" for s in quick_start.openai.seen[:chat_at])
    assert quick_start.credentials(quick_start.anthropic) == {("x-api-key", "sk-ant-caller")}
    assert quick_start.credentials(quick_start.openai) == {
        ("authorization", "Bearer sk-openai-caller")
    }
