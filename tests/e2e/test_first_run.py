"""What a first run says about a model no table knows (a local model, a provider's model newer
than litellm's table): its requests go untrimmed, so the first refusal of one, by an upstream that says the
prompt is too long, carries the three ways out after the upstream's own message (and in the
log); later refusals go as they came. Served by the quick start's proxy (the embedded default
config) in front of capture upstreams that refuse every prompt."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.responses import Response

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from tests.conftest import assert_no_plan_fallbacks
from tests.security.conftest import Capture, Seen, serving

OPENAI_OVERFLOW = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
ANTHROPIC_OVERFLOW = "prompt is too long: 250000 tokens > 200000 maximum"


def refuse(seen: Seen) -> Response:
    if seen.raw_path.endswith(b"/messages"):
        error = {"type": "invalid_request_error", "message": ANTHROPIC_OVERFLOW}
        return Response(orjson.dumps({"type": "error", "error": error}), 400)
    if seen.headers.get("authorization") == "Bearer sk-wrong":
        error = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
        return Response(orjson.dumps({"error": {**error, "code": "invalid_api_key"}}), 401)
    error = {"message": OPENAI_OVERFLOW, "type": "invalid_request_error", "param": "input"}
    body = {"error": {**error, "code": "context_length_exceeded"}}
    return Response(orjson.dumps(body), 400, media_type="application/json")


@pytest.fixture
def quick_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with ExitStack() as stack:
        openai: Capture = stack.enter_context(_serving())
        anthropic: Capture = stack.enter_context(_serving())
        openai.answer = anthropic.answer = refuse
        monkeypatch.setenv("OPENAI_BASE_URL", f"{openai.url}/v1")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("CONTEXTWARDEN_DATA_DIR", str(tmp_path))
        app = create_app(load_settings())
        yield stack.enter_context(BackgroundServer(app)).url
        assert_no_plan_fallbacks(app)


def _serving() -> Any:
    from contextlib import contextmanager

    return contextmanager(serving)()


def chat(url: str, model: str, key: str = "sk-caller") -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hello " * 50}]}
    headers = {"authorization": f"Bearer {key}"}
    return httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=60)


def message_of(answer: httpx.Response) -> str:
    return str(answer.json()["error"]["message"])


def test_the_first_refusal_names_the_ways_out(
    quick_start: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="contextwarden")
    first = chat(quick_start, "local-coder")
    assert first.status_code == 400
    assert first.headers["x-contextwarden-actions"] == "unknown-window"
    said = message_of(first)
    assert said.startswith(OPENAI_OVERFLOW + " [contextwarden: no context window is known")
    for way in ("models: {'local-coder': {context_window: N}}", "upstreams.openai.discovery",
                "overflow errors teach it"):  # fmt: skip
        assert way in said
    assert first.json()["error"]["code"] == "context_length_exceeded"  # the rest as it came
    # Once: the next refusal of that model is not told again. (What the first refusal taught,
    # a bound on the window (proxy/windows/bounds.py), fits the next request; this upstream
    # refuses every size, so it is refused in the end, by the upstream or by the proxy.)
    again = chat(quick_start, "local-coder")
    assert again.status_code == 400
    assert "no context window is known" not in message_of(again)
    told = [r.getMessage() for r in caplog.records if "no context window" in r.getMessage()]
    assert len(told) == 1 and "'local-coder'" in told[0]


def test_an_anthropic_refusal_is_told_in_anthropics_shape(quick_start: str) -> None:
    body = {
        "model": "claude-unreleased-1",  # in no table
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hello"}],
    }
    headers = {"x-api-key": "sk-ant-caller", "anthropic-version": "2023-06-01"}
    answer = httpx.post(f"{quick_start}/v1/messages", json=body, headers=headers, timeout=60)
    assert answer.status_code == 400
    payload = answer.json()
    assert payload["type"] == "error"
    assert payload["error"]["message"].startswith(ANTHROPIC_OVERFLOW + " [contextwarden:")
    assert "upstreams.anthropic.discovery" in payload["error"]["message"]


def test_other_refusals_and_known_windows_go_as_they_came(quick_start: str) -> None:
    wrong_key = chat(quick_start, "local-coder", key="sk-wrong")
    assert wrong_key.status_code == 401
    assert message_of(wrong_key) == "Incorrect API key provided"
    known = chat(quick_start, "gpt-4.1")  # litellm's table knows it: trimmed, retried, not told
    assert known.status_code == 400
    assert message_of(known) == OPENAI_OVERFLOW
